"""Normalization on vkep against ORT's CPU EP: LayerNormalization, RMSNormalization, GroupNormalization,
InstanceNormalization, BatchNormalization (inference)."""

from __future__ import annotations

import numpy as np
import pytest
from test_reduce import _data, check_node


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,axis,scale_shape,bias", [
    ((2, 3, 4), -1, (4,), True),
    ((2, 3, 4), 1, (3, 4), True),
    ((2, 3, 4), 1, (4,), False),          # scale broadcast over the normalized dims
    ((2, 3, 4, 5), -3, (3, 1, 1), True),  # per-channel scale over [C, H, W]
    ((2, 3, 4), 0, (2, 3, 4), False),
    ((2, 3, 4), -1, (3, 4), True),        # Scale broadcast over X, not only the normalized dims
    ((2, 3, 4), 2, (2, 3, 1), False),
    ((3, 2000), -1, (2000,), True),       # long rows
    ((2, 300000), -1, (300000,), True),   # wide workgroups
    ((0, 4), -1, (4,), True),             # no rows
])
def test_layer_norm(ep_devices, dtype, shape, axis, scale_shape, bias):
    feeds = {"x": _data(shape, dtype), "scale": _data(scale_shape, dtype, seed=1)}
    if bias:
        feeds["b"] = _data(scale_shape, dtype, seed=2)
    check_node("LayerNormalization", feeds, 17, axis=axis, epsilon=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,axis,scale_shape", [
    ((2, 3, 4), -1, (4,)),
    ((2, 3, 4), 1, (3, 4)),
    ((2, 3, 4), 1, (4,)),
    ((3, 1000), -1, (1000,)),
])
def test_rms_norm(ep_devices, dtype, shape, axis, scale_shape):
    feeds = {"x": _data(shape, dtype), "scale": _data(scale_shape, dtype, seed=1)}
    check_node("RMSNormalization", feeds, 23, axis=axis)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 4), ((1, 8, 40, 40), 2), ((3, 4), 2)])
def test_group_norm(ep_devices, dtype, opset, shape, groups):
    params = groups if opset < 21 else shape[1]  # per group before opset 21, per channel from 21
    feeds = {"x": _data(shape, dtype), "scale": _data((params,), dtype, seed=1), "bias": _data((params,), dtype, seed=2)}
    check_node("GroupNormalization", feeds, opset, num_groups=groups, epsilon=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5), (2, 3, 50, 50)])
def test_instance_norm(ep_devices, dtype, shape):
    c = shape[1]
    feeds = {"x": _data(shape, dtype), "scale": _data((c,), dtype, seed=1), "b": _data((c,), dtype, seed=2)}
    check_node("InstanceNormalization", feeds, 6, epsilon=1e-4)
    check_node("InstanceNormalization", feeds, 22)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("opset", [9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4, 5), (1, 4, 2, 3, 2)])
