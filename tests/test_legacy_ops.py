"""Ops of opsets 1-9 that old models (the ONNX model zoo's opset 7-8 versions, converters of that time) carry, on
vkep against ORT's CPU EP: ORT's experimental activations (ScaledTanh, ParametricSoftplus, Affine, Scale,
ThresholdedRelu 1) and ImageScaler, BatchNormalization 7, Sum/Mean/Max/Min 6 and Dropout 7 with its mask."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from test_reduce import check_node

from vkep import runner

VKEP = "VulkanExecutionProvider"
SPECIAL = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 3e-4, 1e-5, 20.0, -20.0, 100.0, -100.0,
                      88.0, -88.0, 3.4e38, -3.4e38])


def _values(shape=(2, 3, 5, 7), seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).uniform(-6, 6, shape).astype(np.float32)
    x.flat[:SPECIAL.size] = SPECIAL
    return x


def _model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], opset: int, inits=()):
    graph = helper.make_graph(
        nodes, "legacy", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                          for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, 1, None) for n in outputs], list(inits))  # (outputs: float32)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=4)


def _run_both(model, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    want = runner.cpu_session(model).run(None, feeds)
    for _ in range(2):  # (the second run may replay)
        got = session.run(None, feeds)
    return got, want


@pytest.mark.parametrize("op,attrs", [
    ("Affine", {"alpha": 1.5, "beta": -0.25}), ("Affine", {}), ("Scale", {"scale": -2.5}), ("Scale", {}),
    ("ThresholdedRelu", {"alpha": 0.5}), ("ThresholdedRelu", {}), ("ImageScaler", {"scale": 0.017,
                                                                                   "bias": [-103.9, -116.8, 0.5]})])
@pytest.mark.parametrize("opset", [1, 7, 9])
def test_exact_ops_equal_the_cpu_ep_bit_for_bit(ep_devices, op, attrs, opset):
    """One multiply and one add (or a comparison) per element, in ORT's order: the same bits, NaN and
    infinities included."""
    x = _values()
    got, want = _run_both(_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset), {"x": x})
    assert got[0].dtype == want[0].dtype == np.float32
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))


@pytest.mark.parametrize("op", ["ScaledTanh", "ParametricSoftplus"])
@pytest.mark.parametrize("alpha,beta", [(1.5, 0.7), (-2.0, 3.0), (1.0, -1.0)])
def test_transcendental_activations(ep_devices, op, alpha, beta):
    """Against ORT's Eigen formulas within float32 noise; NaN and infinities as the CPU EP gives them."""
    x = _values()
    got, want = _run_both(_model([helper.make_node(op, ["x"], ["y"], alpha=alpha, beta=beta)], {"x": x}, ["y"], 7),
                          {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=1e-6)
    assert np.array_equal(np.isnan(got[0]), np.isnan(want[0]))


def test_image_scaler_declines_what_the_cpu_ep_refuses(ep_devices):
    """A bias count other than C leaves the node to the CPU EP, which fails the run as it would alone."""
    x = _values((1, 3, 4, 4))
    model = _model([helper.make_node("ImageScaler", ["x"], ["y"], scale=2.0, bias=[1.0, 2.0])], {"x": x}, ["y"], 7)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    with pytest.raises(Exception, match="(?i)bias"):
        session.run(None, {"x": x})


@pytest.mark.parametrize("opset", [7, 8])
def test_batch_normalization_7(ep_devices, opset):
    rng = np.random.default_rng(1)
    consts = {"s": rng.uniform(0.5, 2, 4).astype(np.float32), "b": rng.uniform(-1, 1, 4).astype(np.float32),
              "m": rng.uniform(-1, 1, 4).astype(np.float32), "v": rng.uniform(0.1, 3, 4).astype(np.float32)}
    check_node("BatchNormalization", {"x": _values((2, 4, 5, 6))}, opset, consts=consts, epsilon=1e-3,
               momentum=0.8)


def test_batch_normalization_7_per_element_statistics_stay_on_the_cpu_ep(ep_devices):
    x = _values((2, 4, 5, 6))
    inits = [numpy_helper.from_array(np.ones((4, 5, 6), np.float32), n) for n in "sbmv"]
    model = _model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0)],
                   {"x": x}, ["y"], 7, inits)
    assert [ep for _, _, ep in runner.placement(runner.vkep_session(model))] == ["CPUExecutionProvider"]


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_ops_of_opset_6(ep_devices, op):
    """Opsets 6-7 (no broadcasting there: every input of one shape)."""
    feeds = {f"x{i}": _values((3, 4, 5), seed=i) for i in range(3)}
    check_node(op, feeds, 7)


