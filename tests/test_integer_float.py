"""Integer products through float32 GEMMs (vkep/kernels/integer_float.py): MatMulInteger where it takes that path
equals ORT's CPU EP to the last bit, at the edges of float32's exactness too, and keeps the integer shader where
the path would not be exact or would not pay."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner
from vkep.kernels import integer_float, quantize


def _model(a_shape, b: np.ndarray, a_type, zero_points: dict[str, np.ndarray], b_constant: bool = True):
    names = ["a", "b"] + [k if k in zero_points else "" for k in ("azp", "bzp")]
    while not names[-1]:
        names.pop()
    inputs = [helper.make_tensor_value_info("a", helper.np_dtype_to_tensor_dtype(np.dtype(a_type)), a_shape)]
    inits = [numpy_helper.from_array(v, k) for k, v in zero_points.items()]
    if b_constant:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", helper.np_dtype_to_tensor_dtype(b.dtype), b.shape))
    node = helper.make_node("MatMulInteger", names, ["y"])
    graph = helper.make_graph([node], "mmi", inputs, [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("case", ["u8u8_per_column", "u8s8_7bit", "batched_a", "k_two_full_slices",
                                  "dynamic_u8_b"])
def test_matmul_integer_through_float_equals_the_cpu_ep(ep_devices, float_products, case):
    rng = np.random.default_rng(3)
    m, k, n, a_shape = 64, 520, 128, None
    zero_points: dict[str, np.ndarray] = {}
    if case == "u8u8_per_column":
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(0, 256, (k, n)).astype(np.uint8)
        zero_points = {"azp": np.array(200, np.uint8), "bzp": rng.integers(0, 256, n).astype(np.uint8)}
    elif case in ("u8s8_7bit", "batched_a"):
        a_shape = (3, m, k) if case == "batched_a" else (m, k)
        a = rng.integers(0, 256, a_shape).astype(np.uint8)
        b = rng.integers(-64, 65, (k, n)).astype(np.int8)  # (never saturates in MLAS's AVX2 pairs)
        zero_points = {"azp": np.array(7, np.uint8), "bzp": np.array(-3, np.int8)}
    elif case == "k_two_full_slices":  # every partial sum at its largest: 258 x 255 x 255 = 16,776,450 < 2^24
        k = 2 * integer_float.FLOAT_SLICE_K
        a = np.full((m, k), 255, np.uint8)
        b = np.full((k, n), 255, np.uint8)
        a[0, 0], b[0, 0] = 0, 0
    else:  # B fed at run time, uint8: its products never saturate, whatever its values
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(0, 256, (k, n)).astype(np.uint8)
        zero_points = {"azp": np.array(128, np.uint8)}
    model = _model(list(a.shape), b, np.uint8, zero_points, b_constant=case != "dynamic_u8_b")
    feeds = {"a": a} if case != "dynamic_u8_b" else {"a": a, "b": b}
    want = runner.cpu_session(model).run(None, feeds)[0]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for _ in range(2):  # (the second run replays the plan)
        np.testing.assert_array_equal(session.run(None, feeds)[0], want)
    assert float_products and set(float_products) == {k}  # (at the dry run and each run through Python)
    if case == "k_two_full_slices":
        assert want[1, 1] == 2 * 16_776_450


def test_saturating_and_small_products_keep_the_integer_shader(ep_devices, float_products):
    """Full-range int8 weights with uint8 A (which MLAS's AVX2 pairs may saturate, where the host has no VNNI), a prime
    K (no even cut), and a product of a few rows (widening B each run costs more than it saves) take
    matmul_integer.comp."""
    rng = np.random.default_rng(4)
    for m, k, b_range in ((64, 520, 127), (64, 521, 64), (8, 520, 64)):
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(-b_range, b_range + 1, (k, 128)).astype(np.int8)
        model = _model([m, k], b, np.uint8, {})
        want = runner.cpu_session(model).run(None, {"a": a})[0]
        np.testing.assert_array_equal(runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"a": a})[0],
                                      want)
    # (where the CPU EP's MLAS has VNNI nothing saturates: the full-range product then takes the float path too)
    assert set(float_products) == (set() if quantize.cpu_ep_saturates() else {520})
    assert integer_float.float_slices(521) == 0 and integer_float.float_slices(520) == 4


@pytest.mark.parametrize("case", ["1d_dilated", "2d_full_range_batch2"])
def test_conv_integer_through_float_equals_the_cpu_ep(ep_devices, float_products, case):
    """ConvInteger of one group through float32 (widened X's patches by widened W, K in slices): Kokoro-82M's
    dilated 1-D convolutions (uint8 weights and zero points), and a 2-D one of full-range int8
    weights over two images (ConvInteger's products do not saturate in the CPU EP: exact sums)."""
    rng = np.random.default_rng(5)
    if case == "1d_dilated":
        x = rng.integers(0, 256, (1, 32, 400)).astype(np.uint8)
        w = rng.integers(0, 256, (32, 32, 11)).astype(np.uint8)
        zps = {"xzp": np.array(117, np.uint8), "wzp": np.array(129, np.uint8)}
        attrs = {"dilations": [3], "pads": [15, 15]}
    else:
        x = rng.integers(0, 256, (2, 32, 40, 40)).astype(np.uint8)
        w = rng.integers(-128, 128, (32, 32, 3, 3)).astype(np.int8)
        zps = {"xzp": np.array(3, np.uint8)}
        attrs = {"pads": [1, 1, 1, 1]}
    inits = [numpy_helper.from_array(w, "w")] + [numpy_helper.from_array(v, k) for k, v in zps.items()]
    node = helper.make_node("ConvInteger", ["x", "w"] + list(zps), ["y"], **attrs)
    graph = helper.make_graph([node], "ci", [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert float_products and set(float_products) == {math.prod(w.shape[1:])}


@pytest.mark.parametrize("types", [("uint8", "uint8"), ("int8", "int8"), ("uint8", "int8")])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_through_float_equals_the_cpu_ep(ep_devices, float_products, types, per_channel):
    """QLinearConv of one group through float32 (ConvInteger's path into int32 accumulators, then integer_float.comp
    MODE 2 adds the bias and requantizes as conv_integer.comp does), where the CPU EP's products do not saturate:
    uint8 x uint8 and int8 x int8 (a QOperator model's two usual forms), W's scale per tensor or per output channel,
    two images, a bias; full-range values, so that outputs saturate both ways. uint8 x int8, which MLAS's AVX2 pairs
    may saturate, keeps conv_integer.comp (where the host has no VNNI), as does a K below QLINEAR_FLOAT_MIN_K.
    dla34 (timm, QOperator uint8): 1075 -> 766 ms a run, max abs 0."""
    x_type, w_type = (np.dtype(t) for t in types)
    rng = np.random.default_rng(6)
    info_x, info_w = np.iinfo(x_type), np.iinfo(w_type)
    x = rng.integers(info_x.min, info_x.max + 1, (2, 128, 12, 12)).astype(x_type)
    w = rng.integers(info_w.min, info_w.max + 1, (32, 128, 3, 3)).astype(w_type)
    w_scale = (rng.uniform(0.5, 2, 32) if per_channel else np.array(1.3)).astype(np.float32) * 1e-3
    w_zp = np.full(w_scale.shape, (int(info_w.min) + int(info_w.max) + 1) // 2, w_type)
    consts = {"x_scale": np.array(0.02, np.float32), "x_zp": np.array(info_x.min + 100, x_type), "w": w,
              "w_scale": w_scale, "w_zp": w_zp, "y_scale": np.array(0.05, np.float32),
              "y_zp": np.array(info_x.min + 120, x_type), "bias": rng.integers(-5000, 5000, 32).astype(np.int32)}
    _requantized_as_the_cpu_ep("QLinearConv", x, consts, {"pads": [1, 1, 1, 1]}, types, float_products, 128 * 9)


def _requantized_as_the_cpu_ep(op: str, x: np.ndarray, consts: dict, attrs: dict, types: tuple, float_products,
                               k: int) -> None:
    """One `op` node over input x and then `consts` (initializers, in the op's input order): on vkep, first run and
    replay, equal to the CPU EP, with outputs saturating both ways; the float path taken (a product of K = k)
    unless the CPU EP's products saturate."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node(op, ["x", *consts], ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", elem, None)],
                              [numpy_helper.from_array(v, name) for name, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for _ in range(2):  # (the second run replays the plan)
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], want)
    info = np.iinfo(x.dtype)
    assert (want == info.min).any() and (want == info.max).any()
    saturates = types == ("uint8", "int8") and quantize.cpu_ep_saturates()
    assert set(float_products) == (set() if saturates else {k})


@pytest.mark.parametrize("types", [("uint8", "uint8"), ("int8", "int8"), ("uint8", "int8")])
@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul_through_float_equals_the_cpu_ep(ep_devices, float_products, types, per_column):
    """QLinearMatMul (2-D B) through float32 (MatMulInteger's path into int32 accumulators, then integer_float.comp
    MODE 2 requantizes as matmul_integer.comp does, B's scale and zero point per column or per tensor), where the CPU
    EP's products do not saturate; full-range values, outputs saturating both ways. 256 x 768 by 768 x 768: 37 -> 24
    ms on lavapipe."""
    a_type, b_type = (np.dtype(t) for t in types)
    rng = np.random.default_rng(7)
    info_a, info_b = np.iinfo(a_type), np.iinfo(b_type)
    a = rng.integers(info_a.min, info_a.max + 1, (2, 48, 520)).astype(a_type)
    b = rng.integers(info_b.min, info_b.max + 1, (520, 96)).astype(b_type)
    shape = (96,) if per_column else ()
    mid = (int(info_b.min) + int(info_b.max) + 1) // 2
    consts = {"a_scale": np.array(0.02, np.float32), "a_zp": np.array(info_a.min + 90, a_type), "b": b,
              "b_scale": (rng.uniform(0.5, 2, shape) * 1e-3).astype(np.float32),
              "b_zp": (rng.integers(mid - 3, mid + 4, shape) if per_column else np.array(mid)).astype(b_type),
              "y_scale": np.array(0.01, np.float32), "y_zp": np.array(info_a.min + 120, a_type)}
    _requantized_as_the_cpu_ep("QLinearMatMul", a, consts, {}, types, float_products, 520)


def test_a_session_reads_the_manifest_at_most_once(ep_devices, float_products, monkeypatch):
    """Kernels that compose others (ConvInteger through MatMul's product) look their entries up in the manifest the
    process registered, not in the file: a dynamically quantized ISNet of 119 ConvIntegers took 19.8 s to create a
    session, 18 s of it reading kernels.yaml once per node (0.1 s each); now 2.1 s."""
    from vkep.kernels import manifest

    reads = []
    real = manifest._load_file
    monkeypatch.setattr(manifest, "_load_file", lambda *a, **k: reads.append(a) or real(*a, **k))
    rng = np.random.default_rng(8)
    w = rng.integers(-64, 65, (16, 16, 3, 3)).astype(np.int8)  # (never saturates: the float path on any CPU)
    nodes, value = [], "x"
    for i in range(8):  # a chain of ConvIntegers, each output requantized by a Cast for the next
        nodes += [helper.make_node("ConvInteger", [value, "w"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Cast", [f"c{i}"], [f"q{i}"], to=TensorProto.UINT8)]
        value = f"q{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, 16, 48, 48))],
                              [helper.make_tensor_value_info(value, TensorProto.UINT8, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = rng.integers(0, 4, (1, 16, 48, 48)).astype(np.uint8)
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert float_products  # (the ConvIntegers took the composed path)
    assert len(reads) <= 1, f"the manifest was read {len(reads)} times"