def test_batch_norm(ep_devices, dtype, opset, shape):
    c = shape[1]
    feeds = {"x": _data(shape, dtype), "scale": _data((c,), dtype, seed=1), "b": _data((c,), dtype, seed=2),
             "mean": _data((c,), dtype, seed=3), "var": _data((c,), dtype, seed=4, low=0.1)}
    check_node("BatchNormalization", feeds, opset, epsilon=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layer_norm_mean_and_inv_std_dev(ep_devices, dtype):
    feeds = {"x": _data((2, 3, 4), dtype), "scale": _data((3, 4), dtype, seed=1), "b": _data((3, 4), dtype, seed=2)}
    check_node("LayerNormalization", feeds, 17, outputs=[("y", None), ("mean", np.float32)], axis=1)
    outputs = [("y", None), ("mean", np.float32), ("inv_std_dev", np.float32)]
    check_node("LayerNormalization", feeds, 17, outputs=outputs, axis=-1, epsilon=1e-2)


@pytest.mark.parametrize("opset", [11, 13, 16])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layer_norm_before_opset_17_is_ort_s_own(ep_devices, opset, dtype):
    """ORT registers LayerNormalization in the ONNX domain from version 1 (its fusions make it, and exporters of
    models older than opset 17 wrote it); its CPU EP runs opset 17's kernel there, and so does vkep."""
    feeds = {"x": _data((2, 3, 8), dtype), "scale": _data((8,), dtype, seed=1), "b": _data((8,), dtype, seed=2)}
    outputs = [("y", None), ("mean", np.float32), ("inv_std_dev", np.float32)]
    check_node("LayerNormalization", feeds, opset, outputs=outputs, axis=-1, epsilon=1e-3)


def test_batch_norm_training_mode_stays_on_the_cpu_ep(ep_devices):
    """vkep declines training_mode=1 while ORT partitions the graph: the node runs on the CPU EP."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from vkep import runner

    c = 3
    inits = [numpy_helper.from_array(np.full(c, v, np.float32), n) for n, v in
             (("scale", 1.5), ("bias", 0.1), ("mean", 0.0), ("var", 1.0))]
    outs = ["y", "running_mean", "running_var"]  # training mode has three outputs
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], outs, training_mode=1)
    graph = helper.make_graph([node], "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 4])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=10)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    x = np.random.default_rng(0).uniform(-1, 1, (2, c, 4)).astype(np.float32)
    for got, want in zip(session.run(None, {"x": x}), runner.cpu_session(model).run(None, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_skip_norm_outputs(ep_devices, op, dtype):
    """com.microsoft's skip norms with their optional outputs: the statistics ORT's CPU EP fills and the
    input + skip + bias sum (the next block's residual), with and without bias."""
    from onnx import TensorProto, helper

    from vkep import runner

    simplified = op.startswith("SkipSimplified")
    for with_bias in (False, True):
        feeds = {"x": _data((2, 5, 16), dtype) * 5, "skip": _data((2, 5, 16), dtype, seed=1),
                 "gamma": _data((16,), dtype, seed=2)}
        if not simplified:
            feeds["beta"] = _data((16,), dtype, seed=3)
        if with_bias:
            feeds["bias"] = _data((16,), dtype, seed=4)
        names = ["x", "skip", "gamma"] + ([] if simplified else ["beta" if "beta" in feeds else ""]) + (
            ["bias"] if with_bias else [])
        # SkipSimplifiedLayerNormalization's "mean" is not one ORT's CPU EP writes: leave it unnamed
        outs = ["y", "" if simplified else "mean", "inv", "sum"]
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        types = {"y": elem, "mean": TensorProto.FLOAT, "inv": TensorProto.FLOAT, "sum": elem}
        node = helper.make_node(op, names, outs, domain="com.microsoft", epsilon=1e-5)
        graph = helper.make_graph([node], op, [helper.make_tensor_value_info(k, elem, v.shape) for k, v in feeds.items()],
                                  [helper.make_tensor_value_info(o, types[o], None) for o in outs if o])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.microsoft", 1)], ir_version=8)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
        want = runner.cpu_session(model).run(None, feeds)
        for got, w in zip(session.run(None, feeds), want, strict=True):
            # the sum is taken in float32 for float16 too, as ORT's CPU EP does: the float32 statistics agree
            # to float32 rounding, the float16 outputs to a float16 step (the fuzzer found the float16 sum
            # rounded before the statistics: 2e-3 apart)
            tol = {"rtol": 2e-3, "atol": 2e-3} if got.dtype == np.float16 else {"rtol": 1e-4, "atol": 1e-5}
            np.testing.assert_allclose(got.astype(np.float64), w.astype(np.float64), **tol)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_simplified_layer_norm_inv_std_var(ep_devices, dtype):
    """ORT's SimplifiedLayerNormalization (RMS norm, in the ONNX domain) with its optional inv_std_var."""
    feeds = {"x": _data((2, 3, 8), dtype), "scale": _data((8,), dtype, seed=1)}
    check_node("SimplifiedLayerNormalization", feeds, 17, outputs=[("y", None), ("inv", np.float32)], epsilon=1e-3)


@pytest.mark.parametrize("skip_shape", [(2, 24), (1, 24), (24,)], ids=["as-input", "1SH", "SH"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
def test_skip_norms_equal_the_cpu_ep_bit_for_bit(ep_devices, op, with_bias, skip_shape):
    """com.microsoft's skip norms in ORT 1.32's CPU EP order, equal to the last bit with their statistics: one
    lane walks the row; SkipSimplifiedLayerNormalization sums the squares, SkipLayerNormalization keeps
    Welford's running mean and M2; each output is divided by sqrt(... + eps). (The workgroup's tree sums were
    ulps off in 1 of 5 values; for SkipLayerNormalization that moved Kokoro-82M's durations.) A skip of [1, S, H]
    or [S, H] is added to every batch (ORT's optimizer fuses a quantized BERT's position embeddings so)."""
    from onnx import TensorProto, helper, numpy_helper

    from vkep import runner

    simplified = op.startswith("SkipSimplified")
    rng = np.random.default_rng(7)
    hidden = 896 if simplified else 768  # (Qwen2.5-0.5B's; ALBERT's in Kokoro-82M)
    inits = [numpy_helper.from_array(rng.normal(1, 0.2, hidden).astype(np.float32), "gamma")]
    names = ["x", "skip", "gamma"]
    if not simplified:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.2, hidden).astype(np.float32), "beta"))
        names.append("beta")
    if with_bias:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.2, hidden).astype(np.float32), "bias"))
        names.append("bias")  # (input 3 of SkipSimplifiedLayerNormalization, 4 of SkipLayerNormalization)
    outs = ["y", "" if simplified else "mean", "inv", "sum"]
    node = helper.make_node(op, names, outs, domain="com.microsoft", epsilon=1e-6)
    graph = helper.make_graph([node], "n", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 24, hidden]),
                                            helper.make_tensor_value_info("skip", TensorProto.FLOAT,
                                                                          [*skip_shape, hidden])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs if n], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    for seed in range(3):
        r = np.random.default_rng(seed)
        feeds = {"x": r.normal(0.5, 3, (2, 24, hidden)).astype(np.float32),
                 "skip": r.normal(0, 1, (*skip_shape, hidden)).astype(np.float32)}
        for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["LayerNormalization", "LayerNormalization-no-bias", "SimplifiedLayerNormalization",
                                "RMSNormalization"])
