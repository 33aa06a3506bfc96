"""ai.onnx.ml LinearRegressor, LinearClassifier, SVMRegressor and SVMClassifier on vkep (vkep/kernels/ml_linear.py,
shaders/ml_linear.comp) against ORT's CPU EP: random coefficients, batches of 0, 1, a few and many rows, every post
transform, binary and multi-class, each SVM kernel, every input type the CPU EP takes. Every node must run on vkep.

Labels are the CPU EP's exactly. Scores are bit for bit where only sums and products make them (the GEMMs as MLAS's
AVX/FMA3 kernels add them: asserted on x86-64 CPUs with AVX2 and FMA, where ORT runs those kernels), and within
1e-5 where exp, log, tanh or pow make them (glibc's and MLAS's approximations against the device's), PROBIT within
2e-4 near 0.5 (ORT's float ErfInv subtracts nearly equal terms there, v * v - v2 of about 18: a last-bit difference
in its log moves the result by up to 1e-4); Platt-scaled probabilities within 1e-4 (multiclass_probability iterates until its error is below
0.005 / classes: a last-bit difference in a score can end it one iteration apart)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from vkep import runner
from vkep.kernels import host

ML = "ai.onnx.ml"
POSTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
KERNELS = ["LINEAR", "POLY", "RBF", "SIGMOID"]
FEATURES = 6
ROWS = [0, 1, 7, 300]
VKEP = "VulkanExecutionProvider"
TYPES = {"float32": onnx.TensorProto.FLOAT, "float64": onnx.TensorProto.DOUBLE, "int32": onnx.TensorProto.INT32,
         "int64": onnx.TensorProto.INT64}


EXACT_GEMM = host.mlas_fma3()  # (ORT's CPU EP runs MLAS's AVX2/FMA3 SGEMM here: the sums vkep follows)


def model_of(node: onnx.NodeProto, x_dtype: str = "float32", features: int = FEATURES) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("X", TYPES[x_dtype], ["N", features])
    types = {"Y": onnx.TensorProto.FLOAT, "S": onnx.TensorProto.FLOAT, "L": onnx.TensorProto.INT64}
    outs = [helper.make_tensor_value_info(name, types[name], None) for name in node.output]
    graph = helper.make_graph([node], "ml", [x], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 1)],
                             ir_version=10)


def inputs(rows: int, dtype: str, features: int = FEATURES, seed: int = 3, nan: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed + rows)
    if dtype.startswith("int"):
        return rng.integers(-9, 10, (rows, features)).astype(dtype)
    x = rng.standard_normal((rows, features)) * 1.5
    if nan and rows > 3:
        x[rows // 2, rows % features] = np.nan
    return x.astype(dtype)


def check(model: onnx.ModelProto, x_dtype: str = "float32", exact: bool = True, rows=ROWS, features: int = FEATURES,
          atol: float = 1e-5, nan: bool = False, seed: int = 3) -> None:
    """Every node on vkep; labels the CPU EP's; scores bit for bit (`exact`, where the CPU runs MLAS's FMA3 kernels)
    or within `atol` and 1e-5 relative."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    cpu = runner.cpu_session(model)
    for n in rows:
        x = inputs(n, x_dtype, features, seed, nan)
        for _ in range(2):  # (the second run may replay the recorded plan)
            got = session.run(None, {"X": x})
            want = cpu.run(None, {"X": x})
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
                if g.dtype.kind != "f" or (exact and EXACT_GEMM):
                    np.testing.assert_array_equal(g, w, err_msg=f"{n} rows")
                else:
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol, err_msg=f"{n} rows")


def tol(post: str, base: float = 1e-5) -> float:
    """The absolute tolerance of scores after `post` (module doc)."""
    return max(base, 2e-4) if post == "PROBIT" else base


def placed_on(model: onnx.ModelProto) -> set[str]:
    return {ep for _, _, ep in runner.placement(runner.vkep_session(model))}


def floats(rng, *shape, scale: float = 1.0) -> list[float]:
    return (rng.standard_normal(shape) * scale).astype(np.float32).ravel().tolist()


