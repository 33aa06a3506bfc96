"""ai.onnx.ml preprocessing on vkep (vkep/kernels/ml_prep.py, shaders/ml_prep.comp, gather.comp) against ORT's CPU EP:
Scaler, Normalizer, Binarizer, Imputer, ArrayFeatureExtractor, FeatureVectorizer in every input type ORT registers,
each attribute form, NaN, infinities and denormals, batches of 0, 1, a few and many rows, 1-D and 2-D inputs. Every
node must run on vkep (ORT's placement record) and give the CPU EP's outputs bit for bit; where ORT fails the run
(an index out of range, a NaN into Binarizer) vkep's run fails too."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner
from vkep.kernels import ml_prep

ML = "ai.onnx.ml"
FEATURES = 5
ROWS = [0, 1, 7, 300]
TYPES = ["float32", "float64", "int32", "int64"]
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32,
             "int64": TensorProto.INT64}


def model_of(node, inputs: list[tuple[str, str, list]], y_dtype: str, ml_opset: int = 1):
    """A one-node model: inputs as (name, dtype, shape with symbolic dims)."""
    ins = [helper.make_tensor_value_info(name, ONNX_TYPE[t], shape) for name, t, shape in inputs]
    outs = [helper.make_tensor_value_info(node.output[0], ONNX_TYPE[y_dtype], None)]
    graph = helper.make_graph([node], "prep", ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, ml_opset)],
                             ir_version=10)


def values(shape, dtype: str, seed: int = 0, specials: bool = True, denormals: bool = True) -> np.ndarray:
    """Random values of `dtype`: for floats, NaN, infinities, zeros, denormals (float32's, unless not `denormals`) and
    a spread of magnitudes among them; for integers their extremes (whose squares wrap) among small ones."""
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        x = rng.integers(-50, 50, shape).astype(dtype)
        if specials and x.size:
            info = np.iinfo(dtype)
            flat = x.reshape(-1)
            flat[rng.random(flat.size) < 0.08] = info.max
            flat[rng.random(flat.size) < 0.05] = info.min
            flat[rng.random(flat.size) < 0.05] = 2**20 + 3
        return x
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    if specials and x.size:
        flat = x.reshape(-1)
        for value, share in ((np.nan, 0.06), (np.inf, 0.03), (-np.inf, 0.03), (0.0, 0.05), (1e-40, 0.03),
                             (-3e-39, 0.02)):
            if denormals or abs(value) >= 1e-37 or value == 0:
                flat[rng.random(flat.size) < share] = value
    return x.astype(dtype)


def check(model, feeds: dict, must_run_on_vkep: bool = True) -> None:
    """Every node on vkep; the outputs the CPU EP's bit for bit (type, shape, values and signs of zeros; NaN where it
    has NaN)."""
    session = runner.vkep_session(model, disable_cpu_fallback=must_run_on_vkep)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for _ in range(2):  # (the second run may replay the recorded plan)
        got, want = session.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
            np.testing.assert_array_equal(g, w)
            if g.dtype.kind == "f":  # and the sign of every zero
                numbers = ~np.isnan(w)
                np.testing.assert_array_equal(np.signbit(g[numbers]), np.signbit(w[numbers]), err_msg="signs")


def both_fail(model, feeds: dict, match: str) -> None:
    """vkep (the node on it) and the CPU EP both fail the run; the CPU EP's message has `match`."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    with pytest.raises(Exception, match=match):
        runner.cpu_session(model).run(None, feeds)
    with pytest.raises(Exception):  # noqa: B017 — any failure of the run, never an answer
        session.run(None, feeds)


def batches(dtype: str, features: int = FEATURES, seed: int = 0, denormals: bool = True):
    """(rows, input) for each batch size, 2-D, then one 1-D input."""
    for rows in ROWS:
        yield rows, values((rows, features), dtype, seed + rows, denormals=denormals)
    yield None, values((features,), dtype, seed + 99, denormals=denormals)


