"""ai.onnx.ml tree ensembles on vkep (vkep/kernels/trees.py, shaders/tree_ensemble.comp) against ORT's CPU EP: random
ensembles of every node mode, NaN inputs with both missing-value tracks, every aggregate function and post
transform, batches of 0, 1, a few and many rows (ORT splits the sums of many rows among its threads: trees.tree_chunks).
Every node must run on vkep; without a post transform (or with one only a single target ignores) the outputs are the
CPU EP's bit for bit, with one within 1e-5 relative (float32 exp, log and sqrt: glibc against the device)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from vkep import runner
from vkep.kernels import trees
from vkep.kernels.base import LOOP_BUDGET

ML = "ai.onnx.ml"
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
AGGREGATES = ["AVERAGE", "SUM", "MIN", "MAX"]
POSTS = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]
FEATURES = 6
ROWS = [0, 1, 7, 300]  # (300 rows: ORT adds each thread's run of trees apart, then the runs)


def random_trees(seed: int, n_trees: int, n_targets: int, modes=tuple(range(7)), max_depth: int = 10,
                 single_leaf_trees: bool = True):
    """Random trees as nested tuples: ("leaf", target, weight) or (mode, feature, split or members, missing
    track, true child, false child); depths 1 to max_depth (the first tree a single leaf)."""
    rng = np.random.default_rng(seed)

    def node(depth: int, limit: int):
        if depth >= limit or (depth > 0 and rng.random() < 0.2):
            return ("leaf", int(rng.integers(n_targets)), float(np.round(rng.standard_normal() * 4, 3)))
        mode = int(rng.choice(modes))
        if mode == 6:  # set membership: small integer sets (ORT: a chain of BRANCH_EQ) or larger ones (a big set)
            # (ORT: sets of up to 30 members in [0, 30] a chain of BRANCH_EQ, exact; others of integers compared with
            # the value truncated to an integer)
            kind = rng.integers(3)
            low, high, size = [(0, 31, int(rng.integers(1, 5))), (-4, 9, int(rng.integers(1, 5))),
                               (-20, 60, int(rng.integers(31, 45)))][kind]
            split = sorted({float(v) for v in rng.integers(low, high, size)})
            if kind == 0 and rng.random() < 0.5:
                split = sorted({v + 0.5 for v in split if v < 30})  or [2.5]
        else:
            split = float(rng.integers(-8, 9)) / 2
        return (mode, int(rng.integers(FEATURES)), split, int(rng.integers(2)), node(depth + 1, limit),
                node(depth + 1, limit))

    out = []
    for k in range(n_trees):
        if single_leaf_trees and k == 0:
            out.append(node(0, 0))
        else:
            out.append(node(0, int(rng.integers(1, max_depth + 1))))
    return out


def v5_node(forest, n_targets: int, dtype, aggregate: str = "SUM", post: str = "NONE") -> onnx.NodeProto:
    """TreeEnsemble (ai.onnx.ml 5) of the trees."""
    a = {k: [] for k in ("nodes_featureids", "nodes_splits", "nodes_modes", "nodes_truenodeids", "nodes_trueleafs",
                         "nodes_falsenodeids", "nodes_falseleafs", "nodes_missing_value_tracks_true",
                         "leaf_targetids", "leaf_weights", "membership_values", "tree_roots")}

    def add(tree) -> tuple[int, int]:
        """(index, is leaf)"""
        if tree[0] == "leaf":
            a["leaf_targetids"].append(tree[1])
            a["leaf_weights"].append(tree[2])
            return len(a["leaf_weights"]) - 1, 1
        mode, feature, split, missing, true, false = tree
        i = len(a["nodes_modes"])
        a["nodes_modes"].append(mode)
        a["nodes_featureids"].append(feature)
        a["nodes_missing_value_tracks_true"].append(missing)
        if mode == 6:
            a["nodes_splits"].append(0.0)
            a["membership_values"].extend([*split, math.nan])
        else:
            a["nodes_splits"].append(split)
        for k in ("nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs"):
            a[k].append(0)
        a["nodes_truenodeids"][i], a["nodes_trueleafs"][i] = add(true)
        a["nodes_falsenodeids"][i], a["nodes_falseleafs"][i] = add(false)
        return i, 0

    for tree in forest:
        if tree[0] == "leaf":  # a root whose two children are one leaf: ORT takes the leaf at the root's index
            i = len(a["nodes_modes"])
            assert i == len(a["leaf_weights"]), "a single-leaf tree comes first"
            a["leaf_targetids"].append(tree[1])
            a["leaf_weights"].append(tree[2])
            for k, v in (("nodes_modes", 0), ("nodes_featureids", 0), ("nodes_missing_value_tracks_true", 0),
                         ("nodes_splits", 0.0), ("nodes_truenodeids", i), ("nodes_trueleafs", 1),
                         ("nodes_falsenodeids", i), ("nodes_falseleafs", 1)):
                a[k].append(v)
            a["tree_roots"].append(i)
        else:
            a["tree_roots"].append(add(tree)[0])
    tensors = {k: numpy_helper.from_array(np.array(a[k], dtype), k)
               for k in ("nodes_splits", "leaf_weights", "membership_values") if a[k] or k != "membership_values"}
    tensors["nodes_modes"] = numpy_helper.from_array(np.array(a["nodes_modes"], np.uint8), "nodes_modes")
    ints = {k: a[k] for k in ("nodes_featureids", "nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids",
                              "nodes_falseleafs", "nodes_missing_value_tracks_true", "leaf_targetids", "tree_roots")}
    return helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=n_targets,
                            aggregate_function=AGGREGATES.index(aggregate), post_transform=POSTS.index(post),
                            **ints, **tensors)


def v3_attributes(forest, n_targets: int, prefix: str, as_tensor: bool, base=None):
    """TreeEnsembleRegressor/Classifier (ai.onnx.ml 1, 3) attributes of the trees (no set membership)."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                         f"{prefix}_treeids", f"{prefix}_nodeids", f"{prefix}_ids", f"{prefix}_weights")}
    for t, tree in enumerate(forest):
        ids = iter(range(10**6))

        def add(node, t=t, ids=ids) -> int:
            i = next(ids)
            at = len(a["nodes_modes"])
            for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                      "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true"):
                a[k].append(0)
            a["nodes_treeids"][at], a["nodes_nodeids"][at] = t, i
            if node[0] == "leaf":
                a["nodes_modes"][at] = "LEAF"
                a["nodes_values"][at] = 0.0
                a[f"{prefix}_treeids"].append(t)
                a[f"{prefix}_nodeids"].append(i)
                a[f"{prefix}_ids"].append(node[1])
                a[f"{prefix}_weights"].append(node[2])
                return i
            mode, feature, split, missing, true, false = node
            a["nodes_modes"][at] = MODES[mode]
            a["nodes_featureids"][at], a["nodes_values"][at] = feature, split
            a["nodes_missing_value_tracks_true"][at] = missing
            a["nodes_truenodeids"][at] = add(true)
            a["nodes_falsenodeids"][at] = add(false)
            return i

        add(tree)
    attrs = {k: v for k, v in a.items() if k not in ("nodes_values", f"{prefix}_weights")}
    if as_tensor:
        attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(a["nodes_values"], np.float64),
                                                                  "nodes_values_as_tensor")
        attrs[f"{prefix}_weights_as_tensor"] = numpy_helper.from_array(np.array(a[f"{prefix}_weights"], np.float64),
                                                                       f"{prefix}_weights_as_tensor")
        if base is not None:
            attrs["base_values_as_tensor"] = numpy_helper.from_array(np.array(base, np.float64), "base_values_as_tensor")
    else:
        attrs["nodes_values"], attrs[f"{prefix}_weights"] = a["nodes_values"], a[f"{prefix}_weights"]
        if base is not None:
            attrs["base_values"] = base
    return attrs


