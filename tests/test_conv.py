"""Conv and ConvTranspose against ORT's CPU EP: every attribute and shape path of conv.comp (implicit GEMM,
1x1 GEMM, direct for depthwise), winograd.comp (3x3 convs with packed weights) and conv_transpose.comp, plus
the ONNX backend node tests of the family."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import tolerance
from onnx import helper, numpy_helper
from onnx.backend.test.case.node import collect_testcases

from vkep import runner
from vkep.kernels import winograd

FAMILY = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
          "GlobalLpPool", "LRN"}


def single_node(op: str, inputs: dict[str, tuple], opset: int, dtype: str = "float32", n_outputs: int = 1,
                **attrs):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    outs = [f"y{j}" for j in range(n_outputs)]
    node = helper.make_node(op, list(inputs), outs, **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, elem, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info(o, elem, None) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def check(op: str, inputs: dict[str, tuple], opset: int = 22, dtype: str = "float32", ref_opset: int | None = None,
          loose: dict | None = None, **attrs) -> None:
    """Run the node on vkep (it must be placed there) and on the CPU EP (float16: its float32 twin)."""
    rng = np.random.default_rng(0)
    feeds = {n: rng.uniform(-1, 1, s).astype(dtype) for n, s in inputs.items()}
    session = runner.vkep_session(single_node(op, inputs, opset, dtype, **attrs), disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    ref = runner.cpu_session(single_node(op, inputs, ref_opset or opset, "float32", **attrs))
    want = ref.run(None, {n: v.astype(np.float32) for n, v in feeds.items()})
    tol = dict(tolerance(dtype), **(loose or {}))
    for _ in range(2):  # the second run replays the recorded plan
        got = session.run(None, feeds)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == np.dtype(dtype)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **tol)


CONV_CASES = {
    "1d": ({"x": (2, 3, 11), "w": (8, 3, 3), "b": (8,)}, {"pads": [1, 2], "strides": [2]}),
    "2d_gemm_partial_tiles": ({"x": (1, 5, 13, 11), "w": (20, 5, 3, 3), "b": (20,)}, {"pads": [1, 1, 1, 1]}),
    "2d_no_bias_dilated": ({"x": (2, 4, 12, 10), "w": (16, 4, 3, 2)}, {"dilations": [2, 3], "strides": [1, 2]}),
    "2d_pointwise": ({"x": (2, 12, 7, 9), "w": (24, 12, 1, 1), "b": (24,)}, {}),
    "2d_pointwise_strided": ({"x": (1, 12, 7, 9), "w": (24, 12, 1, 1)}, {"strides": [2, 2]}),
    "2d_group": ({"x": (1, 32, 9, 9), "w": (32, 8, 3, 3), "b": (32,)}, {"group": 4, "pads": [0, 1, 2, 1]}),
    "2d_depthwise": ({"x": (2, 16, 10, 9), "w": (16, 1, 3, 3), "b": (16,)}, {"group": 16, "pads": [1, 1, 1, 1]}),
    "2d_depthwise_multiplier": ({"x": (1, 6, 8, 8), "w": (12, 1, 5, 5)}, {"group": 6, "strides": [2, 2]}),
    "2d_same_upper": ({"x": (1, 8, 10, 9), "w": (8, 8, 4, 3)}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "2d_same_lower": ({"x": (1, 8, 10, 9), "w": (8, 8, 4, 3)}, {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    "2d_valid": ({"x": (1, 8, 10, 9), "w": (8, 8, 3, 3), "b": (8,)}, {"auto_pad": "VALID", "strides": [3, 2]}),
    "2d_kernel_shape_attr": ({"x": (1, 3, 8, 8), "w": (9, 3, 2, 2)}, {"kernel_shape": [2, 2]}),
    "3d": ({"x": (1, 4, 6, 7, 5), "w": (10, 4, 3, 2, 3), "b": (10,)},
           {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 1], "dilations": [2, 1, 1]}),
    "resnet_stem": ({"x": (1, 3, 64, 64), "w": (64, 3, 7, 7), "b": (64,)}, {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv(ep_devices, case, dtype):
    inputs, attrs = CONV_CASES[case]
    check("Conv", inputs, dtype=dtype, **attrs)


@pytest.mark.parametrize("opset", [1, 11])
def test_conv_older_opsets(ep_devices, opset):
    check("Conv", {"x": (1, 4, 6, 6), "w": (8, 4, 3, 3), "b": (8,)}, opset=opset, pads=[1, 1, 1, 1])


def test_conv_large_reduction(ep_devices):
    """K = 2304 products summed in float32 in another order than the CPU EP's: the rounding differences
    grow with sqrt(K) (about 1e-5 here), hence atol 1e-4."""
    check("Conv", {"x": (1, 256, 7, 7), "w": (64, 256, 3, 3)}, pads=[1, 1, 1, 1], loose={"atol": 1e-4})


CONV_TRANSPOSE_CASES = {
    "1d": ({"x": (2, 3, 7), "w": (3, 4, 3), "b": (4,)}, {"strides": [2]}),
    "2d_pads_output_padding": ({"x": (1, 4, 5, 4), "w": (4, 3, 3, 3), "b": (3,)},
                               {"strides": [2, 3], "pads": [1, 0, 0, 1], "output_padding": [1, 2]}),
    "2d_output_shape_odd_total": ({"x": (1, 2, 4, 4), "w": (2, 3, 3, 3)}, {"strides": [2, 2], "output_shape": [8, 8]}),
    "2d_output_shape_same_upper": ({"x": (1, 2, 4, 4), "w": (2, 3, 3, 3)},
                                   {"strides": [2, 2], "output_shape": [8, 8], "auto_pad": "SAME_UPPER"}),
    "2d_same_lower": ({"x": (1, 2, 3, 3), "w": (2, 2, 3, 3)}, {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "2d_valid": ({"x": (1, 2, 3, 3), "w": (2, 2, 3, 3)}, {"strides": [2, 1], "auto_pad": "VALID"}),
    "2d_group_dilations": ({"x": (2, 6, 4, 5), "w": (6, 2, 3, 2), "b": (6,)}, {"group": 3, "dilations": [2, 2]}),
    "3d": ({"x": (1, 2, 3, 4, 3), "w": (2, 3, 2, 3, 2), "b": (3,)}, {"strides": [2, 1, 2]}),
    # (float32, one group: the columns W^T x X and col2im.comp; Kokoro-82M's 1-D upsamplers had kernel 2 x stride)
    "1d_upsampler": ({"x": (1, 64, 30), "w": (64, 32, 20), "b": (32,)}, {"strides": [10], "pads": [5, 5]}),
    "2d_batch_dilations": ({"x": (2, 3, 5, 4), "w": (3, 2, 3, 2), "b": (2,)},
                           {"strides": [2, 2], "dilations": [2, 1], "output_padding": [1, 0], "pads": [1, 0, 0, 1]}),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", list(CONV_TRANSPOSE_CASES))
def test_conv_transpose(ep_devices, case, dtype):
    inputs, attrs = CONV_TRANSPOSE_CASES[case]
    check("ConvTranspose", inputs, dtype=dtype, **attrs)


def _backend_cases():
    for case in collect_testcases(None):
        nodes = case.model.graph.node
        if len(nodes) == 1 and nodes[0].op_type in FAMILY:
            yield pytest.param(case, id=case.name)


@pytest.mark.parametrize("case", list(_backend_cases()))
def test_onnx_backend_node(ep_devices, case):
    """The ONNX backend node tests of the conv/pool family, on vkep only (no CPU fallback)."""
    session = runner.vkep_session(case.model, disable_cpu_fallback=True)
    names = [vi.name for vi in case.model.graph.input]
    for inputs, outputs in case.data_sets:
        got = session.run(None, dict(zip(names, inputs, strict=True)))
        for g, w in zip(got, outputs, strict=True):
            tol = tolerance(w.dtype)
            np.testing.assert_allclose(g, w, rtol=max(tol["rtol"], case.rtol), atol=max(tol["atol"], case.atol))


def test_conv_with_many_input_channels_past_the_loop_budget(ep_devices):
    """8192 channels x 3x3 taps per output: more than lavapipe's 65,535 loop iterations unless the taps
    are unrolled (they are); a sum silently cut short would differ from the CPU EP."""
    check("Conv", {"x": (1, 8192, 4, 4), "w": (2, 8192, 3, 3)}, loose={"rtol": 1e-3, "atol": 1e-3})


@pytest.mark.parametrize(("channels", "where"), [(19_999, "VulkanExecutionProvider"), (20_000, "CPUExecutionProvider"),
                                               (29_999, "CPUExecutionProvider")])
def test_conv_gemm_mode_within_lavapipes_loop_count(ep_devices, channels, where):
    """conv.comp's MODE_GEMM (here: two groups, a 1x1 kernel of stride 2) loops over a group's channels and each
    channel's taps, whose loop costs taps + 1 steps as lavapipe counts them: 3 a channel here, not 2. 19,999
    channels (60,000 steps) run on vkep; 20,000 and 29,999 (which the old count took, and lavapipe cut short: y 0.022
    for 5.03) go to the CPU EP. The decisive channel last in each group; equal to the CPU EP."""
    shapes = {"x": (1, 2 * channels, 1, 1), "w": (16, channels, 1, 1)}
    x, w = np.full(shapes["x"], 1e-3, np.float32), np.full(shapes["w"], 1e-3, np.float32)
    x[0, channels - 1], x[0, -1], w[:, -1] = 1.0, 1.0, 5.0
    model = single_node("Conv", shapes, 22, group=2, strides=[2, 2])
    session = runner.vkep_session(model)
    np.testing.assert_allclose(session.run(None, {"x": x, "w": w})[0],
                               runner.cpu_session(model).run(None, {"x": x, "w": w})[0], rtol=1e-5)
    assert {ep for _, _, ep in runner.placement(session)} == {where}


@pytest.mark.parametrize(("taps", "where"), [(19_998, "VulkanExecutionProvider"), (19_999, "CPUExecutionProvider"),
                                           (29_998, "CPUExecutionProvider")])
def test_conv_transpose_taps_within_lavapipes_loop_count(ep_devices, taps, where):
    """conv_transpose.comp's taps loops and channel loop each cost a leaving pass as lavapipe counts them: a tap of
    one channel 3 steps, not 2. Two groups of one channel (conv_transpose.comp), a 1 x taps kernel whose every tap
    lands on the input (pads taps - 1: one output each): 19,998 taps (59,999 steps) run on vkep; 19,999 and 29,998
    (which the old count took, and lavapipe cut short: y 0.022 for 5.03) go to the CPU EP. The decisive tap last."""
    shapes = {"x": (1, 2, 1, taps), "w": (2, 1, 1, taps)}
    x, w = np.full(shapes["x"], 1e-3, np.float32), np.full(shapes["w"], 1e-3, np.float32)
    x[0, :, 0, 0], w[:, :, 0, -1] = 1.0, 5.0  # (the last tap reads the first input)
    model = single_node("ConvTranspose", shapes, 22, group=2, pads=[0, taps - 1, 0, taps - 1])
    session = runner.vkep_session(model)
    np.testing.assert_allclose(session.run(None, {"x": x, "w": w})[0],
                               runner.cpu_session(model).run(None, {"x": x, "w": w})[0], rtol=1e-5)
    assert {ep for _, _, ep in runner.placement(session)} == {where}


def test_conv_transpose_past_the_loop_budget(ep_devices):
    """Shapes the graph declares: the node is declined at GetCapability (planned dry) and runs on the CPU EP.
    Shapes known only at run time: the run fails with a clear error."""
    x, w = np.ones((1, 8192, 2, 2), np.float32), np.ones((8192, 1, 3, 3), np.float32)
    declared = single_node("ConvTranspose", {"x": x.shape, "w": w.shape}, 22)
    session = runner.vkep_session(declared)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    np.testing.assert_allclose(session.run(None, {"x": x, "w": w})[0],
                               runner.cpu_session(declared).run(None, {"x": x, "w": w})[0], rtol=1e-5)
    free = single_node("ConvTranspose", {"x": ("n", 8192, "h", "w"), "w": w.shape}, 22)
    session = runner.vkep_session(free, disable_cpu_fallback=True)
    with pytest.raises(Exception, match="ConvTranspose: 8192 input channels x \\[3, 3\\] taps exceed"):
        session.run(None, {"x": x, "w": w})


def conv_with_constant_weights(inputs: dict[str, tuple], dtype: str, **attrs) -> tuple:
    """A Conv whose weight (and bias) are initializers, so that vkep packs them (Winograd's U = G g G^T), and
    its float32 twin over the same (rounded) values, and the input feed."""
    rng = np.random.default_rng(0)
    values = {n: rng.uniform(-1, 1, s).astype(dtype) for n, s in inputs.items()}

    def model(elem_type: str):
        node = helper.make_node("Conv", list(inputs), ["y"], **attrs)
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(elem_type))
        inits = [numpy_helper.from_array(values[n].astype(elem_type), n) for n in list(inputs)[1:]]
        graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", elem, inputs["x"])],
                                  [helper.make_tensor_value_info("y", elem, None)], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)

    return model(dtype), model("float32"), values["x"]


def kernels() -> dict:
    """vkep's live kernels by id (the plugin's module: importable once ORT has loaded vkep)."""
    from vkep.ort.kernel import KERNELS

    return KERNELS


def conv_kernels_since(first_id: int) -> list:
    return [k for i, k in list(kernels().items()) if i > first_id and k.spec.op == "Conv"]


def check_winograd(inputs: dict[str, tuple], dtype: str = "float32", tile: int = winograd.TILE,
                   loose: dict | None = None, **attrs) -> None:
    """The conv on vkep against the CPU EP, and proof that it ran as Winograd F(tile x tile, 3x3): the weight was
    packed transformed and every dispatch of the node went to winograd.comp."""
    model, reference, x = conv_with_constant_weights(inputs, dtype, **attrs)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(reference).run(None, {"x": x.astype(np.float32)})[0]
    tol = dict(tolerance(dtype), **(loose or {}))
    for _ in range(2):
        got = session.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tol)
    (conv,) = conv_kernels_since(first)
    assert conv.impl.winograd_tile == tile
    assert {shader for shader, _, _ in conv.pipelines} == {"winograd.comp"}


WINOGRAD_CASES = {
    # odd output sizes (partial tiles), channels that are multiples of neither 4 nor the GEMM's 32 (nor 8)
    "odd_sizes_pad1_bias": ({"x": (1, 9, 13, 11), "w": (33, 9, 3, 3), "b": (33,)}, {"pads": [1, 1, 1, 1]}),
    "pad0_batch2_no_bias": ({"x": (2, 12, 9, 10), "w": (40, 12, 3, 3)}, {}),
    "asymmetric_pads": ({"x": (1, 10, 7, 12), "w": (32, 10, 3, 3), "b": (32,)}, {"pads": [0, 2, 1, 0]}),
    "same_upper_batch3": ({"x": (3, 16, 6, 5), "w": (48, 16, 3, 3), "b": (48,)},
                          {"auto_pad": "SAME_UPPER", "kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1]}),
    "one_pixel": ({"x": (1, 8, 1, 1), "w": (32, 8, 3, 3), "b": (32,)}, {"pads": [1, 1, 1, 1]}),
    "few_channels": ({"x": (1, 8, 10, 9), "w": (11, 8, 3, 3), "b": (11,)}, {"pads": [1, 1, 1, 1]}),
    "resnet_layer": ({"x": (1, 64, 14, 14), "w": (64, 64, 3, 3), "b": (64,)}, {"pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", list(WINOGRAD_CASES))
def test_conv_winograd(ep_devices, case, dtype):
    inputs, attrs = WINOGRAD_CASES[case]
    check_winograd(inputs, dtype, **attrs)


def test_conv_winograd_in_several_passes(ep_devices, monkeypatch):
    """An output with more tiles than one pass's scratch memory holds runs as several passes over the tiles."""
    monkeypatch.setattr(winograd, "SCRATCH_BYTES", 16 * 4 * (12 + 32) * 16)  # 16 tiles a pass: 7 passes here
    check_winograd({"x": (2, 10, 9, 13), "w": (32, 10, 3, 3), "b": (32,)}, pads=[1, 0, 1, 1])