# ---- LinearRegressor ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize(("targets", "intercepts"), [(1, True), (3, True), (3, False), (6, True)])
def test_linear_regressor(ep_devices, post, targets, intercepts):
    """One target: only PROBIT applies (the others leave the sum: bit for bit); several: each transform."""
    rng = np.random.default_rng(targets + 10 * POSTS.index(post))
    attrs = {"intercepts": floats(rng, targets)} if intercepts else {}
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, targets=targets,
                            coefficients=floats(rng, targets, FEATURES), post_transform=post, **attrs)
    check(model_of(node), exact=post == "NONE" or (targets == 1 and post != "PROBIT"), nan=True, atol=tol(post))


@pytest.mark.parametrize(("targets", "features"), [(1, 3), (2, 13), (5, 40), (3, 300), (3, 1200), (20, 700),
                                                  (40, 500), (70, 150)])
def test_linear_regressor_sums(ep_devices, targets, features):
    """MLAS's sums: one row in eight lanes reduced by the output column's block of 4, 2 or 1; more rows a
    multiply-add chain per block of K (1200 features for 3 targets: two blocks of 1024) added to the intercept; more
    columns than rows split among the CPU EP's threads in blocks of 16, each share with its own K blocks."""
    rng = np.random.default_rng(features)
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, targets=targets,
                            coefficients=floats(rng, targets, features), intercepts=floats(rng, targets))
    check(model_of(node, features=features), features=features, rows=[1, 2, 9, 64])


# ---- LinearClassifier -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("x_dtype", list(TYPES))
def test_linear_classifier(ep_devices, post, x_dtype):
    """Four classes: labels the first largest raw score's, every input type converted to float as the CPU EP."""
    rng = np.random.default_rng(POSTS.index(post))
    node = helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, classlabels_ints=[7, -3, 12, 0],
                            coefficients=floats(rng, 4, FEATURES), intercepts=floats(rng, 4), post_transform=post,
                            multi_class=1)
    check(model_of(node, x_dtype), x_dtype, exact=post == "NONE", nan=x_dtype.startswith("float"), atol=tol(post))


@pytest.mark.parametrize("classes", [2, 5, 9])
@pytest.mark.parametrize("post", ["SOFTMAX", "SOFTMAX_ZERO"])
def test_linear_classifier_softmax_wide(ep_devices, classes, post):
    """Two classes (two sets of coefficients: not the binary case), and five or more, whose SOFTMAX the CPU EP
    computes with MlasComputeSoftmax; zero scores for SOFTMAX_ZERO."""
    rng = np.random.default_rng(classes)
    coefficients = np.array(floats(rng, classes, FEATURES), np.float32).reshape(classes, FEATURES)
    coefficients[1] = 0  # (a class whose score is 0: SOFTMAX_ZERO leaves it at 0)
    intercepts = floats(rng, classes)
    intercepts[1] = 0.0
    node = helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, classlabels_ints=list(range(classes)),
                            coefficients=coefficients.ravel().tolist(), intercepts=intercepts, post_transform=post)
    check(model_of(node), exact=False)


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("labels", [[4, 9], []])
def test_linear_classifier_binary(ep_devices, post, labels):
    """One set of coefficients: the label is the score's sign; with two labels ORT's add_second_class writes
    1 - s, s (LOGISTIC: of the logistic; SOFTMAX and SOFTMAX_ZERO ignored; PROBIT declined below), else the score
    (PROBIT applied, the others ignored)."""
    if labels and post == "PROBIT":
        pytest.skip("declined (test_declines)")
    rng = np.random.default_rng(len(labels) + POSTS.index(post))
    attrs = {"classlabels_ints": labels} if labels else {}
    node = helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, coefficients=floats(rng, 1, FEATURES),
                            intercepts=floats(rng, 1), post_transform=post, **attrs)
    check(model_of(node), exact=post not in ("PROBIT", "LOGISTIC") or (post == "LOGISTIC" and not labels), nan=True,
          atol=tol(post))