# ---- Scaler ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("per_feature", [True, False])
def test_scaler(ep_devices, dtype, per_feature):
    rng = np.random.default_rng(1)
    count = FEATURES if per_feature else 1
    offset = (rng.standard_normal(count) * 3).astype(np.float32).tolist()
    scale = (rng.standard_normal(count) / 3).astype(np.float32).tolist()
    node = helper.make_node("Scaler", ["X"], ["Y"], domain=ML, offset=offset, scale=scale)
    for rows, x in batches(dtype):
        shape = ["N", FEATURES] if rows is not None else [FEATURES]
        check(model_of(node, [("X", dtype, shape)], "float32"), {"X": x})


def test_scaler_one_feature_and_size_mismatch(ep_devices):
    """One feature: its one value per feature; offsets of neither one nor the feature count: the CPU EP fails the run
    (vkep too when the shape is known only at run time; declined where the graph declares it)."""
    node = helper.make_node("Scaler", ["X"], ["Y"], domain=ML, offset=[0.25], scale=[4.0])
    check(model_of(node, [("X", "float32", ["N", 1])], "float32"), {"X": values((9, 1), "float32")})
    node = helper.make_node("Scaler", ["X"], ["Y"], domain=ML, offset=[1.0, 2.0], scale=[3.0, 4.0])
    both_fail(model_of(node, [("X", "float32", ["N", "F"])], "float32"), {"X": values((2, 3), "float32")},
              "feature size")
    session = runner.vkep_session(model_of(node, [("X", "float32", [2, 3])], "float32"))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


# ---- Normalizer ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer(ep_devices, dtype, norm):
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML, norm=norm)
    # (no float32 denormals: a driver that flushes them, Mesa 26's lavapipe, sums and divides them as zeros)
    for rows, x in batches(dtype, seed=3, denormals=False):
        if rows:
            x[0] = 0  # a row whose norm is 0: copied
        shape = ["N", FEATURES] if rows is not None else [FEATURES]
        check(model_of(node, [("X", dtype, shape)], "float32"), {"X": x})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer_finite_rows(ep_devices, norm):
    """Rows without NaN or infinities, most of whose quotients and roots are not exact (each rounded once)."""
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML, norm=norm)
    x = values((200, 37), "float32", 5, specials=False)
    check(model_of(node, [("X", "float32", ["N", 37])], "float32"), {"X": x})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer_rows_past_one_pass(ep_devices, norm):
    """Rows of more columns than one pass adds (ml_prep.NORM_RUN): the partial norms carry over, in order."""
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML, norm=norm)
    width = 2 * ml_prep.NORM_RUN + 7
    x = values((2, width), "float32", 6, specials=False)
    x[1, ml_prep.NORM_RUN + 3] = 1e4  # (MAX: found in the second pass)
    check(model_of(node, [("X", "float32", ["N", "F"])], "float32"), {"X": x})


def test_normalizer_default_is_max_and_rank_3_declined(ep_devices):
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML)
    check(model_of(node, [("X", "float32", ["N", 4])], "float32"), {"X": values((6, 4), "float32", 2, denormals=False)})
    session = runner.vkep_session(model_of(node, [("X", "float32", [2, 3, 4])], "float32"))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


# ---- Binarizer ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("threshold", [None, 0.0, 0.5, -2.5, float("inf")])
def test_binarizer(ep_devices, threshold):
    attrs = {} if threshold is None else {"threshold": threshold}
    node = helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, **attrs)
    for rows, x in batches("float32", seed=4):
        x[np.isnan(x)] = 0.5
        x.reshape(-1)[:3] = [0.0, 0.5, 1.0][:x.size]  # the thresholds themselves
        shape = ["N", FEATURES] if rows is not None else [FEATURES]
        check(model_of(node, [("X", "float32", shape)], "float32"), {"X": x})


def test_binarizer_nan_fails_the_run(ep_devices):
    node = helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, threshold=0.0)
    model = model_of(node, [("X", "float32", ["N", 3])], "float32")
    both_fail(model, {"X": np.array([[1.0, np.nan, 2.0]], np.float32)}, "NaN")
    check(model, {"X": np.array([[1.0, -1.0, 2.0]], np.float32)})  # the session runs on after the failure


