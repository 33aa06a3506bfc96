"""ai.onnx.ml tree ensembles: TreeEnsemble (5), TreeEnsembleRegressor and TreeEnsembleClassifier (1, 3), as ORT
1.32's CPU EP computes them (docs/design.md, "ai.onnx.ml tree ensembles").

Each node's attributes are packed once, at session creation, into one layout (`Packed`): every tree's branches and
leaves as NODE_WORDS words each (feature, mode and missing-value track, true and false node, a set's place), the
thresholds, the leaves' weights and targets in the order ORT adds them, the roots in ORT's order of trees, the
members of BRANCH_MEMBER sets and the base values (in numpy: a LightGBM forest has millions of nodes).
shaders/tree_ensemble.comp walks them: one invocation per (sample, target) adds every tree's leaf in order (ORT's
order and type of accumulation: bit for bit), with the walk bounded by the deepest tree; a forest past one
invocation's loop budget is walked in runs of trees, a dispatch each, the sums carried from one to the next in
scratch memory. SOFTMAX / SOFTMAX_ZERO and a classifier's labels take a second pass per sample.
"""

from __future__ import annotations

import functools
import itertools
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
    offset_tables,
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
# (tree_ensemble.comp's tables)
HEADER = ("nodes", "values", "weights", "targets", "roots", "sets", "base", "labels", "tree_lists", "list_starts")
CARRIED = 3  # values a (sample, target) carries from one run of trees to the next (tree_ensemble.comp: state)
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

    def tree_iterations(self) -> int:
        """tree_ensemble.comp's loop iterations for one tree of a walk, as lavapipe counts them (at most): a loop
        entered costs more than its iterations (its leaving pass counts), and each branch enters its set's loop.
        Measured with complete trees walked to the last level, one dispatch each: 5 + 2 depth with one weight a leaf
        (3,851 trees of depth 6 ran right, 3,859 were cut short; depths 3 and 10 alike), + 1 a weight (8 a leaf:
        4 + 2 depth + 8); a set's members as the weights."""
        biggest_set = int(self.nodes[:, 5].max()) if len(self.nodes) else 0
        return 4 + self.depth * (2 + biggest_set) + self.max_weights

    def runs(self) -> list[tuple[int, int]]:
        """The runs of trees (first, end) of tree_ensemble.comp's dispatches: as many trees each as one
        invocation's loop budget (LOOP_BUDGET) walks, less a second pass's loops over the targets."""
        # (less a search of the tree lists: at most 33 steps)
        step = (LOOP_BUDGET - 3 * self.n_targets - 64) // self.tree_iterations()
        if step < 1:
            raise UnsupportedError(f"a tree {self.depth} branches deep (past the loop budget)")
        trees = len(self.roots)
        return [(a, min(a + step, trees)) for a in range(0, trees, step)] or [(0, 0)]

    def tree_lists(self) -> tuple[np.ndarray, np.ndarray]:
        """The trees each target walks, in order: (the lists one after the other, where each target's starts and
        the last ends). A tree none of whose leaves has a weight for a target adds nothing to it (a boosted
        classifier's trees are each for one class), but one target adds every leaf's first weight: every tree."""
        trees = np.arange(len(self.roots), dtype=np.uint32)
        hits = None if self.n_targets == 1 else self._tree_targets()
        if hits is None:
            return np.tile(trees, self.n_targets), np.arange(self.n_targets + 1, dtype=np.uint32) * len(trees)
        walks = np.zeros((self.n_targets, len(trees)), bool)  # (target, tree): the tree adds to the target
        walks[hits[1], hits[0]] = True
        target, tree = np.nonzero(walks)  # (in target order, then tree order)
        return tree.astype(np.uint32), np.searchsorted(target, np.arange(self.n_targets + 1)).astype(np.uint32)

    def _tree_targets(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(tree, target) of every weight of a leaf each tree reaches, walked level by level from the roots; None
        where the trees share so many nodes that the walk grows past the nodes (then every tree is walked)."""
        node, tree = self.roots.astype(np.int64), np.arange(len(self.roots), dtype=np.int64)
        leaf = self.nodes[:, 1] & 0xFF == LEAF
        found_trees, found_targets = [], []
        while node.size:
            if node.size > 2 * len(self.nodes):
                return None
            at = leaf[node]
            first, count = self.nodes[node[at], 0].astype(np.int64), self.nodes[node[at], 2].astype(np.int64)
            # each leaf's weights: first, first + 1, ..., first + count - 1
            weight = np.repeat(first - np.cumsum(count) + count, count) + np.arange(count.sum())
            found_trees.append(np.repeat(tree[at], count))
            found_targets.append(self.targets[weight].astype(np.int64))
            branch = node[~at]
            node = self.nodes[branch, 2:4].astype(np.int64).ravel()
            tree = np.repeat(tree[~at], 2)
        return np.concatenate(found_trees), np.concatenate(found_targets)


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
    """The most branches on a path from a root to a leaf, walked level by level (UnsupportedError past LOOP_BUDGET
    or on a cycle: a walk longer than the branches)."""
    branch = nodes[:, 1] & 0xFF != LEAF
    level = np.unique(np.asarray(roots, np.int64))
    level, depth = level[branch[level]], 0
    while level.size:
        depth += 1
        if depth > LOOP_BUDGET:
            raise UnsupportedError(f"a tree {depth} branches deep (past the loop budget)")
        if depth > int(branch.sum()):
            raise UnsupportedError("a tree with a cycle")
        below = nodes[level, 2:4].ravel().astype(np.int64)
        if below.size > len(nodes):  # (trees that share nodes: each once, so that a level never passes the nodes)
            below = np.unique(below)
        level = below[branch[below]]
    return depth


def _array(attrs: dict, name: str):
    value = attrs.get(name)
    return None if value is None else np.asarray(value)


def _values(attrs: dict, name: str, dtype=np.int64) -> np.ndarray:
    """An INTS or FLOATS attribute as an array of `dtype` (empty where absent): the kernels read them as arrays
    (array_attributes), tests and other callers may give lists."""
    value = attrs.get(name)
    return np.asarray([] if value is None else value, dtype)


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
    ints = {name: _values(attrs, name).tolist() for name in (
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
    ints = {name: _values(attrs, name) for name in (
        "nodes_falsenodeids", "nodes_featureids", "nodes_missing_value_tracks_true", "nodes_nodeids",
        "nodes_treeids", "nodes_truenodeids", f"{prefix}_ids", f"{prefix}_nodeids", f"{prefix}_treeids")}
    modes = attrs.get("nodes_modes") or []
    values = tensors["nodes_values_as_tensor"]
    values = _values(attrs, "nodes_values", np.float32) if values is None else values
    weights = tensors[f"{prefix}_weights_as_tensor"]
    weights = _values(attrs, f"{prefix}_weights", np.float32) if weights is None else weights
    base = tensors["base_values_as_tensor"]
    base = _values(attrs, "base_values", np.float32) if base is None else base
    n = len(ints["nodes_treeids"])
    n_targets = int(attrs.get("n_targets") or 0)
    target = ints[f"{prefix}_ids"]
    if (any(len(ints[k]) != n for k in ("nodes_falsenodeids", "nodes_featureids", "nodes_nodeids",
                                        "nodes_truenodeids"))
            or len(modes) != n or len(values) != n or n_targets <= 0 or n == 0
            or len(ints["nodes_missing_value_tracks_true"]) > n
            or any(len(ints[f"{prefix}_{k}"]) != len(weights) for k in ("ids", "nodeids", "treeids"))
            or not np.all((target >= 0) & (target < n_targets))):
        raise UnsupportedError(f"{prefix} ensemble with inconsistent attributes")
    aggregate = AGGREGATES.get(attrs.get("aggregate_function") or "SUM")
    post = POSTS.get(attrs.get("post_transform") or "NONE")
    code = np.fromiter(map({"LEAF": LEAF, **MODES}.get, modes, itertools.repeat(255)), np.uint32, n)
    if aggregate is None or post is None or np.any(code == 255):
        raise UnsupportedError(f"{prefix} ensemble: aggregate_function {attrs.get('aggregate_function')}, "
                               f"post_transform {attrs.get('post_transform')}, modes {sorted(set(modes))}")
    leaf = code == LEAF
    trees, ids = ints["nodes_treeids"], ints["nodes_nodeids"]
    locate = _Locator(trees, ids)
    # the weights of each leaf, in ORT's order: sorted by (tree, node), then as listed; ORT ignores branches' weights
    at = locate(ints[f"{prefix}_treeids"], ints[f"{prefix}_nodeids"])
    if np.any(at < 0):
        raise UnsupportedError("a weight of a node that does not exist")
    kept = np.flatnonzero(leaf[at])
    kept = kept[np.argsort(at[kept], kind="stable")]  # (a node's weights in the order listed: its (tree, node) is one)
    counts = np.bincount(at[kept], minlength=n)
    if np.any(leaf & (counts == 0)):
        raise UnsupportedError("a leaf without weights")
    first = np.cumsum(counts) - counts
    feature = ints["nodes_featureids"]
    if np.any(feature[~leaf] < 0):
        raise UnsupportedError(f"feature id {int(feature[~leaf].min())}")
    missing = np.zeros(n, bool)
    missing[:len(ints["nodes_missing_value_tracks_true"])] = ints["nodes_missing_value_tracks_true"] == 1
    kids = [locate(trees, ints[k]) for k in ("nodes_truenodeids", "nodes_falsenodeids")]
    bad = np.flatnonzero(~leaf & ((kids[0] < 0) | (kids[1] < 0) | (kids[0] == np.arange(n))
                                  | (kids[1] == np.arange(n))))
    if bad.size:
        raise UnsupportedError(f"node {ids[bad[0]]} of tree {trees[bad[0]]}: a child missing or itself")
    nodes = np.zeros((n, NODE_WORDS), np.uint32)
    nodes[:, 0] = np.where(leaf, first, feature)
    nodes[:, 1] = np.where(leaf, LEAF, code | (missing.astype(np.uint32) << 8))
    nodes[:, 2] = np.where(leaf, counts, kids[0])
    nodes[:, 3] = np.where(leaf, 0, kids[1])
    # ORT's roots: the first node of each run of nodes of one tree, in the order listed
    roots = np.flatnonzero(np.r_[True, trees[1:] != trees[:-1]])
    return Packed(nodes, np.where(leaf, 0, values).astype(dtype), np.asarray(weights)[kept].astype(dtype),
                  target[kept].astype(np.uint32), roots.astype(np.uint32), np.zeros(0, dtype),
                  np.asarray(base.tolist(), dtype), n_targets, _depth(nodes, roots), int(counts.max(initial=0)),
                  int(feature[~leaf].max(initial=-1)), aggregate, post)


class _Locator:
    """Each (tree, node id)'s place in the nodes_* lists (-1 where none); UnsupportedError on a node listed
    twice."""

    def __init__(self, trees: np.ndarray, ids: np.ndarray):
        if ids.size and ids.min() < 0:  # (keys tree * width + id are one to one for ids in [0, width) only)
            raise UnsupportedError(f"node id {ids.min()}")
        self.width = int(ids.max(initial=0)) + 1
        keys = trees * self.width + ids
        self.order = np.argsort(keys, kind="stable")
        self.keys = keys[self.order]
        twice = np.flatnonzero(self.keys[1:] == self.keys[:-1])
        if twice.size:
            i = self.order[twice[0]]
            raise UnsupportedError(f"node {ids[i]} of tree {trees[i]} twice")

    def __call__(self, trees: np.ndarray, ids: np.ndarray) -> np.ndarray:
        if not self.keys.size:
            return np.full(len(ids), -1)
        wanted = trees * self.width + ids
        pos = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        return np.where((self.keys[pos] == wanted) & (ids >= 0) & (ids < self.width), self.order[pos], -1)


class TreeEnsembleBase(Kernel):
    """One walk of the packed trees per (sample, target), and for SOFTMAX or a classifier a pass per sample
    (module doc)."""

    array_attributes = True

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
        try:
            cls.packed_once(attrs, (input_types or [None])[0] or "float32").runs()
        except UnsupportedError as exc:
            return f"{cls.__name__}: {exc}"
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
        self.runs = self.packed.runs()  # (once: it scans every node's set size, millions in a forest)
        p = self.packed
        lists, starts = p.tree_lists()
        self.tables = offset_tables(HEADER, nodes=p.nodes, values=p.values, weights=p.weights, targets=p.targets,
                                    roots=p.roots, sets=p.sets, base=p.base, labels=self.labels(attrs),
                                    tree_lists=lists, list_starts=starts)

    def labels(self, attrs: dict) -> np.ndarray | None:
        """A classifier's int64 class labels (the tables' last array)."""
        return None

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
        # (the sums of a (sample, target) carried from one run of trees to the next)
        state = call.scratch((CARRIED, y.size), "float64" if wide else "float32") if len(self.runs) > 1 else None
        push = {"tables": call.persistent(self.tables), "x": x, "y": y, "scores": scores, "state": state,
                "label": label, "n": y.size, "n_targets": p.n_targets, "stride": stride, "n_trees": len(p.roots),
                "depth": p.depth, "max_weights": p.max_weights if not one else 1, "aggregate": p.aggregate,
                "post": p.post, "flags": flags, "n_base": len(p.base),
                "chunks": tree_chunks(n, len(p.roots), one, host.cpu_ep_threads()), "first_tree": 0,
                "end_tree": len(p.roots)}
        for first, end in self.runs:
            carried = [state] if state is not None else []
            call.dispatch(SHADER, dtype, {**constants, "mode": SCORE}, {**push, "first_tree": first, "end_tree": end},
                          grid_1d(y.size, WG), [x] + (carried if first else []),
                          carried if end < len(p.roots) else [scores if second is not None else y])
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
        labels = _values(attrs, "classlabels_int64s")
        if len(labels) < 2:
            raise UnsupportedError(f"{len(labels)} class labels")
        packed = pack_v3({**attrs, "n_targets": len(labels), "aggregate_function": "SUM"}, x_dtype, "class")
        if len(packed.base) not in ((0, 1, 2) if len(labels) == 2 else (0, len(labels))):
            raise UnsupportedError(f"{len(packed.base)} base values for {len(labels)} classes")
        if (len(labels) == 2 and attrs.get("post_transform", "NONE") == "PROBIT" and len(packed.base) != 2
                and set(_values(attrs, "class_ids").tolist()) == {0}):
            # (ORT writes one score, leaving the second as its memory was: LinearClassifier's case too)
            raise UnsupportedError("PROBIT of two classes that only class 0's weights score: ORT leaves the second "
                                   "probability unwritten")
        return packed

    def labels(self, attrs: dict) -> np.ndarray | None:
        return _values(attrs, "classlabels_int64s")

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        weights = _array(attrs, "class_weights_as_tensor")
        weights = _values(attrs, "class_weights", np.float32) if weights is None else weights
        binary = len(attrs["classlabels_int64s"]) == 2 and len(np.unique(_values(attrs, "class_ids"))) == 1
        self.flags = CLASS_SUMS | (BINARY if binary else 0) | (0 if np.any(weights < 0) else POSITIVE)

    def y_dtype(self) -> str:
        return "float32"