@pytest.mark.parametrize("op", ["LinearClassifier", "LinearRegressor"])
def test_most_classes_within_lavapipes_loop_count(ep_devices, op):
    """One invocation a sample loops over every class's product: 24 loop steps a class of one feature as lavapipe
    counts them (ml_linear.gemm_loops), not 1. 2,222 classes (the most the count takes: 59,998 steps) run on vkep,
    the winning class last; 2,223 and 15,000 (which the old count of features + 3 a class took, and lavapipe cut
    short: label 2,730 of 14,999) are left to the CPU EP, all equal to it."""
    for classes, where in [(2222, VKEP), (15000, "CPUExecutionProvider"), (2223, "CPUExecutionProvider")]:
        coefficients = np.arange(classes, dtype=np.float32) / classes  # (the last class's score the largest)
        if op == "LinearClassifier":
            node = helper.make_node(op, ["X"], ["L", "S"], domain=ML, classlabels_ints=list(range(classes)),
                                    coefficients=coefficients.tolist(), intercepts=[0.0] * classes,
                                    post_transform="SOFTMAX")
        else:
            node = helper.make_node(op, ["X"], ["Y"], domain=ML, targets=classes, coefficients=coefficients.tolist(),
                                    post_transform="SOFTMAX")
        model = model_of(node, features=1)
        session, cpu = runner.vkep_session(model), runner.cpu_session(model)
        for rows in (1, 2):  # (one row: the M1 kernel; two: MlasSgemmKernelFma3)
            x = np.ones((rows, 1), np.float32)
            for g, w in zip(session.run(None, {"X": x}), cpu.run(None, {"X": x}), strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7, err_msg=f"{classes} classes, {rows} rows")
        assert {ep for _, _, ep in runner.placement(session)} == {where}, classes


# ---- SVMRegressor ---------------------------------------------------------------------------------------------

def svm_regressor(rng, kernel: str, vectors: int, one_class: int = 0, degree: float = 3.0) -> onnx.NodeProto:
    gamma = 0.05 if kernel in ("POLY", "SIGMOID") else 0.3
    attrs = {"support_vectors": floats(rng, vectors, FEATURES)} if vectors else {}
    return helper.make_node("SVMRegressor", ["X"], ["Y"], domain=ML, kernel_type=kernel, n_supports=vectors,
                            coefficients=floats(rng, vectors or FEATURES), rho=floats(rng, 1), one_class=one_class,
                            kernel_params=[gamma, 0.5, degree], post_transform="NONE", **attrs)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(ep_devices, kernel, one_class):
    """Support vectors: the kernels times the coefficients plus rho[0] (LINEAR and POLY of degree 3: sums and
    products only, bit for bit; RBF's exp and SIGMOID's tanh within 1e-5); one_class: the sign."""
    rng = np.random.default_rng(KERNELS.index(kernel) + 10 * one_class)
    node = svm_regressor(rng, kernel, 17, one_class)
    check(model_of(node), exact=kernel in ("LINEAR", "POLY") or bool(one_class))


@pytest.mark.parametrize("degree", [2.0, 2.5, 4.0])
def test_svm_regressor_poly_degrees(ep_devices, degree):
    """POLY of degree 2 squares (bit for bit); others std::pow (within 1e-5; negative bases of integer degrees)."""
    node = svm_regressor(np.random.default_rng(int(degree * 2)), "POLY", 9, degree=degree)
    check(model_of(node), exact=degree == 2.0)


@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor_linear(ep_devices, one_class):
    """No support vectors (liblinear): the coefficients' dot product plus rho[0], bit for bit."""
    check(model_of(svm_regressor(np.random.default_rng(one_class), "RBF", 0, one_class)))


# ---- SVMClassifier --------------------------------------------------------------------------------------------

def svm_classifier(rng, kernel: str, per_class: list[int], proba: bool, post: str = "NONE",
                   labels: list[int] | None = None) -> onnx.NodeProto:
    C, V = len(per_class), sum(per_class)
    pairs = C * (C - 1) // 2
    gamma = 0.05 if kernel in ("POLY", "SIGMOID") else 0.3
    attrs = {"prob_a": (-rng.random(pairs) * 2 - 0.1).tolist(), "prob_b": floats(rng, pairs, scale=0.2)} if proba else {}
    if V:
        attrs.update(support_vectors=floats(rng, V, FEATURES), vectors_per_class=per_class,
                     coefficients=floats(rng, C - 1, V), rho=floats(rng, pairs, scale=0.3))
    else:
        attrs.update(coefficients=floats(rng, C, FEATURES), rho=floats(rng, 1))
    return helper.make_node("SVMClassifier", ["X"], ["L", "S"], domain=ML, kernel_type=kernel,
                            kernel_params=[gamma, 0.5, 3.0], classlabels_ints=labels or [3 * k + 1 for k in range(C)],
                            post_transform=post, **attrs)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("per_class", [[4, 3], [3, 5, 2], [2, 1, 3, 2, 4]])