def model_of(node: onnx.NodeProto, x_dtype, y_dtype, n_targets: int, ml_opset: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("X", helper.np_dtype_to_tensor_dtype(np.dtype(x_dtype)), ["N", FEATURES])
    outs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
            for name, t in zip(node.output, y_dtype if isinstance(y_dtype, list) else [y_dtype], strict=True)]
    graph = helper.make_graph([node], "trees", [x], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, ml_opset)],
                             ir_version=10)


def inputs(rows: int, dtype, seed: int = 3) -> np.ndarray:
    """Values on the splits' grid (so BRANCH_EQ, BRANCH_NEQ and sets hit), off it, and NaN."""
    rng = np.random.default_rng(seed + rows)
    x = rng.integers(-9, 10, (rows, FEATURES)) / 2
    x = np.where(rng.random(x.shape) < 0.2, x + rng.standard_normal(x.shape) * 0.3, x)
    x[rng.random(x.shape) < 0.12] = np.nan
    return x.astype(dtype)


def check(model: onnx.ModelProto, x_dtype, exact: bool, rows=ROWS, seed: int = 3) -> None:
    """Every node on vkep; each batch's outputs the CPU EP's (bit for bit where `exact`)."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for n in rows:
        x = inputs(n, x_dtype, seed)
        for _ in range(2):  # (the second run may replay the recorded plan)
            got = session.run(None, {"X": x})
            want = cpu.run(None, {"X": x})
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
                if exact or g.dtype.kind != "f":
                    np.testing.assert_array_equal(g, w, err_msg=f"{n} rows")
                else:
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{n} rows")


# ---- TreeEnsemble (ai.onnx.ml 5) ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("aggregate", AGGREGATES)
@pytest.mark.parametrize("n_targets", [1, 3])
def test_tree_ensemble_aggregates(ep_devices, dtype, aggregate, n_targets):
    """Every node mode and set membership, both missing-value tracks: the CPU EP's outputs bit for bit."""
    forest = random_trees(AGGREGATES.index(aggregate) + 10 * n_targets, 90, n_targets)
    check(model_of(v5_node(forest, n_targets, dtype, aggregate), dtype, dtype, n_targets, 5), dtype, exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("post", POSTS[1:])
@pytest.mark.parametrize("n_targets", [1, 4])
def test_tree_ensemble_post_transforms(ep_devices, dtype, post, n_targets):
    """One target: ORT applies PROBIT only (the others leave the score as is: bit for bit); several targets:
    each transform, within 1e-5 relative (exp, log and sqrt differ)."""
    forest = random_trees(POSTS.index(post), 12, n_targets, max_depth=6)
    exact = n_targets == 1 and post != "PROBIT"
    check(model_of(v5_node(forest, n_targets, dtype, "SUM", post), dtype, dtype, n_targets, 5), dtype, exact,
          rows=[0, 1, 60])


@pytest.mark.parametrize("mode", range(7))
def test_tree_ensemble_each_mode_alone(ep_devices, mode):
    """Trees of one node mode only (ORT walks those on its own path) with NaNs on both tracks."""
    forest = random_trees(40 + mode, 20, 2, modes=(mode,), single_leaf_trees=False)
    check(model_of(v5_node(forest, 2, "float64"), "float64", "float64", 2, 5), "float64", exact=True,
          rows=[1, 40])


def test_tree_ensemble_many_trees_one_row(ep_devices):
    """Past 80 trees ORT adds one row's trees each apart and then in order (MIN and MAX merge them)."""
    for aggregate in ("SUM", "MIN", "MAX"):
        forest = random_trees(7, 150, 1, max_depth=4)
        check(model_of(v5_node(forest, 1, "float32", aggregate), "float32", "float32", 1, 5), "float32", exact=True,
              rows=[1, 120])


def test_atspm_repro_shape(ep_devices):
    """The survey's model shape: float64 [N, 59] -> [N, 1], 300 trees, SUM: bit for bit at 1, 50 and 300 rows."""
    rng = np.random.default_rng(5)
    forest = random_trees(11, 300, 1, modes=(0,), max_depth=8, single_leaf_trees=False)
    node = v5_node(forest, 1, "float64")
    model = model_of(node, "float64", "float64", 1, 5)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for n in (1, 50, 51, 300):
        x = rng.standard_normal((n, FEATURES)) * 3
        np.testing.assert_array_equal(session.run(None, {"X": x})[0], cpu.run(None, {"X": x})[0])


# ---- TreeEnsembleRegressor (ai.onnx.ml 1, 3) ------------------------------------------------------------------

@pytest.mark.parametrize(("x_dtype", "as_tensor"), [("float32", False), ("float64", False), ("float64", True)])
@pytest.mark.parametrize("aggregate", AGGREGATES)
@pytest.mark.parametrize("base", [None, "one", "each"])
def test_regressor(ep_devices, x_dtype, as_tensor, aggregate, base):
    """skl2onnx's shapes: float trees (float64 inputs compared in double), or double ones (*_as_tensor, ml opset
    3); base values added as ORT does; float32 output bit for bit."""
    n_targets = 2 if base == "each" else 1
    forest = random_trees(AGGREGATES.index(aggregate), 100, n_targets, modes=range(6), single_leaf_trees=False)
    values = {None: None, "one": [0.75], "each": [0.5, -1.25]}[base]
    attrs = v3_attributes(forest, n_targets, "target", as_tensor, values)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=n_targets,
                            aggregate_function=aggregate, **attrs)
    check(model_of(node, x_dtype, "float32", n_targets, 3 if as_tensor else 1), x_dtype, exact=True)