def test_conv_winograd_f4x4(ep_devices, monkeypatch):
    """F(4x4, 3x3), measured and left unused by default (winograd.TILE says why): its rounding error is about
    ten times the implicit GEMM's, hence the looser tolerance."""
    monkeypatch.setattr(winograd, "TILE", 4)
    check_winograd({"x": (2, 12, 11, 9), "w": (36, 12, 3, 3), "b": (36,)}, tile=4, loose={"atol": 1e-4},
                   pads=[1, 2, 0, 1])


@pytest.mark.parametrize("case", [
    ({"x": (1, 4, 9, 9), "w": (64, 4, 3, 3)}, {"pads": [1, 1, 1, 1]}),  # too few input channels
    ({"x": (1, 64, 9, 9), "w": (4, 64, 3, 3)}, {"pads": [1, 1, 1, 1]}),  # too few output channels
    ({"x": (1, 32, 9, 9), "w": (32, 32, 3, 3)}, {"strides": [2, 2]}),
    ({"x": (1, 32, 9, 9), "w": (32, 32, 3, 3)}, {"dilations": [2, 2]}),
    ({"x": (1, 32, 9, 9), "w": (32, 16, 3, 3)}, {"group": 2}),
    ({"x": (1, 32, 9, 9), "w": (32, 32, 5, 5)}, {}),
], ids=["few_inputs", "few_outputs", "strided", "dilated", "grouped", "5x5"])
def test_conv_outside_winograd_takes_the_implicit_gemm(ep_devices, case):
    inputs, attrs = case
    model, reference, x = conv_with_constant_weights(inputs, "float32", **attrs)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], runner.cpu_session(reference).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)
    (conv,) = conv_kernels_since(first)
    assert conv.impl.winograd_tile == 0 and {shader for shader, _, _ in conv.pipelines} == {"conv.comp"}