@pytest.mark.parametrize("proba", [False, True])
def test_svm_classifier(ep_devices, kernel, per_class, proba):
    """One-vs-one: the sums in double, each class pair's vote, the first class with most votes; scores bit for bit
    (LINEAR and POLY without probabilities), or Platt-scaled probabilities through multiclass_probability."""
    rng = np.random.default_rng(KERNELS.index(kernel) + 7 * len(per_class) + 100 * proba)
    node = svm_classifier(rng, kernel, per_class, proba)
    exact = kernel in ("LINEAR", "POLY") and not proba
    check(model_of(node), exact=exact, atol=1e-4 if proba else 1e-5)


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize(("per_class", "proba"), [([4, 3], False), ([3, 5, 2], False), ([3, 5, 2], True),
                                                  ([2, 2, 2, 2, 2], False)])
def test_svm_classifier_post_transforms(ep_devices, post, per_class, proba):
    """Two classes without probabilities: -s, s (NONE) or 1 - s, s (LOGISTIC: of the logistic; PROBIT: declined);
    else each transform of the pair scores or probabilities."""
    if len(per_class) == 2 and not proba and post == "PROBIT":
        pytest.skip("declined (test_declines)")
    rng = np.random.default_rng(POSTS.index(post) + 10 * len(per_class))
    node = svm_classifier(rng, "LINEAR", per_class, proba, post)
    exact = not proba and (post == "NONE" or (len(per_class) == 2 and post != "LOGISTIC"))
    check(model_of(node), exact=exact, atol=tol(post, 1e-4 if proba else 1e-5))


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize(("classes", "proba"), [(2, False), (2, True), (4, False)])
def test_svm_classifier_linear(ep_devices, post, classes, proba):
    """No support vectors (liblinear): scores x . coefficients + rho[0], the first largest; two classes: ORT's
    ChooseClass thresholds (0.5 with every coefficient positive, else 0) unless probabilities are given."""
    rng = np.random.default_rng(POSTS.index(post) + classes)
    node = svm_classifier(rng, "LINEAR", [0] * classes, proba, post)
    check(model_of(node), exact=post == "NONE", atol=tol(post))


def test_svm_classifier_positive_coefficients(ep_devices):
    """Two classes, every coefficient positive: the label is class 1 from a score of 0.5 on."""
    coefficients = np.abs(floats(np.random.default_rng(5), 2, FEATURES, scale=0.2))
    node = helper.make_node("SVMClassifier", ["X"], ["L", "S"], domain=ML, kernel_type="LINEAR",
                            kernel_params=[0.1, 0.0, 3.0], classlabels_ints=[5, 8], rho=[-0.25],
                            coefficients=coefficients.tolist())
    check(model_of(node))


@pytest.mark.parametrize("x_dtype", ["float64", "int32", "int64"])
def test_svm_classifier_input_types(ep_devices, x_dtype):
    """float64, int32 and int64 inputs converted to float, as the CPU EP."""
    node = svm_classifier(np.random.default_rng(1), "POLY", [3, 2, 4], False)
    check(model_of(node, x_dtype), x_dtype)


# ---- declined -------------------------------------------------------------------------------------------------

def test_declines(ep_devices):
    """What vkep leaves to the CPU EP: string labels, the binary cases whose second score ORT leaves unwritten
    (PROBIT), missing kernel_params, attributes the CPU EP would read past."""
    rng = np.random.default_rng(0)
    cases = [
        helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, classlabels_ints=[0, 1], post_transform="PROBIT",
                         coefficients=floats(rng, 1, FEATURES), intercepts=[0.5]),
        svm_classifier(rng, "RBF", [2, 3], False, "PROBIT"),
    ]
    for node in cases:
        assert placed_on(model_of(node)) == {"CPUExecutionProvider"}, node
    strings = helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, classlabels_strings=["a", "b", "c"],
                               coefficients=floats(rng, 3, FEATURES), intercepts=floats(rng, 3))
    graph = helper.make_graph([strings], "ml", [helper.make_tensor_value_info("X", TYPES["float32"], ["N", FEATURES])],
                              [helper.make_tensor_value_info("L", onnx.TensorProto.STRING, None),
                               helper.make_tensor_value_info("S", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 1)],
                              ir_version=10)
    assert placed_on(model) == {"CPUExecutionProvider"}
    no_params = svm_regressor(rng, "RBF", 4)
    del no_params.attribute[[a.name for a in no_params.attribute].index("kernel_params")]
    with pytest.raises(Exception, match="SVMCommon"):  # (declined: the CPU EP fails the session itself)
        runner.vkep_session(model_of(no_params))