def test_regressor_target_without_weights(ep_devices):
    """Several targets, one of which no leaf has a weight for, with base values."""
    forest = random_trees(21, 30, 1, modes=range(6), single_leaf_trees=False)
    attrs = v3_attributes(forest, 3, "target", False, [0.5, -1.25, 2.0])
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=3, **attrs)
    check(model_of(node, "float32", "float32", 3, 1), "float32", exact=True, rows=[1, 70])


# ---- TreeEnsembleClassifier (ai.onnx.ml 1, 3) -----------------------------------------------------------------

# (classes, class ids the leaves use, base values, post transform, weights all positive): the shapes skl2onnx's
# converters write (RandomForest/ExtraTrees/DecisionTree: positive weights per class, or of class 0 only for two
# classes; GradientBoosting: base values, LOGISTIC or SOFTMAX, mixed weights), and binary as multiclass
CLASSIFIERS = {
    "forest3": (3, 3, None, "NONE", True),
    "boosting3": (3, 3, [0.2, 0.45, -0.65], "SOFTMAX", False),
    "forest2": (2, 1, None, "NONE", True),
    "boosting2": (2, 1, [-0.21], "LOGISTIC", False),
    "mixed2": (2, 1, None, "NONE", False),
    "both2": (2, 2, [0.25, 0.25], "NONE", True),
    "both2_probit": (2, 2, None, "PROBIT", False),
    "both2_softmax": (2, 2, [0.1, -0.3], "SOFTMAX", False),
    "both2_logistic": (2, 2, None, "LOGISTIC", False),
    "zero4": (4, 4, [0.1, 0.2, 0.3, 0.4], "SOFTMAX_ZERO", False),
}