def test_layer_norms_equal_the_cpu_ep_bit_for_bit(ep_devices, op):
    """float32 LayerNormalization and the RMS norms in ORT 1.32's CPU EP order, equal to the last bit with their
    statistics, at lengths on both sides of MLAS's (8 and 16) and with every scalar tail (n % 8): MLAS's AVX2
    kernel on a host with AVX2 and FMA (the mean summed in double, the deviations' squares fused in eight
    lanes), its scalar loop elsewhere and for short rows. (The workgroup's tree sums were ulps off in 1 of 5
    values; in Kokoro-82M a DynamicQuantizeLinear after a LayerNormalization made that a quantization step.)"""
    from onnx import TensorProto, helper, numpy_helper

    from vkep import runner
    from vkep.gpu import device
    from vkep.kernels import norm

    name, with_bias = op.split("-")[0], not op.endswith("no-bias")
    mode = norm.MODE_MEAN_VAR if name == "LayerNormalization" else norm.MODE_RMS
    for length in (3, 7, 8, 9, 13, 15, 16, 20, 23, 63, 768, 770):
        if norm.layer_norm_order(mode, length, "float32", device.usable_devices()[0]) == norm.ORDER_TREE:
            pytest.skip("the device cannot sum as the CPU EP on this host does (MLAS's double mean: shaderFloat64)")
        rng = np.random.default_rng(length)
        inits = [numpy_helper.from_array(rng.normal(1, 0.2, length).astype(np.float32), "scale")]
        if mode == norm.MODE_MEAN_VAR and with_bias:
            inits.append(numpy_helper.from_array(rng.normal(0, 0.2, length).astype(np.float32), "bias"))
        outs = ["y", "mean", "inv"] if mode == norm.MODE_MEAN_VAR else ["y", "inv"]
        if name == "RMSNormalization":
            outs = ["y"]  # (ONNX's has no statistics outputs)
        node = helper.make_node(name, ["x"] + [t.name for t in inits], outs, axis=-1, epsilon=1e-5)
        graph = helper.make_graph([node], "n", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, length])],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs], inits)
        opset = 23 if name == "RMSNormalization" else 17
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
        x = rng.normal(0.5, 2, (32, length)).astype(np.float32)
        for got, want, out in zip(session.run(None, {"x": x}), cpu.run(None, {"x": x}), outs, strict=True):
            assert np.array_equal(got, want), f"{op} of {length}: {out} {np.count_nonzero(got != want)} values apart"


F64_SPECIAL = [[np.nan, 1.0, 2.0, 3.0], [np.inf, 1.0, 2.0, 3.0], [-np.inf, -1.0, 2.0, 3.0], [1e300, -1e300, 1.0, 2.0],
               [1e-310, 5e-324, -0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [-0.0, -0.0, -0.0, -0.0], [1e154, 1e154, -1e154, 3.0]]


def float64_outputs(op: str, opset: int, feeds: dict, outs: list[tuple[str, int]],
                    **attrs) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(vkep's, the CPU EP's) outputs of one node reading `feeds` (None: an absent optional input), every node on
    vkep; `outs` are (name, ONNX element type)."""
    from onnx import helper

    from vkep import runner

    given = {k: v for k, v in feeds.items() if v is not None}
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in given.items()]
    node = helper.make_node(op, [k if v is not None else "" for k, v in feeds.items()], [n for n, _ in outs], **attrs)
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info(n, t, None) for n, t in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    got = session.run(None, given)
    np.testing.assert_array_equal(session.run(None, given)[0], got[0])  # (the replayed plan)
    return got, runner.cpu_session(model).run(None, given)


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    """Equal to the bit (any NaN for a NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8)) if got.size else True, \
        f"{np.count_nonzero(got[~nan] != want[~nan])} values apart"


