"""ai.onnx.ml tree ensembles: TreeEnsemble (5), TreeEnsembleRegressor and TreeEnsembleClassifier (1, 3), as ORT
1.32's CPU EP computes them (docs/design.md, "ai.onnx.ml tree ensembles").

Each node's attributes are packed once, at session creation, into one layout (`Packed`): every tree's branches and
leaves as NODE_WORDS words each (feature, mode and missing-value track, true and false node, a set's place), the
thresholds, the leaves' weights and targets in the order ORT adds them, the roots in ORT's order of trees, the
members of BRANCH_MEMBER sets and the base values. shaders/tree_ensemble.comp walks them: one invocation per
(sample, target) adds every tree's leaf in order (ORT's order and type of accumulation: bit for bit), with the
walk bounded by the deepest tree; SOFTMAX / SOFTMAX_ZERO and a classifier's labels take a second pass per sample.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from vkep.kernels import host
from vkep.kernels.base import (
    FLOAT64_SUFFIX,
    LOOP_BUDGET,
    Kernel,
    UnsupportedError,
    grid_1d,
    has_float64,
    pack_once,
)

SHADER = "tree_ensemble.comp"
WG = 64  # tree_ensemble.comp's workgroup
NODE_WORDS = 6  # (tree_ensemble.comp NODE_WORDS)
LEAF = 7
MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5}
MEMBER = 6
BIGSET = 8  # (tree_ensemble.comp: ORT's BRANCH_MEMBER_BIGSET)
AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
POSTS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
SOFTMAXES = (1, 3)
# TreeEnsemble 5's post_transform as ORT 1.32 reads it: the order of its own enum (POST_EVAL_TRANSFORM), where ONNX
# has 1 SOFTMAX and 2 LOGISTIC; vkep follows the CPU EP
ORT_POSTS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
SCORE, SOFTMAX, CLASSIFY = 0, 1, 2  # tree_ensemble.comp's MODEs
ONE_TARGET, USE_BASE, CLASS_SUMS, BINARY, POSITIVE = 1, 2, 4, 8, 16  # tree_ensemble.comp's flags
# ORT's TreeEnsembleCommon: parallel_tree_ (trees past which one row's trees are added apart) and parallel_N_ (rows
# past which the rows' trees are split among the threads)
PARALLEL_TREES, PARALLEL_ROWS = 80, 50


@functools.cache
def tree_chunks(rows: int, trees: int, one_target: bool, threads: int) -> int:
    """Into how many runs of trees ORT 1.32's CPU EP (TreeEnsembleCommon::ComputeAgg) splits a row's sum with
    `threads` threads: each run is added from zero, and the runs' sums then in order."""
    if threads <= 1 or trees == 0:
        return 1
    if rows == 1:  # sections B and B2: each tree apart (one target), or a run per thread
        return 1 if trees <= PARALLEL_TREES else trees if one_target else min(threads, trees)
    if rows <= PARALLEL_ROWS:  # sections C and C2
        return 1
    if trees > threads or (not one_target and trees == threads):  # sections D and D2
        return threads
    return 1  # sections E and E2


@dataclass
class Packed:
    """An ensemble in tree_ensemble.comp's layout."""

    nodes: np.ndarray  # uint32 [n, NODE_WORDS]
    values: np.ndarray  # thresholds, the trees' type
    weights: np.ndarray  # the trees' type
    targets: np.ndarray  # uint32
    roots: np.ndarray  # uint32
    sets: np.ndarray  # BRANCH_MEMBER members, the trees' type
    base: np.ndarray  # the trees' type (empty: none)
    n_targets: int
    depth: int  # branches on the longest path from a root to a leaf
    max_weights: int
    max_feature: int
    aggregate: int
    post: int

    @property
    def wide(self) -> bool:
        return self.values.dtype == np.float64

    def loop_iterations(self) -> int:
        """tree_ensemble.comp's loop iterations in one invocation (lavapipe's budget: LOOP_BUDGET)."""
        biggest_set = int(self.nodes[:, 5].max()) if len(self.nodes) else 0
        return len(self.roots) * (2 + self.depth * (1 + biggest_set) + self.max_weights) + 3 * self.n_targets