@pytest.mark.parametrize(("x_dtype", "as_tensor"), [("float32", False), ("float64", False), ("float64", True)])
@pytest.mark.parametrize("shape", list(CLASSIFIERS))
def test_classifier(ep_devices, x_dtype, as_tensor, shape):
    """int64 labels exactly; probabilities bit for bit without an exp/log transform (else within 1e-5
    relative)."""
    classes, ids, base, post, positive = CLASSIFIERS[shape]
    forest = random_trees(len(shape) + classes, 40, ids, modes=range(6), single_leaf_trees=False)
    if positive:
        forest = _map_leaves(forest, lambda t, w: (t, abs(w) % 1.0 / 40))  # (sums around 0.5: a probability)
    attrs = v3_attributes(forest, ids, "class", as_tensor, base)
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain=ML,
                            classlabels_int64s=[10 * k + 3 for k in range(classes)], post_transform=post, **attrs)
    exact = post in ("NONE",)
    check(model_of(node, x_dtype, ["int64", "float32"], classes, 3 if as_tensor else 1), x_dtype, exact)


def _map_leaves(tree_or_forest, f):
    if isinstance(tree_or_forest, list):
        return [_map_leaves(t, f) for t in tree_or_forest]
    if tree_or_forest[0] == "leaf":
        return ("leaf", *f(tree_or_forest[1], tree_or_forest[2]))
    mode, feature, split, missing, true, false = tree_or_forest
    return (mode, feature, split, missing, _map_leaves(true, f), _map_leaves(false, f))