@pytest.mark.parametrize("shape,axis,scale_shape,bias_shape", [
    ((8, 4), -1, (4,), (4,)),
    ((8, 4), -1, (4,), None),
    ((8, 4), -1, (1,), None),            # (the sums' path adds a 0 bias: -0 comes out +0)
    ((2, 3, 4), 1, (3, 4), None),
    ((2, 3, 4), 1, (1, 3, 4), (3, 4)),   # scale and bias of the row's size: Welford's loop
    ((2, 3, 4), 1, (4,), (3, 4)),        # broadcast: the sums of x and x^2
    ((2, 3, 4, 5), -3, (3, 1, 1), (3, 1, 1)),
    ((2, 3, 4), 2, (2, 3, 1), None),     # scale broadcast over X, not only the normalized dims
    ((2, 3, 4), 0, (2, 3, 4), (2, 3, 4)),
    ((3, 2000), -1, (2000,), (2000,)),
    ((2, 70000), -1, (70000,), None),    # past one lane's loop budget: walked in three pieces
    ((2, 70000), -1, (1,), (70000,)),    # and so with the sums
    ((0, 4), -1, (4,), (4,)),
])
def test_float64_layer_norm_equals_the_cpu_ep(ep_devices, shape, axis, scale_shape, bias_shape):
    """float64 LayerNormalization in double as ORT 1.32's CPU EP computes it (found by emulating it in numpy): where
    scale and bias have the row's size, Welford's loop in order (d = x - mean; mean += d / k; M2 += d * (x - mean)),
    else the sums of x and x^2 (var = E[x^2] - mean^2); root = sqrt(var + eps) with the float epsilon widened;
    y = (x - mean) / root * scale + bias, each step rounded; Mean and InvStdDev (1 / root) as floats. Bit for bit,
    with NaN, infinities, -0, subnormals, huge values and constant rows."""
    from onnx import TensorProto

    rng = np.random.default_rng(len(shape) + axis)
    x = rng.normal(0.5, 2, shape)
    special = np.ravel(F64_SPECIAL)[:x.size]
    x.flat[:special.size] = special  # (rows of 4 each one of F64_SPECIAL's)
    feeds = {"x": x, "scale": rng.normal(1, 0.3, scale_shape),
             "b": rng.normal(0, 0.3, bias_shape) if bias_shape else None}
    outs = [("y", TensorProto.DOUBLE), ("mean", TensorProto.FLOAT), ("inv_std_dev", TensorProto.FLOAT)]
    got, want = float64_outputs("LayerNormalization", 17, feeds, outs, axis=axis, epsilon=1e-3)
    for g, w in zip(got, want, strict=True):
        assert_bits_equal(g, w)


@pytest.mark.parametrize("opset", [9, 15])
@pytest.mark.parametrize("shape", [(2, 4), (2, 4, 5, 3), (1, 4, 2, 3, 2)])
def test_float64_batch_norm_equals_the_cpu_ep(ep_devices, opset, shape):
    """float64 BatchNormalization (inference) as the CPU EP fuses it in double: inv = 1 / sqrt(var + eps),
    s = inv * scale, b = bias - mean * s, y = x * s + b; bit for bit, with NaN, infinities, -0 and subnormals."""
    from onnx import TensorProto

    rng = np.random.default_rng(shape[-1])
    x = rng.normal(0, 3, shape)
    x.flat[:8] = [np.nan, np.inf, -np.inf, -0.0, 1e-310, 5e-324, 1e300, -1e300]
    c = shape[1]
    feeds = {"x": x, "scale": rng.normal(1, 0.5, c), "b": rng.normal(0, 1, c), "mean": rng.normal(0, 1, c),
             "var": np.array([1e-300, 0.0, 2.5, 1e300])}
    got, want = float64_outputs("BatchNormalization", opset, feeds, [("y", TensorProto.DOUBLE)], epsilon=1e-3)
    assert_bits_equal(got[0], want[0])