# ---- Imputer ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("replaced", [float("nan"), 0.0, -1.5, float("inf")])
@pytest.mark.parametrize("count", [1, FEATURES, 2])  # (a count other than the features': ORT takes the first)
def test_imputer_float(ep_devices, replaced, count):
    imputed = [float(v) for v in np.arange(count) * 1.5 - 7]
    node = helper.make_node("Imputer", ["X"], ["Y"], domain=ML, imputed_value_floats=imputed,
                            replaced_value_float=replaced)
    for rows, x in batches("float32", seed=6):
        x.reshape(-1)[::4] = replaced
        shape = ["N", FEATURES] if rows is not None else [FEATURES]
        check(model_of(node, [("X", "float32", shape)], "float32"), {"X": x})


@pytest.mark.parametrize("count", [1, FEATURES, 3])
def test_imputer_int64(ep_devices, count):
    node = helper.make_node("Imputer", ["X"], ["Y"], domain=ML, imputed_value_int64s=list(range(100, 100 + count)),
                            replaced_value_int64=-7)
    for rows, x in batches("int64", seed=7):
        x.reshape(-1)[::3] = -7
        shape = ["N", FEATURES] if rows is not None else [FEATURES]
        check(model_of(node, [("X", "int64", shape)], "int64"), {"X": x})


def test_imputer_without_values_of_the_input_type_declined(ep_devices):
    """float imputed values with an int64 input: the CPU EP fails the run; vkep leaves it to the CPU EP."""
    node = helper.make_node("Imputer", ["X"], ["Y"], domain=ML, imputed_value_floats=[1.0], replaced_value_float=0.0)
    session = runner.vkep_session(model_of(node, [("X", "int64", ["N", 2])], "int64"))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


# ---- ArrayFeatureExtractor -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", TYPES)
def test_array_feature_extractor(ep_devices, dtype):
    node = helper.make_node("ArrayFeatureExtractor", ["X", "I"], ["Y"], domain=ML)
    for shape, dims, idx in (((7, FEATURES), ["N", FEATURES], [4, 0, 0, 2]), ((FEATURES,), [FEATURES], [3]),
                             ((0, FEATURES), ["N", FEATURES], [1, 2]), ((1, FEATURES), ["N", FEATURES], [[1], [4]]),
                             ((3, 4, FEATURES), ["A", "B", FEATURES], [2, 2, 1, 0, 4])):
        model = model_of(node, [("X", dtype, dims), ("I", "int64", None)], dtype)
        check(model, {"X": values(shape, dtype, 8), "I": np.array(idx, np.int64)})


@pytest.mark.parametrize("index", [FEATURES, 10**12, -1])
def test_array_feature_extractor_index_out_of_range(ep_devices, index):
    """An index past the last dimension fails the run on both (ORT: "index is out of range"); a negative one, which
    ORT reads before the row (past the tensor's start in row 0), fails vkep's run."""
    node = helper.make_node("ArrayFeatureExtractor", ["X", "I"], ["Y"], domain=ML)
    model = model_of(node, [("X", "float32", ["N", FEATURES]), ("I", "int64", None)], "float32")
    feeds = {"X": values((2, FEATURES), "float32"), "I": np.array([0, index], np.int64)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    if index >= 0:
        with pytest.raises(Exception, match="out of range"):
            runner.cpu_session(model).run(None, feeds)
    with pytest.raises(Exception, match="out of range"):
        session.run(None, feeds)
    check(model, {**feeds, "I": np.array([0, 1], np.int64)})  # and the session runs on


# ---- FeatureVectorizer -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", TYPES)
def test_feature_vectorizer(ep_devices, dtype):
    """Three inputs: one cut to its inputdimensions, one padded with zeros, one as wide; batches of 1, 7, 300 (and 0:
    vkep alone)."""
    node = helper.make_node("FeatureVectorizer", ["A", "B", "C"], ["Y"], domain=ML, inputdimensions=[2, 4, 3])
    model = model_of(node, [("A", dtype, ["N", 3]), ("B", dtype, ["N", 2]), ("C", dtype, ["N", 3])], "float32")
    for rows in ROWS:
        feeds = {"A": values((rows, 3), dtype, rows), "B": values((rows, 2), dtype, rows + 1),
                 "C": values((rows, 3), dtype, rows + 2)}
        if rows:
            check(model, feeds)
        else:  # (ORT's CPU EP aborts the process: its second input starts past the end of an empty output)
            got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, feeds)[0]
            assert got.dtype == np.float32 and got.shape == (0, 9)