# ---- what vkep leaves to the CPU EP ---------------------------------------------------------------------------

def chains(n_trees: int, depth: int) -> onnx.NodeProto:
    """n_trees chains of `depth` branches: branch k's true child is a leaf, its false child branch k + 1."""
    a = {k: [] for k in ("nodes_featureids", "nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids",
                         "nodes_falseleafs", "tree_roots")}
    leaves = 0
    for _ in range(n_trees):
        first = len(a["nodes_featureids"])
        a["tree_roots"].append(first)
        for k in range(depth):
            a["nodes_featureids"].append(k % FEATURES)
            a["nodes_truenodeids"].append(leaves)
            a["nodes_trueleafs"].append(1)
            leaves += 1
            last = k == depth - 1
            a["nodes_falsenodeids"].append(leaves if last else first + k + 1)
            a["nodes_falseleafs"].append(int(last))
        leaves += 1
    n = len(a["nodes_featureids"])
    return helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=1, leaf_targetids=[0] * leaves,
        nodes_splits=numpy_helper.from_array((np.arange(n) % 5).astype(np.float32), "nodes_splits"),
        nodes_modes=numpy_helper.from_array(np.zeros(n, np.uint8), "nodes_modes"),
        leaf_weights=numpy_helper.from_array(np.arange(leaves, dtype=np.float32), "leaf_weights"), **a)


def test_a_tree_past_the_loop_budget_stays_on_the_cpu_ep(ep_devices):
    """One tree deeper than lavapipe's loop budget is declined at GetCapability (the CPU EP itself crashes on a
    chain 30,000 deep: only the decision is checked)."""
    deep = chains(1, LOOP_BUDGET + 10)
    assert "loop budget" in trees.TreeEnsemble.declines(None, _attrs(deep), 5, [2], ["float32"])


def test_a_forest_past_the_loop_budget_runs_in_runs_of_trees(ep_devices):
    """Trees that together pass one invocation's loop budget are walked a run of trees a dispatch, the sums carried
    from one to the next: 400 chains 150 deep (3 dispatches) bit for bit with the CPU EP."""
    wide = chains(400, 150)
    model = model_of(wide, "float32", "float32", 1, 5)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    assert len(trees.TreeEnsemble.packed_once(_attrs(wide), "float32").runs()) == 3
    for rows in (1, 3, 120):
        x = inputs(rows, np.float32)
        np.testing.assert_array_equal(session.run(None, {"X": x})[0], runner.cpu_session(model).run(None, {"X": x})[0])


def complete_trees(n_trees: int, depth: int, seed: int = 0) -> onnx.NodeProto:
    """A TreeEnsembleRegressor of complete trees (every walk goes to the last level: the most loop steps a tree)."""
    rng = np.random.default_rng(seed)
    per = 2 ** (depth + 1) - 1
    ids = np.arange(per)
    leaf = ids >= 2 ** depth - 1
    leaves = np.flatnonzero(leaf)
    return helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, aggregate_function="SUM",
        nodes_treeids=np.repeat(np.arange(n_trees), per).tolist(), nodes_nodeids=np.tile(ids, n_trees).tolist(),
        nodes_featureids=rng.integers(0, FEATURES, n_trees * per).tolist(),
        nodes_modes=np.tile(np.where(leaf, "LEAF", "BRANCH_LT"), n_trees).tolist(),
        nodes_values=rng.standard_normal(n_trees * per).astype(np.float32).tolist(),
        nodes_truenodeids=np.tile(np.where(leaf, 0, 2 * ids + 1), n_trees).tolist(),
        nodes_falsenodeids=np.tile(np.where(leaf, 0, 2 * ids + 2), n_trees).tolist(),
        target_treeids=np.repeat(np.arange(n_trees), len(leaves)).tolist(),
        target_nodeids=np.tile(leaves, n_trees).tolist(), target_ids=[0] * (n_trees * len(leaves)),
        target_weights=rng.standard_normal(n_trees * len(leaves)).astype(np.float32).tolist())