class _Builder:
    """Packed nodes in the order they are added."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.nodes: list[list[int]] = []
        self.values: list[float] = []
        self.weights: list[float] = []
        self.targets: list[int] = []
        self.sets: list[float] = []
        self.max_weights = 0

    def branch(self, feature: int, mode: int, missing_true: bool, value: float, members=()) -> int:
        if feature < 0:
            raise UnsupportedError(f"feature id {feature}")
        self.nodes.append([feature, mode | (int(missing_true) << 8), 0, 0, len(self.sets), len(members)])
        self.values.append(value)
        self.sets.extend(members)
        return len(self.nodes) - 1

    def leaf(self, weights: list[tuple[int, float]]) -> int:
        self.nodes.append([len(self.weights), LEAF, len(weights), 0, 0, 0])
        self.values.append(0.0)
        for target, w in weights:
            self.targets.append(target)
            self.weights.append(w)
        self.max_weights = max(self.max_weights, len(weights))
        return len(self.nodes) - 1

    def link(self, node: int, true_node: int, false_node: int) -> None:
        self.nodes[node][2], self.nodes[node][3] = true_node, false_node

    def packed(self, roots: list[int], base, n_targets: int, aggregate: int, post: int) -> Packed:
        nodes = np.array(self.nodes, np.uint32).reshape(-1, NODE_WORDS)
        depth = _depth(nodes, roots)
        branches = nodes[nodes[:, 1] & 0xFF != LEAF]
        return Packed(nodes, np.array(self.values, self.dtype), np.array(self.weights, self.dtype),
                      np.array(self.targets, np.uint32), np.array(roots, np.uint32), np.array(self.sets, self.dtype),
                      np.array(base, self.dtype), n_targets, depth, self.max_weights,
                      int(branches[:, 0].max()) if len(branches) else -1, aggregate, post)


def _depth(nodes: np.ndarray, roots: list[int]) -> int:
    """The most branches on a path from a root to a leaf (UnsupportedError past LOOP_BUDGET or on a cycle)."""
    depth: dict[int, int] = {}
    for root in roots:
        stack, on_path = [(root, False)], set()
        while stack:
            node, done = stack.pop()
            if node in depth:
                continue
            if nodes[node, 1] & 0xFF == LEAF:
                depth[node] = 0
                continue
            kids = (int(nodes[node, 2]), int(nodes[node, 3]))
            if done:
                on_path.discard(node)
                depth[node] = 1 + max(depth[k] for k in kids)
                if depth[node] > LOOP_BUDGET:
                    raise UnsupportedError(f"a tree {depth[node]} branches deep (past the loop budget)")
                continue
            if node in on_path:
                raise UnsupportedError("a tree with a cycle")
            on_path.add(node)
            stack.append((node, True))
            stack.extend((k, False) for k in kids if k not in depth)
            if any(k in on_path for k in kids):
                raise UnsupportedError("a tree with a cycle")
    return max((depth[r] for r in roots), default=0)


def _array(attrs: dict, name: str):
    value = attrs.get(name)
    return None if value is None else np.asarray(value)


def pack_v5(attrs: dict, x_dtype: str) -> Packed:
    """TreeEnsemble (ai.onnx.ml 5): the trees ORT builds from it (tree_ensemble_attribute.h, convert_to_v3), in
    the input's type (float32 or float64) as ORT's TreeEnsemble<T>."""
    dtype = np.float64 if x_dtype == "float64" else np.float32
    tensors = {}
    for name in ("leaf_weights", "nodes_splits", "membership_values", "nodes_modes"):
        value = _array(attrs, name)
        if value is not None and name != "nodes_modes" and value.dtype != dtype:
            raise UnsupportedError(f"TreeEnsemble: {name} of type {value.dtype} with a {x_dtype} input")
        tensors[name] = value
    ints = {name: list(attrs.get(name) or []) for name in (
        "leaf_targetids", "nodes_falseleafs", "nodes_falsenodeids", "nodes_featureids", "nodes_trueleafs",
        "nodes_truenodeids", "tree_roots", "nodes_missing_value_tracks_true")}
    weights, splits, modes = tensors["leaf_weights"], tensors["nodes_splits"], tensors["nodes_modes"]
    if weights is None or splits is None or modes is None:
        raise UnsupportedError("TreeEnsemble without leaf_weights, nodes_splits or nodes_modes")
    n_nodes, n_leaves = len(ints["nodes_featureids"]), len(ints["leaf_targetids"])
    n_targets = int(attrs.get("n_targets") or 0)
    if (any(len(ints[k]) != n_nodes for k in ("nodes_falseleafs", "nodes_falsenodeids", "nodes_trueleafs",
                                              "nodes_truenodeids"))
            or len(splits) != n_nodes or len(modes) != n_nodes or len(weights) != n_leaves
            or len(ints["nodes_missing_value_tracks_true"]) not in (0, n_nodes) or n_targets <= 0
            or any(not 0 <= t < n_targets for t in ints["leaf_targetids"])):
        raise UnsupportedError("TreeEnsemble with inconsistent attributes")
    aggregate, post = int(attrs.get("aggregate_function", 1)), int(attrs.get("post_transform", 0))
    if aggregate not in AGGREGATES.values() or not 0 <= post < len(ORT_POSTS):
        raise UnsupportedError(f"TreeEnsemble: aggregate_function {aggregate}, post_transform {post}")
    post = POSTS[ORT_POSTS[post]]
    # the members of each BRANCH_MEMBER node's set, in node order, each set ended by a NaN
    members: dict[int, list] = {}
    values = tensors["membership_values"] if tensors["membership_values"] is not None else np.zeros(0, dtype)
    at = 0
    for i, mode in enumerate(modes.tolist()):
        if mode == MEMBER:
            end = at
            while end < len(values) and not math.isnan(values[end]):
                end += 1
            members[i] = values[at:end].tolist()
            at = end + 1
            if not members[i]:  # (ORT reads the largest member of an empty set)
                raise UnsupportedError("TreeEnsemble: a BRANCH_MEMBER node with an empty set")
        elif mode not in MODES.values():
            raise UnsupportedError(f"TreeEnsemble: node mode {mode}")
    b = _Builder(dtype)
    missing = ints["nodes_missing_value_tracks_true"]
    placed: dict[tuple[bool, int], int] = {}

    def place(is_leaf: bool, i: int) -> int:
        key = (is_leaf, i)
        if key not in placed:
            if is_leaf:
                if not 0 <= i < n_leaves:
                    raise UnsupportedError(f"TreeEnsemble: leaf {i} of {n_leaves}")
                placed[key] = b.leaf([(ints["leaf_targetids"][i], weights[i])])
            else:
                if not 0 <= i < n_nodes:
                    raise UnsupportedError(f"TreeEnsemble: node {i} of {n_nodes}")
                mode = int(modes[i])
                if mode == MEMBER and not (len(members[i]) < 31 and 0 <= min(members[i]) and max(members[i]) <= 30):
                    # ORT's big sets: integers (else its session fails), the value truncated to one
                    if any(m != int(m) or not -2**31 <= m < 2**31 for m in members[i]):
                        raise UnsupportedError("TreeEnsemble: a large set of members not all int32 integers")
                    mode = BIGSET
                placed[key] = b.branch(ints["nodes_featureids"][i], mode, bool(missing and missing[i] == 1),
                                       0.0 if mode in (MEMBER, BIGSET) else splits[i], members.get(i, ()))
        return placed[key]

    roots = []
    for r in ints["tree_roots"]:
        if not 0 <= r < n_nodes:
            raise UnsupportedError(f"TreeEnsemble: tree root {r} of {n_nodes}")
        # (ORT: a root whose two children are the same leaf is that leaf, leaf_weights[root])
        leaf = (ints["nodes_falsenodeids"][r] == ints["nodes_truenodeids"][r] and ints["nodes_falseleafs"][r]
                and ints["nodes_trueleafs"][r])
        roots.append(place(bool(leaf), r))
        todo = [] if leaf else [r]
        while todo:
            i = todo.pop()
            kids = []
            for ids, leafs in (("nodes_truenodeids", "nodes_trueleafs"), ("nodes_falsenodeids", "nodes_falseleafs")):
                k, is_leaf = ints[ids][i], bool(ints[leafs][i])
                known = (is_leaf, k) in placed
                kids.append(place(is_leaf, k))
                if not is_leaf and not known:
                    todo.append(k)
            b.link(placed[(False, i)], *kids)
    return b.packed(roots, [], n_targets, aggregate, post)


def pack_v3(attrs: dict, x_dtype: str, prefix: str = "target") -> Packed:
    """TreeEnsembleRegressor (ai.onnx.ml 1, 3), ORT's TreeEnsembleCommon: float trees, or double ones for a float64
    input or where the *_as_tensor attributes hold the values and weights."""
    tensors = {k: _array(attrs, k) for k in ("base_values_as_tensor", "nodes_values_as_tensor",
                                              f"{prefix}_weights_as_tensor")}
    present = [k for k, v in tensors.items() if v is not None]
    if present and not {"nodes_values_as_tensor", f"{prefix}_weights_as_tensor"} <= set(present):
        raise UnsupportedError(f"{prefix} ensemble with only {present} as tensors")
    # (ORT's TreeEnsembleCommon<T, ThresholdType, float>: double trees for a float64 input, or where the values are
    # tensors of doubles)
    dtype = np.float64 if present or x_dtype == "float64" else np.float32
    if any(tensors[k].dtype != np.float64 for k in present):
        raise UnsupportedError("*_as_tensor attributes not of type double")
    ints = {name: list(attrs.get(name) or []) for name in (
        "nodes_falsenodeids", "nodes_featureids", "nodes_missing_value_tracks_true", "nodes_nodeids",
        "nodes_treeids", "nodes_truenodeids", f"{prefix}_ids", f"{prefix}_nodeids", f"{prefix}_treeids")}
    modes = list(attrs.get("nodes_modes") or [])
    values = tensors["nodes_values_as_tensor"]
    values = np.asarray(attrs.get("nodes_values") or [], np.float32) if values is None else values
    weights = tensors[f"{prefix}_weights_as_tensor"]
    weights = np.asarray(attrs.get(f"{prefix}_weights") or [], np.float32) if weights is None else weights
    base = tensors["base_values_as_tensor"]
    base = np.asarray(attrs.get("base_values") or [], np.float32) if base is None else base
    n = len(ints["nodes_treeids"])
    n_targets = int(attrs.get("n_targets") or 0)
    if (any(len(ints[k]) != n for k in ("nodes_falsenodeids", "nodes_featureids", "nodes_nodeids",
                                        "nodes_truenodeids"))
            or len(modes) != n or len(values) != n or n_targets <= 0 or n == 0
            or len(ints["nodes_missing_value_tracks_true"]) > n
            or any(len(ints[f"{prefix}_{k}"]) != len(weights) for k in ("ids", "nodeids", "treeids"))
            or any(not 0 <= t < n_targets for t in ints[f"{prefix}_ids"])):
        raise UnsupportedError(f"{prefix} ensemble with inconsistent attributes")
    aggregate = AGGREGATES.get(attrs.get("aggregate_function") or "SUM")
    post = POSTS.get(attrs.get("post_transform") or "NONE")
    if aggregate is None or post is None or any(m != "LEAF" and m not in MODES for m in modes):
        raise UnsupportedError(f"{prefix} ensemble: aggregate_function {attrs.get('aggregate_function')}, "
                               f"post_transform {attrs.get('post_transform')}, modes {sorted(set(modes))}")
    index: dict[tuple[int, int], int] = {}
    for i, key in enumerate(zip(ints["nodes_treeids"], ints["nodes_nodeids"], strict=True)):
        if key in index:
            raise UnsupportedError(f"node {key[1]} of tree {key[0]} twice")
        index[key] = i
    # the weights of each leaf, in ORT's order: sorted by (tree, node), then as listed
    leaf_weights: dict[int, list] = {}
    order = sorted(range(len(weights)), key=lambda k: (ints[f"{prefix}_treeids"][k], ints[f"{prefix}_nodeids"][k], k))
    for k in order:
        i = index.get((ints[f"{prefix}_treeids"][k], ints[f"{prefix}_nodeids"][k]))
        if i is None:
            raise UnsupportedError("a weight of a node that does not exist")
        if modes[i] == "LEAF":  # (ORT ignores the weights of branches)
            leaf_weights.setdefault(i, []).append((ints[f"{prefix}_ids"][k], weights[k]))
    b = _Builder(dtype)
    missing = ints["nodes_missing_value_tracks_true"]
    for i in range(n):
        if modes[i] == "LEAF":
            if i not in leaf_weights:
                raise UnsupportedError("a leaf without weights")
            b.leaf(leaf_weights[i])
        else:
            b.branch(ints["nodes_featureids"][i], MODES[modes[i]], i < len(missing) and missing[i] == 1, values[i])
    for i in range(n):
        if modes[i] != "LEAF":
            tree = ints["nodes_treeids"][i]
            kids = [index.get((tree, ints[k][i])) for k in ("nodes_truenodeids", "nodes_falsenodeids")]
            if None in kids or i in kids:
                raise UnsupportedError(f"node {ints['nodes_nodeids'][i]} of tree {tree}: a child missing or itself")
            b.link(i, *kids)
    # ORT's roots: the first node of each run of nodes of one tree, in the order listed
    trees = ints["nodes_treeids"]
    roots = [i for i in range(n) if i == 0 or trees[i] != trees[i - 1]]
    return b.packed(roots, base.tolist(), n_targets, aggregate, post)


def _least_loop_iterations(attrs: dict) -> int:
    """A lower bound of Packed.loop_iterations for the nodes_* form of an ensemble, in numpy without packing it: its
    trees (ORT's roots: runs of one tree id) times 2 plus the most branches on a path from a root, walked level by
    level and stopped once past the loop budget (packing a LightGBM forest of 4.85 M nodes in Python took 125 s
    before declining it at the budget). 0 where the attributes do not give it."""
    trees = np.asarray(attrs.get("nodes_treeids") or [], np.int64)
    nodes = np.asarray(attrs.get("nodes_nodeids") or [], np.int64)
    kids = [np.asarray(attrs.get(k) or [], np.int64) for k in ("nodes_truenodeids", "nodes_falsenodeids")]
    n = len(trees)
    if n == 0 or any(len(a) != n for a in (nodes, *kids)) or len(attrs.get("nodes_modes") or []) != n:
        return 0
    branch = np.array([m != "LEAF" for m in attrs["nodes_modes"]])
    roots = np.flatnonzero(np.r_[True, trees[1:] != trees[:-1]])
    width = int(max(nodes.max(), *(k.max() for k in kids))) + 1
    if nodes.min() < 0 or min(k.min() for k in kids) < 0:
        return 0
    keys = trees * width + nodes
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]

    def index(child: np.ndarray, at: np.ndarray) -> np.ndarray:  # (the nodes a branch names; -1 where none)
        wanted = trees[at] * width + child[at]
        pos = np.minimum(np.searchsorted(ordered, wanted), n - 1)
        return np.where(ordered[pos] == wanted, order[pos], -1)
    level, depth = roots[branch[roots]], 0
    while level.size and len(roots) * (2 + depth) <= LOOP_BUDGET and depth <= n:
        depth += 1
        below = np.concatenate([index(k, level) for k in kids])
        below = below[below >= 0]
        level = np.unique(below[branch[below]])
    return len(roots) * (2 + depth)


class TreeEnsembleBase(Kernel):
    """One walk of the packed trees per (sample, target), and for SOFTMAX or a classifier a pass per sample
    (module doc)."""

    classifier = False  # outputs: (label, probabilities), finished by tree_ensemble.comp's MODE 2
    flags = 0  # tree_ensemble.comp's flags the kind of ensemble adds

    @classmethod
    def ensemble(cls, attrs: dict, x_dtype: str) -> Packed:
        raise NotImplementedError

    @classmethod
    def packed_once(cls, attrs: dict, x_dtype: str) -> Packed:
        """cls.ensemble(attrs, x_dtype), packed once for the checks at GetCapability, its dry run and the session's
        kernel, which each ask for it (a forest of 200,000 nodes takes seconds to pack in Python)."""
        return pack_once((cls, x_dtype), attrs, lambda: cls.ensemble(attrs, x_dtype))

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if input_ranks and input_ranks[0] not in (1, 2, -1):
            return f"{cls.__name__} of an input of rank {input_ranks[0]}"
        least = _least_loop_iterations(attrs)
        if least > LOOP_BUDGET:  # (before packing: a large forest takes minutes to pack in Python)
            return f"{cls.__name__}: at least {least} loop iterations a walk (loop budget)"
        try:
            packed = cls.packed_once(attrs, (input_types or [None])[0] or "float32")
        except UnsupportedError as exc:
            return f"{cls.__name__}: {exc}"
        if packed.loop_iterations() > LOOP_BUDGET:
            return f"{cls.__name__}: {len(packed.roots)} trees {packed.depth} deep (loop budget)"
        return None

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        x_dtype = (input_types or [None])[0] or "float32"
        try:
            wide = x_dtype == "float64" or cls.packed_once(attrs, x_dtype).wide
        except UnsupportedError as exc:
            return str(exc)
        if wide and not has_float64(info):
            return f"{x_dtype} trees on a device without shaderFloat64"
        return None

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        self.x_dtype = input_types[0] if input_types and input_types[0] else "float32"
        self.packed = self.packed_once(attrs, self.x_dtype)
        p = self.packed
        # one persistent buffer: the nodes, then each other array at an offset aligned to 8 bytes
        blob, self.offsets = bytearray(), {}
        for name, arr in (("nodes", p.nodes), ("values", p.values), ("weights", p.weights), ("targets", p.targets),
                          ("roots", p.roots), ("sets", p.sets), ("base", p.base)):
            self.offsets[name] = len(blob)
            blob += arr.tobytes()
            blob += bytes(-len(blob) % 8)
        self.tables = bytes(blob) or bytes(8)
        del self.offsets["nodes"]
        self.offsets["labels"] = 0

    def y_dtype(self) -> str:
        return self.x_dtype

    def compute(self, call) -> None:
        x = call.inputs[0]
        p = self.packed
        if len(x.shape) not in (1, 2):
            raise UnsupportedError(f"{self.spec.op} of an input of rank {len(x.shape)}")
        n, stride = (1, x.shape[0]) if len(x.shape) == 1 else x.shape
        if p.max_feature >= stride:
            raise UnsupportedError(f"{self.spec.op}: feature {p.max_feature} of an input of {stride} features")
        y_dtype = self.y_dtype()
        label = call.output(0, (n,), "int64") if self.classifier else None
        y = call.output(1 if self.classifier else 0, (n, p.n_targets), y_dtype)
        if y.size == 0:
            return
        wide = p.wide or x.dtype == "float64" or y_dtype == "float64"
        dtype = "float32" + FLOAT64_SUFFIX if wide else "float32"
        one = p.n_targets == 1
        second = CLASSIFY if self.classifier else SOFTMAX if not one and p.post in SOFTMAXES else None
        scores = (call.scratch((2 if self.classifier else 1, n, p.n_targets), "float64" if wide else "float32")
                  if second is not None else None)
        constants = {"x64": int(x.dtype == "float64"), "th64": int(p.wide), "y64": int(y_dtype == "float64")}
        flags = ((ONE_TARGET if one else 0) | (USE_BASE if len(p.base) == (1 if one else p.n_targets) else 0)
                 | self.flags)
        push = {**self.offsets, "tables": call.persistent(self.tables), "x": x, "y": y, "scores": scores,
                "label": label, "n": y.size, "n_targets": p.n_targets, "stride": stride, "n_trees": len(p.roots),
                "depth": p.depth, "max_weights": p.max_weights if not one else 1, "aggregate": p.aggregate,
                "post": p.post, "flags": flags, "n_base": len(p.base),
                "chunks": tree_chunks(n, len(p.roots), one, host.cpu_ep_threads())}
        call.dispatch(SHADER, dtype, {**constants, "mode": SCORE}, push, grid_1d(y.size, WG), [x],
                      [scores if second is not None else y])
        if second is not None:
            call.dispatch(SHADER, dtype, {**constants, "mode": second}, {**push, "n": n}, grid_1d(n, WG), [scores],
                          [scores, y] + ([label] if label is not None else []))


class TreeEnsemble(TreeEnsembleBase):
    """TreeEnsemble (ai.onnx.ml 5): float32 or float64, output of the input's type."""

    @classmethod
    def ensemble(cls, attrs: dict, x_dtype: str) -> Packed:
        return pack_v5(attrs, x_dtype)


class TreeEnsembleRegressor(TreeEnsembleBase):
    """TreeEnsembleRegressor (ai.onnx.ml 1, 3): float32 output."""

    @classmethod
    def ensemble(cls, attrs: dict, x_dtype: str) -> Packed:
        return pack_v3(attrs, x_dtype)

    def y_dtype(self) -> str:
        return "float32"


class TreeEnsembleClassifier(TreeEnsembleBase):
    """TreeEnsembleClassifier (ai.onnx.ml 1, 3): int64 labels (string labels stay on the CPU EP) and float32
    probabilities, ORT's TreeAggregatorClassifier (sums; two classes: its binary cases)."""

    classifier = True

    @classmethod
    def ensemble(cls, attrs: dict, x_dtype: str) -> Packed:
        if attrs.get("classlabels_strings"):
            raise UnsupportedError("string class labels")
        labels = list(attrs.get("classlabels_int64s") or [])
        if len(labels) < 2:
            raise UnsupportedError(f"{len(labels)} class labels")
        packed = pack_v3({**attrs, "n_targets": len(labels), "aggregate_function": "SUM"}, x_dtype, "class")
        if len(packed.base) not in ((0, 1, 2) if len(labels) == 2 else (0, len(labels))):
            raise UnsupportedError(f"{len(packed.base)} base values for {len(labels)} classes")
        return packed

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        labels = np.array(attrs["classlabels_int64s"], np.int64)
        self.offsets["labels"] = len(self.tables)
        self.tables += labels.tobytes()
        weights = _array(attrs, "class_weights_as_tensor")
        weights = np.asarray(attrs.get("class_weights") or [], np.float32) if weights is None else weights
        binary = len(labels) == 2 and len(set(attrs.get("class_ids") or [])) == 1
        self.flags = CLASS_SUMS | (BINARY if binary else 0) | (0 if np.any(weights < 0) else POSITIVE)

    def y_dtype(self) -> str:
        return "float32"