def test_feature_vectorizer_shapes(ep_devices):
    """A 1-D input (one row), a 3-D one (its rows flattened), inputs of different batches (both runs fail), one
    input alone, and inputdimensions of 0."""
    node = helper.make_node("FeatureVectorizer", ["A", "B"], ["Y"], domain=ML, inputdimensions=[3, 5])
    check(model_of(node, [("A", "float32", [3]), ("B", "float32", [1, 2, 3])], "float32"),
          {"A": values((3,), "float32", 1), "B": values((1, 2, 3), "float32", 2)})
    both_fail(model_of(node, [("A", "float32", ["N", 3]), ("B", "float32", ["M", 4])], "float32"),
              {"A": values((4, 3), "float32", 1), "B": values((2, 4), "float32", 2)}, "same batch size")
    node = helper.make_node("FeatureVectorizer", ["A", "B"], ["Y"], domain=ML, inputdimensions=[0, 2])
    check(model_of(node, [("A", "int64", ["N", 3]), ("B", "int64", ["N", 2])], "float32"),
          {"A": values((4, 3), "int64", 1), "B": values((4, 2), "int64", 2)})
    node = helper.make_node("FeatureVectorizer", ["A"], ["Y"], domain=ML, inputdimensions=[6])
    check(model_of(node, [("A", "int32", ["N", 4])], "float32"), {"A": values((5, 4), "int32", 3)})


def test_feature_vectorizer_inputdimensions_mismatch_declined(ep_devices):
    node = helper.make_node("FeatureVectorizer", ["A", "B"], ["Y"], domain=ML, inputdimensions=[3])
    session = runner.vkep_session(model_of(node, [("A", "float32", ["N", 3]), ("B", "float32", ["N", 3])], "float32"))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


# ---- OneHotEncoder -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_one_hot_encoder(ep_devices, dtype):
    """Categories with a repeat (ORT: its last index) and the int64 minimum (what NaN and values out of range truncate
    to); values on them, between them (truncated), NaN, infinities and unknown ones (zeros)."""
    cats = [3, -2, 0, 7, 3, -(2**63), 12]
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=cats, zeros=1)
    pool = np.array([3, -2, 0, 7, 12, 5, -1, 100, 2**40], np.int64)
    if dtype != "int64":
        pool = np.concatenate([pool.astype(dtype), np.array([3.7, -2.5, 0.4, -0.9, 1e-40, 6.99, np.nan, np.inf,
                                                              -np.inf, 1e30, -1e30], dtype)])
    rng = np.random.default_rng(9)
    for shape, dims in (((0, 4), ["N", 4]), ((1, 4), ["N", 4]), ((30, 4), ["N", 4]), ((6,), ["N"])):
        x = rng.choice(pool, shape).astype(dtype)
        check(model_of(node, [("X", dtype, dims)], "float32"), {"X": x})


def test_one_hot_encoder_unknown_category_with_zeros_0_fails(ep_devices):
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=[1, 2], zeros=0)
    model = model_of(node, [("X", "int64", ["N", 2])], "float32")
    both_fail(model, {"X": np.array([[1, 5]], np.int64)}, "Unknown Category")
    check(model, {"X": np.array([[1, 2], [2, 2]], np.int64)})


def test_one_hot_encoder_rank_3_and_strings_declined(ep_devices):
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=[1, 2])
    session = runner.vkep_session(model_of(node, [("X", "int64", [2, 2, 2])], "float32"))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_strings=["a", "b"])
    session = runner.vkep_session(model_of(node, [("X", "int64", ["N", 2])], "float32"))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


# ---- LabelEncoder ------------------------------------------------------------------------------------------------

LABEL_KEYS = {"int64": [5, -3, 0, 5, 2**40, -(2**63)],
              "float32": [1.5, -0.0, np.nan, 1.5, np.inf, 1e-40, -7.25]}