@pytest.mark.parametrize("budget", [LOOP_BUDGET, 65_000 + 67])
def test_runs_of_trees_stay_within_lavapipes_loop_count(ep_devices, monkeypatch, budget):
    """4,000 complete trees of depth 6, every walk to the last level, one row and a few: each dispatch's run of
    trees within the 65,535 loop steps lavapipe gives an invocation (past them it ends the loops and the sum is
    short: the ninth survey's XGBoost regressor of 5,000 trees, one row, gave -60.2 for -50.1). With a budget of
    65,067 a run is 3,823 trees, 64,991 steps as Packed.tree_iterations counts them: one step more a tree would cut
    it short, so this also checks that count."""
    monkeypatch.setattr(trees, "LOOP_BUDGET", budget)
    model = model_of(complete_trees(4000, 6), "float32", "float32", 1, 1)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    for rows in (1, 3):
        x = np.random.default_rng(rows).standard_normal((rows, FEATURES)).astype(np.float32)
        np.testing.assert_array_equal(session.run(None, {"X": x})[0], cpu.run(None, {"X": x})[0])


@pytest.mark.parametrize("budget", [300, 1000])
@pytest.mark.parametrize("aggregate", AGGREGATES)
def test_runs_of_trees_split_the_cpu_eps_chunks_anywhere(ep_devices, monkeypatch, aggregate, budget):
    """With a budget of a few trees a dispatch, the runs of trees end inside and at the ends of ORT's chunks (each
    tree one chunk at one row, one chunk for a few rows, a chunk per thread for many): every aggregate, several
    targets with SOFTMAX, and a classifier, bit for bit with the CPU EP (SOFTMAX within 1e-5)."""
    monkeypatch.setattr(trees, "LOOP_BUDGET", budget)
    forest = random_trees(3, 150, 1, max_depth=4)
    check(model_of(v5_node(forest, 1, "float32", aggregate), "float32", "float32", 1, 5), "float32", exact=True,
          rows=[1, 7, 120])
    forest = random_trees(4, 90, 3, max_depth=5)
    check(model_of(v5_node(forest, 3, "float64", aggregate, "SOFTMAX"), "float64", "float64", 3, 5), "float64",
          exact=False, rows=[1, 60])
    classes, ids, base, post, _ = CLASSIFIERS["boosting3"]
    forest = random_trees(5, 100, ids, modes=range(6), single_leaf_trees=False)
    # (and as LightGBM and XGBoost write them: each tree's leaves for one class, tree k's for class k % 3, so each
    # target walks a third of the trees)
    boosted = [_map_leaves(tree, lambda t, w, k=k: (k % classes, w)) for k, tree in enumerate(forest)]
    for trees_ in (forest, boosted):
        node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain=ML,
                                classlabels_int64s=[3, 5, 9], post_transform=post,
                                **v3_attributes(trees_, ids, "class", False, base))
        check(model_of(node, "float32", ["int64", "float32"], classes, 1), "float32", exact=False, rows=[1, 7, 60])
    lists, starts = trees.TreeEnsembleClassifier.packed_once(
        {**v3_attributes(boosted, ids, "class", False, base), "classlabels_int64s": [3, 5, 9]}, "float32").tree_lists()
    assert np.array_equal(lists[starts[1]:starts[2]], np.arange(1, 100, 3))