def test_conv_winograd_replays_natively(ep_devices):
    """Winograd takes scratch memory (V and Y'); between two vkep nodes its plan replays in C, taking the
    scratch chunks from the outputs' allocator (VKEP_IO_SCRATCH). Two convs of the same sizes in a row reuse
    each other's chunks within a run, so wrong ordering or addressing shows in the values, run after run."""
    import vkep

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.uniform(-0.2, 0.2, (16, 16, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, 16).astype(np.float32), "b")
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Conv", ["r", "w", "b"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c1", "w", "b"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c2"], ["y"])]
    graph = helper.make_graph(nodes, "two_winograd", [helper.make_tensor_value_info("x", 1, (2, 16, 10, 9))],
                              [helper.make_tensor_value_info("y", 1, None)], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    first = max(kernels(), default=0)
    # (node by node: with fuse=1 the Sigmoid is the second conv's epilogue, tests/test_epilogue.py)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})
    reference = runner.cpu_session(model)
    assert all(conv.impl.winograd_tile for conv in conv_kernels_since(first))
    for run in range(4):
        x = rng.standard_normal((2, 16, 10, 9)).astype(np.float32)
        vkep.reset_stats()
        got = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, reference.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
        process = vkep.stats()["process"]
        if run:  # the feed's reader enters Python; the convs and the output's producer replay
            assert process["nodes_replayed_natively"] == 3 and process["nodes_with_scratch"] == 0, process


BROADCAST_CONV_CASES = {
    # (inputs, attributes, where it runs: matmul.comp for 1x1 stride-1 convs over an even pixel count, else
    # conv.comp)
    "pointwise_pairs": ({"x": (2, 24, 6, 8), "w": (40, 24, 1, 1), "b": (40,)}, {}, "matmul.comp"),
    "pointwise_odd_pixels": ({"x": (1, 33, 7, 7), "w": (70, 33, 1, 1), "b": (70,)}, {}, "conv.comp"),
    "pointwise_no_bias": ({"x": (1, 16, 9, 10), "w": (9, 16, 1, 1)}, {}, "matmul.comp"),
    "pointwise_stride2": ({"x": (2, 20, 9, 11), "w": (36, 20, 1, 1), "b": (36,)}, {"strides": [2, 2]},
                          "conv.comp"),
    "3x3_stride2_pads": ({"x": (1, 12, 13, 11), "w": (40, 12, 3, 3), "b": (40,)},
                         {"strides": [2, 2], "pads": [1, 0, 1, 2]}, "conv.comp"),
    "7x7_stem": ({"x": (1, 3, 30, 28), "w": (16, 3, 7, 7), "b": (16,)}, {"strides": [2, 2], "pads": [3, 3, 3, 3]},
                 "conv.comp"),  # K = 147: odd, W read element by element
    "5x5_dilated": ({"x": (2, 8, 12, 12), "w": (33, 8, 5, 5)}, {"dilations": [2, 1], "pads": [2, 2, 2, 2]},
                    "conv.comp"),
    "1d": ({"x": (2, 10, 30), "w": (24, 10, 3), "b": (24,)}, {"strides": [2], "pads": [1, 1]}, "conv.comp"),
    "3x3_few_input_channels": ({"x": (1, 4, 9, 9), "w": (64, 4, 3, 3)}, {"pads": [1, 1, 1, 1]}, "conv.comp"),
    # at least conv.IM2COL_MIN_OUTPUTS outputs over an even pixel count: im2col.comp, then matmul.comp's GEMM
    "pointwise_stride2_im2col": ({"x": (2, 20, 9, 11), "w": (130, 20, 1, 1), "b": (130,)}, {"strides": [2, 2]},
                                 "im2col.comp"),
    "3x3_stride2_pads_im2col": ({"x": (1, 24, 13, 11), "w": (128, 24, 3, 3), "b": (128,)},
                                {"strides": [2, 2], "pads": [1, 0, 1, 2]}, "im2col.comp"),
    "7x7_stem_im2col": ({"x": (1, 3, 30, 28), "w": (128, 3, 7, 7), "b": (128,)},
                        {"strides": [2, 2], "pads": [3, 3, 3, 3]}, "im2col.comp"),  # K = 147: a zero row
    "5x5_dilated_im2col": ({"x": (2, 8, 12, 12), "w": (128, 8, 5, 5)}, {"dilations": [2, 1], "pads": [2, 2, 2, 2]},
                           "im2col.comp"),
    "1d_im2col": ({"x": (2, 10, 31), "w": (128, 10, 3), "b": (128,)}, {"strides": [2], "pads": [1, 1]},
                  "im2col.comp"),
    # ... and over an odd one (resnet50's 7x7 maps): im2col's rows padded to an even pitch with a zero column
    "pointwise_odd_pixels_im2col": ({"x": (1, 33, 7, 7), "w": (130, 33, 1, 1), "b": (130,)}, {}, "im2col.comp"),
    "3x3_stride2_odd_pixels_im2col": ({"x": (2, 24, 13, 13), "w": (128, 24, 3, 3), "b": (128,)},
                                      {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "im2col.comp"),
    "1d_odd_pixels_im2col": ({"x": (3, 10, 29), "w": (136, 10, 3)}, {"strides": [2], "pads": [1, 1]},
                             "im2col.comp"),
}


def _modes(kernel) -> set[tuple[str, int | None]]:
    return {(shader, dict(constants).get("mode")) for shader, _, constants in kernel.pipelines}


@pytest.mark.parametrize("weights", ["constant", "input"])
@pytest.mark.parametrize("case", list(BROADCAST_CONV_CASES))
def test_conv_broadcast_gemm(ep_devices, case, weights):
    """Convs outside Winograd on a CPU device with 8-wide subgroups, float32, run as the broadcast GEMMs
    (matmul.comp's mode 3 for 1x1 stride-1 convs over an even pixel count; with many outputs im2col.comp, then
    that GEMM; conv.comp's MODE 3 else) and agree with the CPU EP; elsewhere
    they take conv.comp's other modes. Weights as initializers (packed raw) and as graph inputs."""
    from vkep.kernels import conv as conv_kernels
    from vkep.kernels import matmul

    inputs, attrs, shader = BROADCAST_CONV_CASES[case]
    model, reference, x = conv_with_constant_weights(inputs, "float32", **attrs)
    feeds = {"x": x}
    if weights == "input":
        model = single_node("Conv", inputs, 22, **attrs)
        rng = np.random.default_rng(5)
        feeds = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in inputs.items()}
        reference = model
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(reference).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-4)
    (conv,) = conv_kernels_since(first)
    info = conv.impl.device_info  # (the device's properties, not the planner's answer)
    if info.device_type == "cpu" and info.subgroup_size == 8:
        mode = matmul.MODE_BROADCAST if shader == "matmul.comp" else conv_kernels.MODE_BROADCAST
        if shader == "im2col.comp":
            assert _modes(conv) == {("im2col.comp", None), ("matmul.comp", matmul.MODE_BROADCAST)}
            # (the patches read in pairs along the pixels, odd counts too)
            assert {dict(c)["b_pairs"] for s, _, c in conv.pipelines if s == "matmul.comp"} == {1}
        else:
            assert _modes(conv) == {(shader, mode)}
        k = math.prod(inputs["w"][1:])
        if shader in ("conv.comp", "im2col.comp"):  # W read in pairs: K even, or a constant non-1x1 W packed with an odd K padded
            padded = weights == "constant" and k % 2 == 1 and math.prod(inputs["w"][2:]) > 1
            assert conv.impl.weight_row == (k + 1 if padded else 0)
            if shader == "conv.comp":
                assert {dict(c)["a_pairs"] for _, _, c in conv.pipelines} == {int(padded or k % 2 == 0)}
    else:
        assert {s for s, _ in _modes(conv)} == {"conv.comp"} and conv_kernels.MODE_BROADCAST not in {
            m for _, m in _modes(conv)}