@pytest.mark.parametrize("op", ["LinearClassifier", "SVMRegressor"])
def test_rank_one_input(ep_devices, op):
    """An input of rank 1 is one sample, as the CPU EP takes it."""
    rng = np.random.default_rng(2)
    node = (helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, classlabels_ints=[1, 2, 3],
                             coefficients=floats(rng, 3, FEATURES), intercepts=floats(rng, 3))
            if op == "LinearClassifier" else svm_regressor(rng, "POLY", 5))
    model = model_of(node)
    model.graph.input[0].type.tensor_type.shape.ClearField("dim")
    model.graph.input[0].type.tensor_type.shape.dim.add().dim_value = FEATURES
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    x = inputs(1, "float32")[0]
    for g, w in zip(session.run(None, {"X": x}), runner.cpu_session(model).run(None, {"X": x}), strict=True):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op", ["LinearClassifier", "LinearRegressor"])
def test_fewer_features_than_a_row_of_coefficients(ep_devices, op):
    """The CPU EP takes the feature count from the input and reads the coefficients as rows of that many (its GEMM's
    ldb): a model that declares 2 features for rows of 6 runs, on the first 2 x classes coefficients."""
    rng = np.random.default_rng(5)
    node = (helper.make_node("LinearClassifier", ["X"], ["L", "S"], domain=ML, classlabels_ints=[4, 5, 6],
                             coefficients=floats(rng, 3, FEATURES), intercepts=floats(rng, 3), post_transform="NONE")
            if op == "LinearClassifier" else
            helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, targets=3,
                             coefficients=floats(rng, 3, FEATURES), intercepts=floats(rng, 3)))
    check(model_of(node, features=2), features=2)
    check(model_of(node, features=FEATURES - 1), features=FEATURES - 1)


def test_more_features_than_a_row_of_coefficients(ep_devices):
    """More features than a row holds would read past the coefficients on the CPU EP: declined where the graph
    gives the count, and an error, the session kept, where the input brings it."""
    rng = np.random.default_rng(6)
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, targets=2,
                            coefficients=floats(rng, 2, FEATURES), intercepts=floats(rng, 2))
    assert placed_on(model_of(node, features=FEATURES + 1)) == {"CPUExecutionProvider"}
    model = model_of(node, features=FEATURES)
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "F"
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    with pytest.raises(Exception, match=f"an input of {FEATURES + 1} features for {FEATURES}"):
        session.run(None, {"X": inputs(4, "float32", FEATURES + 1)})
    x = inputs(4, "float32")
    np.testing.assert_array_equal(session.run(None, {"X": x})[0], runner.cpu_session(model).run(None, {"X": x})[0])


def test_ort_sample_logreg_iris(ep_devices):
    """ORT's own sample classifier (onnxruntime/datasets, in every wheel): LinearClassifier (2 features declared for
    rows of 4 coefficients) and Normalizer on vkep; ZipMap, whose output is a sequence of maps, which a plugin EP's
    kernel cannot make, on the CPU EP. Labels equal, probabilities within float noise of LOGISTIC."""
    from onnxruntime import datasets

    model = onnx.load(datasets.get_example("logreg_iris.onnx"))
    session = runner.vkep_session(model)
    placed = {op: ep for _, op, ep in runner.placement(session)}
    assert placed == {"LinearClassifier": VKEP, "Normalizer": VKEP, "ZipMap": "CPUExecutionProvider"}, placed
    x = np.random.default_rng(0).uniform(-3, 3, (3, 2)).astype(np.float32)
    got, want = session.run(None, {"float_input": x}), runner.cpu_session(model).run(None, {"float_input": x})
    np.testing.assert_array_equal(got[0], want[0])
    assert [list(m) for m in got[1]] == [list(m) for m in want[1]]
    np.testing.assert_allclose([list(m.values()) for m in got[1]], [list(m.values()) for m in want[1]], rtol=1e-6,
                               atol=1e-7)