def test_float64_needs_shader_float64():
    """float64 inputs or double thresholds on a device without shaderFloat64 are declined."""
    node = v5_node(random_trees(1, 3, 1), 1, "float64")
    without, with_ = SimpleNamespace(features={}), SimpleNamespace(features={"shaderFloat64": True})
    assert "shaderFloat64" in trees.TreeEnsemble.declines_on(without, _attrs(node), ["float64"])
    assert trees.TreeEnsemble.declines_on(with_, _attrs(node), ["float64"]) is None
    node32 = v5_node(random_trees(1, 3, 1), 1, "float32")
    assert trees.TreeEnsemble.declines_on(without, _attrs(node32), ["float32"]) is None
    regressor = v3_attributes(random_trees(1, 3, 1, modes=range(6)), 1, "target", as_tensor=True)
    attrs = {k: numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for k, v in regressor.items()}
    attrs["n_targets"] = 1
    assert "shaderFloat64" in trees.TreeEnsembleRegressor.declines_on(without, attrs, ["float32"])


def _attrs(node: onnx.NodeProto) -> dict:
    """The node's attributes as ORT gives them to a kernel: tensors as arrays, strings decoded."""
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


@pytest.mark.parametrize("ids,declined", [(1, True), (2, False)])
def test_probit_of_two_classes_scored_by_one(ep_devices, ids, declined):
    """Two classes that only class 0's weights score, PROBIT: ORT's CPU EP writes the first probability and leaves
    the second as its memory was (garbage, run to run: a fuzz case, seed 870172), as for LinearClassifier: declined.
    Weights for both classes: both written, on vkep."""
    forest = random_trees(7, 12, ids, modes=range(6), single_leaf_trees=False)
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain=ML,
                            classlabels_int64s=[4, 9], post_transform="PROBIT",
                            **v3_attributes(forest, ids, "class", False, None))
    reason = trees.TreeEnsembleClassifier.declines(None, _attrs(node), 1, [2], ["float32"])
    assert ("unwritten" in (reason or "")) == declined, reason
    if not declined:
        check(model_of(node, "float32", ["int64", "float32"], 2, 1), "float32", False)


def test_probit_near_its_middle_as_the_cpu_ep_rounds_it(ep_devices):
    """PROBIT of scores near 0.5, where ORT's float ErfInv ends in a cancellation (sqrt(v * v - v2) - v: about 4.3
    against 1e-4): one tree whose leaf is the score itself (the first feature, one split per leaf). lavapipe's log
    near 1 (6e-5 relative) and fused multiply-adds moved the result by up to 5e-4 relative (a fuzz case, seed
    100329 with VKEP_FUZZ_FRESH: 0.03009968 against 0.03008383); with Eigen's log and each step rounded, within
    float noise of the CPU EP."""
    scores = np.array([0.5120015, 0.5001, 0.50001, 0.4999, 0.49, 0.505, 0.52, 0.6, 0.9, 0.1], np.float32)
    n = len(scores)
    # a chain: node k tests X[0] < k + 0.5, its true child is leaf k, its false child node k + 1 (the last a leaf)
    modes, trues, falses, ids, values = [], [], [], [], []
    for k in range(n - 1):
        modes += ["BRANCH_LT", "LEAF"]
        ids += [2 * k, 2 * k + 1]
        trues += [2 * k + 1, 0]
        falses += [2 * k + 2, 0]
        values += [k + 0.5, 0.0]
    modes.append("LEAF")
    ids.append(2 * (n - 1))
    trues.append(0)
    falses.append(0)
    values.append(0.0)
    leaves = [2 * k + 1 for k in range(n - 1)] + [2 * (n - 1)]
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, post_transform="PROBIT",
                            nodes_treeids=[0] * len(ids), nodes_nodeids=ids, nodes_featureids=[0] * len(ids),
                            nodes_modes=modes, nodes_values=values, nodes_truenodeids=trues,
                            nodes_falsenodeids=falses, target_treeids=[0] * n, target_nodeids=leaves,
                            target_ids=[0] * n, target_weights=scores.tolist())
    model = model_of(node, "float32", "float32", 1, 1)
    x = np.zeros((n, FEATURES), np.float32)
    x[:, 0] = np.arange(n)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    got = session.run(None, {"X": x})[0]
    want = runner.cpu_session(model).run(None, {"X": x})[0]
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