def test_conv_broadcast_gemm_not_for_float16(ep_devices):
    """float16 convs keep conv.comp's GEMM (the broadcast GEMMs read float32 in 64-bit pairs)."""
    from vkep.kernels import conv as conv_kernels

    model, reference, x = conv_with_constant_weights({"x": (1, 16, 9, 9), "w": (32, 16, 1, 1)}, "float16")
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(reference).run(None, {"x": x.astype(np.float32)})[0]
    np.testing.assert_allclose(session.run(None, {"x": x})[0].astype(np.float32), want, **tolerance("float16"))
    (conv,) = conv_kernels_since(first)
    assert _modes(conv) == {("conv.comp", conv_kernels.MODE_POINTWISE)}


def test_broadcast_gemms_replay_natively(ep_devices):
    """Convs on the broadcast GEMMs (matmul.comp's and conv.comp's) and a MatMul in matmul.comp's broadcast mode
    take no scratch memory: after the first run the C trampoline records them alone."""
    import vkep

    rng = np.random.default_rng(6)

    def init(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    nodes = [helper.make_node("Relu", ["x"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"]),  # 1x1: matmul.comp
             helper.make_node("Conv", ["c1", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),  # conv.comp
             helper.make_node("MatMul", ["c2", "w3"], ["m3"]),  # [1, 40, 20, 20] x [20, 6]: 40 x 20 rows
             helper.make_node("Relu", ["m3"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", 1, (1, 16, 40, 40))],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [init("w1", (32, 16, 1, 1)), init("b1", (32,)), init("w2", (40, 32, 3, 3)),
                               init("w3", (20, 6))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    feeds = {"x": rng.uniform(-1, 1, (1, 16, 40, 40)).astype(np.float32)}
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, feeds)[0]
    session.run(None, feeds)
    before = vkep.stats()["process"]["nodes_replayed_natively"]
    for _ in range(3):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-4)
    replayed = vkep.stats()["process"]["nodes_replayed_natively"] - before
    # (the first and last node of a run enter Python, see test_models.test_add_chain_replays_natively)
    assert replayed >= 3 * (len(nodes) - 2), replayed
    made = [k for i, k in list(kernels().items()) if i > first]
    info = made[0].impl.device_info
    if info.device_type == "cpu" and info.subgroup_size == 8:
        assert {(s, dict(c)["mode"]) for k in made for s, _, c in k.pipelines if s in ("matmul.comp", "conv.comp")} == {
            ("matmul.comp", 3), ("conv.comp", 3)}


def test_im2col_zero_row_keeps_inf_out(ep_devices):
    """A 7x7 stem on 3 channels has K = 147: pack pads W's rows with a zero column and im2col.comp writes the
    matching row of zeros. Were that row to hold real input values, 0 x inf would turn an output the CPU EP
    computes as ±inf into NaN."""
    from vkep.kernels import conv as conv_kernels

    inputs = {"x": (1, 3, 30, 28), "w": (128, 3, 7, 7), "b": (128,)}
    attrs = {"strides": [2, 2], "pads": [3, 3, 3, 3]}
    model, reference, x = conv_with_constant_weights(inputs, "float32", **attrs)
    x = x.copy()
    x[0, 2, 11, 13] = np.inf  # (odd: where the 7x7 window's first tap lands, with pad 3 and stride 2)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    got, want = session.run(None, {"x": x})[0], runner.cpu_session(reference).run(None, {"x": x})[0]
    assert np.isinf(want).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    (conv,) = conv_kernels_since(first)
    info = conv.impl.device_info
    if info.device_type == "cpu" and info.subgroup_size == 8:
        assert ("im2col.comp", None) in _modes(conv) and conv.impl.weight_row == 148
    assert conv_kernels.IM2COL_MIN_OUTPUTS <= 128


@pytest.mark.parametrize("inputs,attrs", [
    ({"x": (1, 8, 8200), "w": (16, 8, 3), "b": (16,)}, {"dilations": [4096]}),  # (a 1-D EEG model's dilation)
    ({"x": (1, 8, 8200), "w": (4, 8, 3)}, {"dilations": [4096]}),               # the direct mode's
    ({"x": (1, 4, 3000, 5), "w": (16, 4, 2, 3)}, {"dilations": [2500, 1], "strides": [1, 2]}),
    ({"x": (1, 4, 6, 5000), "w": (16, 4, 1, 2)}, {"strides": [1, 3000]})])
def test_conv_dilations_and_strides_past_1024(ep_devices, inputs, attrs):
    """Heights' and widths' strides and dilations up to 16383 (conv.comp's packed push constants: conv.py's
    PACKED_HW), on vkep and equal to the CPU EP."""
    model, reference, x = conv_with_constant_weights(inputs, "float32", **attrs)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_allclose(session.run(None, {"x": x})[0], runner.cpu_session(reference).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [
    # (channels, size, kernel, stride, dilation, pad, multiplier, dims, relu, dtype, channels a group)
    (16, 14, 3, 1, 1, 1, 1, 2, False, np.float32, 1), (16, 15, 3, 2, 1, 1, 1, 2, True, np.float32, 1),
    (8, 13, 5, 1, 2, 4, 1, 2, False, np.float32, 1), (8, 9, 3, 1, 1, 0, 2, 2, True, np.float32, 1),
    (4, 21, 3, 1, 1, 1, 1, 1, False, np.float32, 1), (4, 7, 3, 1, 1, 1, 1, 3, True, np.float32, 1),
    (16, 14, 3, 1, 1, 1, 1, 2, True, np.float16, 1), (6, 10, 3, 1, 1, 1, 3, 2, False, np.float32, 2),
    (16, 6, 7, 1, 1, 3, 1, 2, False, np.float32, 1)], ids=str)
def test_depthwise_runs_of_a_row_sum_as_one_output_a_thread(ep_devices, monkeypatch, case):
    """conv.comp's MODE 4 (DIRECT_RUN outputs of a row a thread, the input row's window loaded once where stride and
    dilation are 1) gives MODE 2's values bit for bit (one output a thread, the same order of sums): depthwise and
    few-channel groups, strides, dilations, pads, 1-D to 3-D, a fused Relu (the epilogue's block ends at the row),
    float16; and both within float noise of the CPU EP."""
    from vkep.kernels import conv

    channels, size, k, stride, dilation, pad, mult, dims, relu, dtype, cg = case
    shape = [2, channels * cg] + [size] * dims
    rng = np.random.default_rng(1)
    w = rng.standard_normal([channels * mult, cg] + [k] * dims).astype(dtype)
    b = rng.standard_normal([channels * mult]).astype(dtype)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if relu else "y"], group=channels, strides=[stride] * dims,
                              dilations=[dilation] * dims, pads=[pad] * 2 * dims, kernel_shape=[k] * dims)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, "depthwise", [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal(shape).astype(dtype)
    runs = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    monkeypatch.setattr(conv, "DIRECT_RUN", 1 << 30)  # (no row is that long: MODE 2)
    one = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    np.testing.assert_array_equal(runs, one)
    if dtype == np.float32:
        np.testing.assert_allclose(runs, runner.cpu_session(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