@pytest.mark.parametrize("opset", [7, 9])
@pytest.mark.parametrize("outputs", [1, 2])
def test_dropout_7_is_the_identity_and_its_mask_the_cpu_ep_s(ep_devices, opset, outputs):
    """Opsets 7-9: the mask has X's type; ORT's CPU EP fills it with 0."""
    x = _values((3, 4, 5))
    names = ["y", "mask"][:outputs]
    model = _model([helper.make_node("Dropout", ["x"], names, ratio=0.3),
                    helper.make_node("Abs", ["y"], ["z"])], {"x": x}, ["z", *names[1:]], opset)
    got, want = _run_both(model, {"x": x})
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op", ["Sum", "Max"])
def test_variadic_ops_of_opset_6_refuse_to_broadcast(ep_devices, op):
    """Inputs of two shapes: the CPU EP fails the run (opset 6 broadcasts nothing), and so does vkep's run
    rather than broadcast; declared shapes keep the node on the CPU EP."""
    a, b = _values((3, 4, 5)), _values((4, 5), seed=1)
    model = _model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"], 7)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    with pytest.raises(Exception, match="same shape"):
        session.run(None, {"a": a, "b": b})


@pytest.mark.parametrize("attrs", [{"border": [1, 2, 3, 1]}, {"border": [2, 1, 0, 0], "scale": [3, 4]},
                                   {"border": [0, 0, 9, 0]}, {"border": [2, 3, 7, 4], "scale": [0, 0]}])
def test_crop(ep_devices, attrs):
    x = _values((2, 3, 7, 9))
    got, want = _run_both(_model([helper.make_node("Crop", ["x"], ["y"], **attrs)], {"x": x}, ["y"], 7), {"x": x})
    assert got[0].shape == want[0].shape
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("attrs", [{"border": [5, 0, 5, 0]}, {"border": [1, 1, 1, 1], "scale": [7, 2]},
                                   {"border": [1, 1, 1]}, {"border": [-1, 0, 0, 0]}])
def test_crop_that_does_not_fit_stays_on_the_cpu_ep(ep_devices, attrs):
    """ORT fails these runs (or reads outside X for a negative border): vkep refuses the node."""
    x = _values((2, 3, 7, 9))
    model = _model([helper.make_node("Crop", ["x"], ["y"], **attrs)], {"x": x}, ["y"], 7)
    assert [ep for _, _, ep in runner.placement(runner.vkep_session(model))] == ["CPUExecutionProvider"]


@pytest.mark.parametrize("shape", [[0, -1], [6, 35], [-1, 5, 7], [2, 0, 35], [210]])
@pytest.mark.parametrize("opset", [1, 4])
def test_reshape_1_takes_its_shape_from_the_attribute(ep_devices, shape, opset):
    """Reshape before opset 5: the shape an attribute (0 keeps the input's dimension, -1 takes the rest)."""
    x = _values()
    nodes = [helper.make_node("Softmax", ["x"], ["r"]), helper.make_node("Reshape", ["r"], ["s"], shape=shape),
             helper.make_node("Transpose", ["s"], ["y"])]  # (ops with kernels of opset 1 on the CPU EP)
    got, want = _run_both(_model(nodes, {"x": x}, ["y"], opset), {"x": x})
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=1e-9)  # (Softmax's exp: float noise)


@pytest.mark.parametrize("across_channels", [0, 1])
@pytest.mark.parametrize("normalize_variance", [0, 1])
@pytest.mark.parametrize("opset", [1, 8])
def test_mean_variance_normalization_1(ep_devices, across_channels, normalize_variance, opset):
    """MeanVarianceNormalization before opset 9: statistics per channel over N, H and W (ORT's kernel of opsets 1-8),
    or over all of X across channels; no epsilon. Within float noise of the CPU EP's sums."""
    x = np.random.default_rng(opset).uniform(-3, 5, (2, 3, 4, 5)).astype(np.float32)
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], across_channels=across_channels,
                            normalize_variance=normalize_variance)
    got, want = _run_both(_model([node], {"x": x}, ["y"], opset), {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("attrs", [{}, {"across_channels": 1}, {"normalize_variance": 0}])
def test_mean_variance_normalization_1_defaults(ep_devices, attrs):
    """Attributes left out take the defaults (across_channels 0, normalize_variance 1), as the CPU EP's kernel."""
    x = np.random.default_rng(3).uniform(-3, 5, (1, 4, 3, 6)).astype(np.float32)
    got, want = _run_both(_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)], {"x": x},
                                 ["y"], 7), {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=2e-6)