LABEL_VALUES = {"int64": [10, 20, 30, 40, 50, 60, 70], "float32": [0.5, -1.0, np.nan, 2.0, -0.0, 1e-40, 7.0]}
KIND = {"int64": "int64s", "float32": "floats"}


def label_inputs(key_dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if key_dtype == "int64":
        pool = np.array([5, -3, 0, 2**40, -(2**63), 1, 6, -4], np.int64)
    else:
        pool = np.array([1.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 1e-40, -7.25, 2.5, 3e-39], np.float32)
    return rng.choice(pool, (11, 3)).astype(key_dtype)


@pytest.mark.parametrize("ml_opset", [2, 4])
@pytest.mark.parametrize("key_dtype", ["int64", "float32"])
@pytest.mark.parametrize("value_dtype", ["int64", "float32"])
@pytest.mark.parametrize("default", [False, True])
def test_label_encoder(ep_devices, ml_opset, key_dtype, value_dtype, default):
    """Every numeric map, keys and values as lists; repeated keys (ORT: the first), +0 and -0, NaN keys (version 4:
    matched by NaN), the defaults given or the schema's (-1, -0.0)."""
    n = len(LABEL_KEYS[key_dtype])
    attrs = {f"keys_{KIND[key_dtype]}": LABEL_KEYS[key_dtype], f"values_{KIND[value_dtype]}": LABEL_VALUES[value_dtype][:n]}
    if default:
        attrs["default_float" if value_dtype == "float32" else "default_int64"] = 4.5 if value_dtype == "float32" else 99
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, **attrs)
    model = model_of(node, [("X", key_dtype, ["N", 3])], value_dtype, ml_opset)
    check(model, {"X": label_inputs(key_dtype, 1)})
    check(model, {"X": label_inputs(key_dtype, 2)[:0]})


@pytest.mark.parametrize("key_dtype", ["int64", "float32"])
@pytest.mark.parametrize("value_dtype", ["int64", "float32"])
def test_label_encoder_tensors(ep_devices, key_dtype, value_dtype):
    """Version 4's keys_tensor, values_tensor and default_tensor."""
    n = len(LABEL_KEYS[key_dtype])
    keys = np.array(LABEL_KEYS[key_dtype], key_dtype)
    values = np.array(LABEL_VALUES[value_dtype][:n], value_dtype)
    default = np.array([-5], value_dtype)
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, keys_tensor=numpy_helper.from_array(keys),
                            values_tensor=numpy_helper.from_array(values),
                            default_tensor=numpy_helper.from_array(default))
    check(model_of(node, [("X", key_dtype, ["N"])], value_dtype, 4), {"X": label_inputs(key_dtype, 3).reshape(-1)})


def test_label_encoder_strings_and_mismatches_declined(ep_devices):
    """String values stay on the CPU EP; keys and values of different counts, or keys not of the input's type, are
    declined (ORT fails the session)."""
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, keys_int64s=[1, 2], values_strings=["a", "b"])
    session = runner.vkep_session(_string_model(node))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    assert "keys" in ml_prep.LabelEncoder.declines(None, {"keys_int64s": [1], "values_floats": [1.0, 2.0]}, 2, [1],
                                                   ["int64"])
    assert ml_prep.LabelEncoder.declines(None, {"keys_floats": [1.0], "values_floats": [2.0]}, 2, [1],
                                         ["int64"]) is not None


def _string_model(node):
    x = helper.make_tensor_value_info("X", TensorProto.INT64, ["N"])
    y = helper.make_tensor_value_info("Y", TensorProto.STRING, None)
    return helper.make_model(helper.make_graph([node], "prep", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 2)], ir_version=10)


# ---- declines ----------------------------------------------------------------------------------------------------

def test_float64_needs_shader_float64():
    without, with_ = SimpleNamespace(features={}), SimpleNamespace(features={"shaderFloat64": True})
    for cls in (ml_prep.Scaler, ml_prep.Normalizer, ml_prep.FeatureVectorizer):
        assert "shaderFloat64" in cls.declines_on(without, {}, ["float64"])
        assert cls.declines_on(with_, {}, ["float64"]) is None
        assert cls.declines_on(without, {}, ["float32"]) is None
