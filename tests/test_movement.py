"""Data movement and shape ops: the ONNX backend node cases of these ops, and targeted cases (negative
steps and axes, clamping, empty tensors, many inputs, duplicate scatter indices) against ORT's CPU EP."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from conftest import tolerance
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

OPS = {"Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "ScatterND",
       "ScatterElements", "Expand", "Tile", "Pad", "DepthToSpace", "SpaceToDepth", "Trilu", "Range", "Shape", "Size",
       "Resize"}
# where vkep follows ORT's CPU EP rather than the ONNX reference, or cannot run the case yet
KNOWN = {
    # ORT (and vkep) use the rounded output length in align_corners; ONNX's reference uses input * scale
    "test_resize_downsample_scales_linear_align_corners": "ORT's CPU EP differs from the ONNX reference too",
    "test_resize_downsample_scales_cubic_align_corners": "ORT's CPU EP differs from the ONNX reference too",
}
ORT_MAX_OPSET, ORT_MAX_IR = 26, 13


def _backend_cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        cases = collect_testcases()
    for case in cases:
        nodes = case.model.graph.node
        if len(nodes) == 1 and nodes[0].op_type in OPS:
            marks = [pytest.mark.xfail(reason=KNOWN[case.name], strict=True)] if case.name in KNOWN else []
            yield pytest.param(case, id=case.name, marks=marks)


def _loadable(case_model):
    """A copy of the case's model as ORT 1.31 loads it: opset and IR version capped, and Shape/Size inputs with
    symbolic dims (a static shape would be folded into a constant). (A copy: collect_testcases hands every caller
    the same model objects, and test_conformance, run later in the same process, saw Range and SpaceToDepth
    capped below the opsets their cases need.)"""
    model = onnx.ModelProto()
    model.CopyFrom(case_model)
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version > ORT_MAX_OPSET:
            imp.version = ORT_MAX_OPSET
            model.ir_version = min(model.ir_version, ORT_MAX_IR)
    if model.graph.node[0].op_type in ("Shape", "Size"):
        for vi in model.graph.input:
            for k, d in enumerate(vi.type.tensor_type.shape.dim):
                d.dim_param = f"d{k}"
    return model


@pytest.mark.parametrize("case", list(_backend_cases()))
def test_onnx_backend_case(ep_devices, case):
    model = _loadable(case.model)
    op = model.graph.node[0].op_type
    try:
        runner.cpu_session(model)
    except Exception as exc:  # noqa: BLE001 - e.g. a bfloat16 case, or a newer schema ORT cannot load
        pytest.skip(f"ORT cannot load the case: {str(exc)[:120]}")
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [(o, ep) for _, o, ep in runner.placement(session)] == [(op, "VulkanExecutionProvider")]
    for inputs, outputs in case.data_sets:
        feeds = {vi.name: np.asarray(x) for vi, x in zip(model.graph.input, inputs, strict=False)}
        for _ in range(2):  # the second run replays the plan where the node has one
            for got, want in zip(session.run(None, feeds), outputs, strict=True):
                want = np.asarray(want)
                assert got.shape == want.shape
                if want.dtype.kind == "f":
                    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
                else:
                    np.testing.assert_array_equal(got, want)


# ---- targeted cases against the CPU EP ------------------------------------------------------------

def _model(op: str, inputs: list, outputs: int = 1, opset: int = 18, inits: dict | None = None, **attrs):
    """One node; `inputs` = [(name, numpy array or (elem type, shape)), ...]; `inits` become initializers."""
    vis, names = [], []
    for name, spec in inputs:
        names.append(name)
        if not name or name in (inits or {}):  # an absent optional input, or an initializer
            continue
        elem, shape = spec
        vis.append(helper.make_tensor_value_info(name, elem, shape))
    outs = [f"y{j}" for j in range(outputs)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph([node], op, vis, [helper.make_empty_tensor_value_info(o) for o in outs],
                              initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _check(model, feeds: dict, op: str | None = None) -> list:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    if op:
        assert (op, "VulkanExecutionProvider") in [(o, ep) for _, o, ep in runner.placement(session)]
    want = runner.cpu_session(model).run(None, feeds)
    for _ in range(2):
        got = session.run(None, feeds)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **tolerance(w.dtype))
    return got


F = TensorProto.FLOAT
I64 = TensorProto.INT64
RNG = np.random.default_rng(7)


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([-1, 0], [-100, 10], [1, 2], [-1, 3]),         # negative step to before the start, clamped end
    ([2**62], [-2**62], [0], [-2]),                 # huge values clamp
    ([5], [2], [-1], [1]),                          # empty result
    ([1, 1, 1], [3, -1, 4], [-3, -2, -1], [1, 1, 2]),
])
def test_slice_clamping(ep_devices, starts, ends, axes, steps):
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    inits = {k: np.array(v, np.int64) for k, v in zip(("s", "e", "a", "p"), (starts, ends, axes, steps), strict=True)}
    model = _model("Slice", [("x", (F, x.shape)), ("s", 0), ("e", 0), ("a", 0), ("p", 0)], inits=inits)
    _check(model, {"x": x}, "Slice")


def test_fast_division_is_exact_for_every_32_bit_dividend():
    """common.glsl's fast_div (strided_copy.comp's index math) in the shader's 32-bit arithmetic, with the host's
    (magic, shift): n // d for divisors of every size and dividends at the edges (0, multiples and their
    neighbours, 2^32 - 1) and at random."""
    from vkep.kernels.base import fast_divisor

    def fast_div(n: int, d: int) -> int:
        magic, shift = fast_divisor(d)
        hi = (n * magic) >> 32
        return n if d == 1 else ((hi + ((n - hi) >> 1)) & 0xFFFFFFFF) >> shift

    rng = np.random.default_rng(5)
    top = (1 << 32) - 1
    divisors = [1, 2, 3, 5, 7, 56, 641, 3136, 6700417, 1 << 31, (1 << 31) + 1, top - 1, top,
                *rng.integers(2, 1 << 32, 300).tolist(), *rng.integers(2, 5000, 300).tolist()]
    for d in divisors:
        magic, _ = fast_divisor(d)
        assert 0 <= magic < 1 << 32
        edges = [0, 1, d - 1, d, d + 1, top, top - top % d, top - top % d - 1, *rng.integers(0, 1 << 32, 50).tolist()]
        for n in edges:
            assert fast_div(n, d) == n // d, (n, d)


def test_transpose_rank6_int8(ep_devices):
    x = RNG.integers(-100, 100, (2, 3, 1, 4, 2, 3)).astype(np.int8)
    model = _model("Transpose", [("x", (TensorProto.INT8, x.shape))], perm=[5, 3, 1, 0, 2, 4])
    _check(model, {"x": x}, "Transpose")


def test_concat_many_inputs_and_empty(ep_devices):
    """11 inputs (two dispatches of concat.comp), one of them empty along the axis, negative axis."""
    xs = {f"x{j}": RNG.standard_normal((2, j % 4, 3)).astype(np.float16) for j in range(11)}
    model = _model("Concat", [(k, (TensorProto.FLOAT16, v.shape)) for k, v in xs.items()], axis=-2)
    _check(model, xs, "Concat")


@pytest.mark.parametrize("op,count", [("Concat", 28), ("Concat", 64), ("Concat", 256), ("Sum", 25), ("Max", 33)])
def test_nodes_of_more_inputs_than_a_plan_replays(ep_devices, op, count):
    """skl2onnx's PolynomialFeatures (degree 2, 6 features) is a Concat of 28 [N, 1] columns: the trampoline passes
    up to 256 inputs (a plan replays up to 24: these take Python's path every run)."""
    xs = {f"x{j}": RNG.standard_normal((3, 1)).astype(np.float32) for j in range(count)}
    model = _model(op, [(k, (F, v.shape)) for k, v in xs.items()], **({"axis": 1} if op == "Concat" else {}))
    _check(model, xs, op)


def test_a_node_of_more_than_256_inputs_stays_on_the_cpu_ep(ep_devices):
    xs = {f"x{j}": RNG.standard_normal((3, 1)).astype(np.float32) for j in range(257)}
    model = _model("Concat", [(k, (F, v.shape)) for k, v in xs.items()], axis=1)
    assert {ep for _, _, ep in runner.placement(runner.vkep_session(model))} == {"CPUExecutionProvider"}


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_int32_negative_pads(ep_devices, mode):
    x = RNG.integers(-9, 9, (3, 4, 5)).astype(np.int32)
    inits = {"p": np.array([0, 2, -1, 1, 3, 2], np.int64), "v": np.array(7, np.int32)}
    model = _model("Pad", [("x", (TensorProto.INT32, x.shape)), ("p", 0), ("v", 0)], inits=inits, mode=mode)
    _check(model, {"x": x}, "Pad")


@pytest.mark.parametrize("dtype,elem,value", [(np.float32, F, -2.5), (np.float16, TensorProto.FLOAT16, -0.75),
                                              (np.int64, I64, -3), (np.int64, I64, -(2**40) - 5),
                                              (np.int32, TensorProto.INT32, -2**31)])
def test_pad_constant_with_its_sign_bit_set(ep_devices, dtype, elem, value):
    """A constant whose bits have the top bit of a 32-bit word set (negative floats, negative integers): the
    shader's int members carry those words as int32."""
    x = RNG.integers(-9, 9, (2, 3, 4)).astype(dtype)
    inits = {"p": np.array([1, 0, 2, 0, 1, 1], np.int64), "v": np.array(value, dtype)}
    model = _model("Pad", [("x", (elem, x.shape)), ("p", 0), ("v", 0)], inits=inits, mode="constant")
    got = _check(model, {"x": x}, "Pad")
    assert got[0][0, 0, 0] == dtype(value)


@pytest.mark.parametrize("elem", [TensorProto.INT32, TensorProto.INT64])
def test_gather_negative_indices_scalar(ep_devices, elem):
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    idx = np.array(-2, dtype=np.int32 if elem == TensorProto.INT32 else np.int64)
    model = _model("Gather", [("x", (F, x.shape)), ("i", (elem, []))], axis=-1)
    _check(model, {"x": x, "i": idx}, "Gather")


def test_gathernd_batch_dims(ep_devices):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    idx = RNG.integers(-3, 3, (2, 6, 2)).astype(np.int64)
    model = _model("GatherND", [("x", (F, x.shape)), ("i", (I64, idx.shape))], batch_dims=1)
    _check(model, {"x": x, "i": idx}, "GatherND")


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatternd_duplicate_indices(ep_devices, reduction):
    data = RNG.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[1], [-3], [2], [1]], np.int64)  # row 1 three times
    upd = RNG.standard_normal((4, 3)).astype(np.float32)
    model = _model("ScatterND", [("d", (F, data.shape)), ("i", (I64, idx.shape)), ("u", (F, upd.shape))],
                   reduction=reduction)
    _check(model, {"d": data, "i": idx, "u": upd}, "ScatterND")


@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatter_elements_duplicates_int64(ep_devices, reduction):
    data = RNG.integers(-5, 5, (3, 5)).astype(np.int64)
    idx = np.array([[0, -1, 0], [4, 4, 4], [1, 2, 1]], np.int64)
    upd = RNG.integers(-5, 5, (3, 3)).astype(np.int64)
    model = _model("ScatterElements", [("d", (I64, data.shape)), ("i", (I64, idx.shape)), ("u", (I64, upd.shape))],
                   axis=1, reduction=reduction)
    _check(model, {"d": data, "i": idx, "u": upd}, "ScatterElements")


@pytest.mark.parametrize(("op", "rows", "reduction", "free"), [
    ("ScatterElements", 59_994, "none", False), ("ScatterElements", 59_995, "add", False),
    ("ScatterElements", 70_000, "none", False), ("ScatterElements", 102_400, "add", True),
    ("ScatterElements", 409_600, "max", True),
    ("ScatterND", 19_998, "add", False), ("ScatterND", 19_999, "add", False), ("ScatterND", 70_000, "add", False),
    ("ScatterND", 102_400, "min", True)])
def test_scatter_lines_within_lavapipes_loop_count(ep_devices, op, rows, reduction, free):
    """An invocation walks its update line (ScatterElements along the axis) or every row of a reduced ScatterND
    (their K indices each) in order: past lavapipe's loop count, which nothing counted, the last updates were dropped
    (70,000 updates to one element: 0.001 for 7 without a reduction, 32.76 for 76.97 added). Then such nodes were
    declined, and where the length was a free dimension they failed the run (survey 12: a connected-components box
    extractor's ScatterElements over a 320 x 320 map). Now a dispatch takes what the count allows and the next one
    the rest, in order; all indices 0, the decisive update last, equal to the CPU EP, on vkep."""
    upd = np.full((rows,), 1e-3, np.float32)
    upd[-1] = 7.0 if reduction != "min" else -7.0
    data = np.zeros((rows,) if op == "ScatterElements" else (4,), np.float32)
    idx = np.zeros((rows,) if op == "ScatterElements" else (rows, 1), np.int64)
    dims = {"d": ["n"] if op == "ScatterElements" else [4], "i": ["n"] if op == "ScatterElements" else ["n", 1],
            "u": ["n"]}
    shapes = {k: (dims[k] if free else v.shape) for k, v in (("d", data), ("i", idx), ("u", upd))}
    model = _model(op, [("d", (F, shapes["d"])), ("i", (I64, shapes["i"])), ("u", (F, shapes["u"]))],
                   reduction=reduction)
    session, feeds = runner.vkep_session(model, disable_cpu_fallback=True), {"d": data, "i": idx, "u": upd}
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}


F64_SCATTERED = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-310, 5e-324, 1e300, -1e300, 1e-300]


@pytest.mark.parametrize("op,opset,reduction", [("Scatter", 9, None), ("ScatterElements", 11, None),
                                                ("ScatterElements", 16, "none"), ("ScatterElements", 16, "add"),
                                                ("ScatterElements", 16, "mul"), ("ScatterElements", 18, "max"),
                                                ("ScatterElements", 18, "min")])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_float64_scatter_elements_equals_the_cpu_ep(ep_devices, op, opset, reduction, axis):
    """float64 ScatterElements (and Scatter): moved as int64 without a reduction; add, mul, max and min in double
    (scatter.comp's FLOAT64 variant) in the updates' order, max and min as the CPU EP: the update unless the value
    there is greater (less), so a NaN update is taken, a NaN there replaced and a tie of zeros gives the update's.
    Bit for bit, with repeated and negative indices (int32 and int64), NaN, infinities, -0, subnormals and products
    past the range."""
    from test_norm import assert_bits_equal, float64_outputs

    rng = np.random.default_rng(opset + axis)
    data = rng.normal(0, 4, (4, 5, 3))
    shape = list(data.shape)
    shape[axis] = 6  # (more updates than the axis has: targets repeat)
    upd = rng.normal(0, 4, shape)
    for t in (data, upd):
        t.flat[rng.choice(t.size, t.size // 3, replace=False)] = rng.choice(F64_SCATTERED, t.size // 3)
    length = data.shape[axis]
    attrs = {"axis": axis} | ({"reduction": reduction} if reduction else {})
    for itype in (np.int64, np.int32):
        idx = rng.integers(-length, length, shape).astype(itype)
        got, want = float64_outputs(op, opset, {"d": data, "i": idx, "u": upd}, [("y", TensorProto.DOUBLE)], **attrs)
        assert_bits_equal(got[0], want[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_elements_max_min_with_nan_as_the_cpu_ep(ep_devices, dtype, reduction):
    """ScatterElements' max and min as the CPU EP: the update unless the value there is greater (less), so a NaN
    update is taken and a NaN there replaced, a tie of zeros the update's (GLSL's max and min, which float32 and
    float16 took before, gave 1 for max(1, NaN) and kept 5 through min(5, NaN, 7), where the CPU EP gives NaN, 7)."""
    from test_norm import float64_outputs

    data = np.array([np.nan, 1.0, np.nan, 2.0, 0.0, -0.0, 5.0, np.nan], dtype)
    idx = np.array([0, 1, 2, 3, 4, 5, 6, 6, 7, 7], np.int64)
    upd = np.array([1.0, np.nan, np.nan, 3.0, -0.0, 0.0, np.nan, 7.0, 3.0, np.nan], dtype)
    got, want = float64_outputs("ScatterElements", 18, {"d": data, "i": idx, "u": upd},
                                [("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))], axis=0, reduction=reduction)
    np.testing.assert_array_equal(got[0], want[0])
    numbers = ~np.isnan(want[0])
    assert np.array_equal(np.signbit(got[0][numbers]), np.signbit(want[0][numbers]))


def test_expand_bidirectional_and_tile(ep_devices):
    x = RNG.standard_normal((3, 1, 4)).astype(np.float32)
    model = _model("Expand", [("x", (F, x.shape)), ("s", 0)], inits={"s": np.array([2, 1, 5, 1], np.int64)})
    _check(model, {"x": x}, "Expand")
    b = RNG.integers(0, 2, (2, 3, 1)).astype(bool)
    model = _model("Tile", [("x", (TensorProto.BOOL, b.shape)), ("r", 0)],
                   inits={"r": np.array([3, 1, 4], np.int64)})
    _check(model, {"x": b}, "Tile")


def test_split_by_input_and_num_outputs(ep_devices):
    x = RNG.standard_normal((7, 2)).astype(np.float32)
    model = _model("Split", [("x", (F, x.shape)), ("s", 0)], outputs=3, inits={"s": np.array([2, 0, 5], np.int64)})
    _check(model, {"x": x}, "Split")
    model = _model("Split", [("x", (F, x.shape))], outputs=4, num_outputs=4)  # parts of 2, 2, 2, 1
    _check(model, {"x": x}, "Split")


def test_depth_space_round_trip(ep_devices):
    x = RNG.standard_normal((2, 12, 3, 5)).astype(np.float32)
    for mode in ("DCR", "CRD"):
        _check(_model("DepthToSpace", [("x", (F, x.shape))], blocksize=2, mode=mode), {"x": x}, "DepthToSpace")
    y = RNG.standard_normal((2, 3, 6, 9)).astype(np.float32)
    _check(_model("SpaceToDepth", [("x", (F, y.shape))], blocksize=3), {"x": y}, "SpaceToDepth")
    for mode in ("DCR", "CRD"):  # (opset 28 names the order)
        _check(_model("SpaceToDepth", [("x", (F, y.shape))], opset=28, blocksize=3, mode=mode), {"x": y}, "SpaceToDepth")


def test_shape_feeds_a_reshape(ep_devices):
    """Shape's CPU output drives a downstream Reshape's CPU input; dims are symbolic so nothing folds."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    z = RNG.standard_normal((6, 4)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0),
             helper.make_node("Reshape", ["z", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["a", "b", "c"]),
                                           helper.make_tensor_value_info("z", F, ["m", "n"])],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    got = _check(model, {"x": x, "z": z}, "Shape")
    assert got[0].shape == (2, 3, 4)


@pytest.mark.parametrize("dtype,elem", [(np.float32, F), (np.int32, TensorProto.INT32), (np.int64, I64)])
def test_range_negative_delta(ep_devices, dtype, elem):
    model = _model("Range", [("a", (elem, [])), ("b", (elem, [])), ("c", (elem, []))])
    feeds = {"a": np.array(10, dtype), "b": np.array(-7, dtype), "c": np.array(-3, dtype)}
    _check(model, feeds, "Range")


def test_float_range_past_one_dispatchs_loop(ep_devices):
    """A float Range sums delta in turn, one invocation's loop (fill.comp MODE 1, as the CPU EP rounds each sum): its
    length is known only at run time, and past LOOP_BUDGET elements the run used to fail; it now takes a dispatch per
    LOOP_BUDGET elements, each from the running value there (summed alike on the host). Bit for bit the CPU EP's,
    at one dispatch's length, one more, and several."""
    from vkep.kernels.base import LOOP_BUDGET

    model = _model("Range", [("a", (F, [])), ("b", (F, [])), ("c", (F, []))])
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    start, delta = np.float32(0.1), np.float32(0.013)  # (every sum rounds)
    for n in (LOOP_BUDGET, LOOP_BUDGET + 1, 2 * LOOP_BUDGET + 7):
        feeds = {"a": np.array(start), "b": np.array(np.float32(start + np.float64(delta) * (n - 0.5))),
                 "c": np.array(delta)}
        got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
        assert got.shape == want.shape == (n,)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode,coord,nearest", [
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_ceil"),
    ("linear", "pytorch_half_pixel", "floor"), ("linear", "align_corners", "floor"), ("cubic", "half_pixel", "floor"),
])
def test_resize_sizes_fp16(ep_devices, mode, coord, nearest):
    x = RNG.standard_normal((1, 2, 5, 7)).astype(np.float32)
    model = _model("Resize", [("x", (F, x.shape)), ("", 0), ("", 0), ("sz", 0)], opset=19,
                   inits={"sz": np.array([1, 2, 9, 4], np.int64)}, mode=mode,
                   coordinate_transformation_mode=coord, nearest_mode=nearest)
    _check(model, {"x": x}, "Resize")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_crop_at_scale_one_follows_onnx(ep_devices, mode):
    """tf_crop_and_resize with a dimension whose scale is 1 still crops it (ONNX's formula, onnx.reference).
    ORT's CPU EP returns its input unchanged when every scale is 1 and ignores the crop of such a dimension
    otherwise, so the fuzzer leaves these cases out and this test holds vkep to ONNX's reference instead."""
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((6, 5)).astype(np.float32)
    for roi, scales in (([0, 0.2, 1, 0.9], [1, 1]), ([0.2, 0.3, 0.7, 0.8], [0.5, 1])):
        model = _model("Resize", [("x", (F, x.shape)), ("roi", 0), ("sc", 0)], opset=19,
                       inits={"roi": np.array(roi, np.float32), "sc": np.array(scales, np.float32)}, mode=mode,
                       coordinate_transformation_mode="tf_crop_and_resize")
        session = runner.vkep_session(model)
        assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,names,inits,attrs", [
    # keep_aspect_ratio_policy rounds half away from zero (2.5 -> 3) as ORT: vkep's numpy round gave 2
    ((2, 8, 5), ["x", "", "", "sz"], {"sz": np.array([2, 4, 14], np.int64)},
     {"mode": "nearest", "nearest_mode": "round_prefer_ceil", "keep_aspect_ratio_policy": "not_larger"}),
    # a source coordinate of exactly 2.0 (half_pixel_symmetric, scale 1.5): fma contraction made it 1.99999
    ((5, 5), ["x", "", "sc"], {"sc": np.array([2.0, 1.5], np.float32)},
     {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric", "nearest_mode": "floor"}),
    ((5, 4), ["x", "", "sc"], {"sc": np.array([1.5, 1.0], np.float32)},
     {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric", "nearest_mode": "floor"}),
    # ORT sums half_pixel_symmetric's coordinate in double: 0.99999994 in float32, 1.0 there
    ((8, 3), ["x", "", "", "sz"], {"sz": np.array([15, 1], np.int64)},
     {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric", "nearest_mode": "floor"}),
])
def test_resize_on_rounding_boundaries_as_the_cpu_ep(ep_devices, shape, names, inits, attrs):
    """Cases the fuzzer found (tests/test_fuzz_math.py): vkep picked another pixel than ORT's CPU EP."""
    x = RNG.standard_normal(shape).astype(np.float32)
    model = _model("Resize", [(n, (F, shape) if n == "x" else 0) for n in names], opset=19, inits=inits, **attrs)
    _check(model, {"x": x}, "Resize")


@pytest.mark.parametrize("opset", [7, 9])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("dtype,elem", [(np.float32, F), (np.uint8, TensorProto.UINT8)])
def test_upsample(ep_devices, opset, mode, dtype, elem):
    """Upsample (opsets 7 and 9, an older YOLO's) as Resize-10's kernel: asymmetric coordinates, nearest
    rounding down, scales an attribute or a CPU input."""
    if dtype == np.uint8 and mode == "linear":
        pytest.skip("8-bit Resize is nearest only (resize.Resize.declines)")
    x = (RNG.standard_normal((2, 3, 5, 4)) * 40 + 100).astype(dtype)
    scales = [1.0, 1.0, 2.0, 3.5]
    if opset == 7:
        model = _model("Upsample", [("x", (elem, x.shape))], opset=7, mode=mode, scales=scales)
    else:
        model = _model("Upsample", [("x", (elem, x.shape)), ("sc", 0)], opset=9, mode=mode,
                       inits={"sc": np.array(scales, np.float32)})
    assert _check(model, {"x": x}, "Upsample")[0].shape == (2, 3, 10, 14)


@pytest.mark.parametrize("opset", [7, 9])
def test_upsample_below_scale_one_fails_as_on_the_cpu_ep(ep_devices, opset):
    """A scale below 1 fails ORT's CPU EP's Upsample when the session is made: vkep's dry run refuses the node,
    so the CPU EP takes it and the session fails the same way."""
    scales = [1.0, 1.0, 0.5, 2.0]
    if opset == 7:
        model = _model("Upsample", [("x", (F, (1, 1, 4, 4)))], opset=7, mode="nearest", scales=scales)
    else:
        model = _model("Upsample", [("x", (F, (1, 1, 4, 4))), ("sc", 0)], opset=9, mode="nearest",
                       inits={"sc": np.array(scales, np.float32)})
    with pytest.raises(Exception, match="Scale value should be greater than or equal to 1"):
        runner.cpu_session(model)
    with pytest.raises(Exception, match="Scale value should be greater than or equal to 1"):
        runner.vkep_session(model)


def test_resize_the_kernel_cannot_plan_is_declined_at_creation(ep_devices):
    """Found by the fuzzer: sizes and keep_aspect_ratio_policy that resize all 5 dims were accepted, then
    the run failed ('interpolates over 5 > 4 dims'). The dry run of GetCapability now reads the constant
    sizes, and the node stays on the CPU EP."""
    x = RNG.standard_normal((1, 2, 1, 8, 1)).astype(np.float32)
    model = _model("Resize", [("x", (F, x.shape)), ("", 0), ("", 0), ("sz", 0)], opset=19,
                   inits={"sz": np.array([2, 3, 2, 13, 2], np.int64)}, mode="nearest",
                   keep_aspect_ratio_policy="not_smaller")
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], want)


@pytest.mark.parametrize("mode,shape,out", [("linear", (1, 1, 4999, 1), (1, 1, 1, 1)),
                                            ("linear", (1, 1, 5000, 1), (1, 1, 1, 1)),
                                            ("linear", (1, 1, 54, 54), (1, 1, 1, 1)),
                                            ("linear", (1, 1, 2048, 2048), (1, 1, 16, 16)),
                                            ("cubic", (1, 1, 1024, 1024), (1, 1, 16, 16))])
def test_antialiased_downscale_within_lavapipes_loop_count(ep_devices, mode, shape, out):
    """An antialiased downscale by f reads 2 f (linear) or 4 f (cubic) taps a dim for each output (resize.comp's
    loops over them: resize.tap_loops). Left unchecked, 2,048 x 2,048 to 16 x 16 (256 x 256 taps) gave 3.5 where
    the CPU EP gives 43.8, lavapipe having ended the taps' loop; what passes the loop budget now stays on the CPU
    EP (4,999 taps' pairs on vkep, 5,000 not), equal either way. The large values sit in the last taps."""
    from vkep.kernels.base import LOOP_BUDGET
    from vkep.kernels.resize import tap_loops

    x = np.random.default_rng(2).uniform(0, 1, shape).astype(np.float32)
    x[..., -max(1, shape[2] // 8):, -max(1, shape[3] // 8):] = 50.0
    model = _model("Resize", [("x", (F, x.shape)), ("", 0), ("", 0), ("sz", 0)], opset=18,
                   inits={"sz": np.array(out, np.int64)}, mode=mode, antialias=1)
    session = runner.vkep_session(model)
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    dims = [[1, 1, 1.0, True]] + [[n, o, float(np.float32(o) / np.float32(n)), n == o] for n, o in
                                  zip(shape[2:], out[2:], strict=True)]
    on_vkep = [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    assert on_vkep == (tap_loops(1 if mode == "linear" else 2, 1, dims) <= LOOP_BUDGET), on_vkep


def test_trilu_k_beyond_matrix(ep_devices):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    for k, upper in ((-10, 1), (10, 0), (2, 1), (-1, 0)):
        model = _model("Trilu", [("x", (F, x.shape)), ("k", 0)], inits={"k": np.array(k, np.int64)}, upper=upper)
        _check(model, {"x": x}, "Trilu")


def test_gather_elements_past_rank_6_stays_on_the_cpu_ep(ep_devices):
    """vkep declines it while ORT partitions the graph (its shader addresses at most 6 dimensions)."""
    import numpy as np
    from onnx import TensorProto, helper

    from vkep import runner

    shape = [2, 1, 2, 1, 2, 1, 2]
    graph = helper.make_graph([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)], "ge",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
                               helper.make_tensor_value_info("i", TensorProto.INT64, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(shape), "i": np.zeros(shape, np.int64)}
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opset, outputs, ratio", [(22, 2, 0.3), (22, 1, None), (13, 2, None), (12, 2, 0.0), (7, 2, None)])
def test_dropout_at_inference(ep_devices, opset, outputs, ratio, dtype):
    """Dropout outside training: the input, and an all-true mask (opsets 7-9: all 0 of X's type, as ORT's CPU EP);
    float64 too (moved, never computed: NaN, -0 and subnormals keep their bits); float64 with a training_mode input
    stays on the CPU EP (training mode: test_random)."""
    x = RNG.uniform(-1, 1, (3, 70)).astype(dtype)
    x[0, :4] = [np.nan, -0.0, 1e-310 if dtype == np.float64 else 1e-40, -np.inf]
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs = [("x", (t, x.shape))] + ([("r", (t, []))] if ratio is not None else [])
    inits = {"r": np.array(ratio, dtype)} if ratio is not None else None
    got = _check(_model("Dropout", inputs, outputs, opset, inits), {"x": x}, "Dropout")
    assert got[0].dtype == x.dtype and np.array_equal(got[0].view(np.uint8), x.view(np.uint8))
    if outputs == 2 and opset >= 10:
        assert got[1].dtype == np.bool_ and got[1].all()
    elif outputs == 2:
        assert got[1].dtype == x.dtype and not got[1].any()
    training = _model("Dropout", [("x", (TensorProto.DOUBLE, x.shape)), ("r", (F, [])), ("t", (TensorProto.BOOL, []))],
                      2, 22, {"r": np.array(0.5, np.float32), "t": np.array(True)})
    assert {ep for _, _, ep in runner.placement(runner.vkep_session(training))} == {"CPUExecutionProvider"}


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "bool", "int64"])
def test_gathers_move_whole_words_where_they_can(ep_devices, monkeypatch, dtype):
    """Transpose, Slice and Split whose innermost run, strides and offset are whole 8-byte words move words
    (movement.words_of: the int64 variant over fewer elements), the others elements, and Concat likewise by its
    inner run; every output equal to numpy's, bit for bit: a channel shuffle, a slice of whole rows and one at an odd
    column, a split along the last axis, concatenations of whole rows and of odd runs, and runs of 1, 2, 4 and 8
    elements."""
    from vkep.kernels import movement

    moved = []
    real = movement.words_of

    def spy(members, x, y):
        words = real(members, x, y)
        moved.append(words is not None)
        return words

    monkeypatch.setattr(movement, "words_of", spy)
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((2, 4, 6, 8, 8)) * 50).astype(dtype)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    nodes = [helper.make_node("Transpose", ["x"], ["shuffled"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Transpose", ["x"], ["last"], perm=[0, 1, 2, 4, 3]),
             helper.make_node("Slice", ["x", "s0", "e0", "a0"], ["rows"]),
             helper.make_node("Slice", ["x", "s1", "e1", "a1"], ["odd"]),
             helper.make_node("Split", ["x", "parts"], ["left", "right"], axis=4),
             helper.make_node("Concat", ["x", "rows"], ["joined"], axis=3),
             helper.make_node("Concat", ["x", "odd"], ["widened"], axis=4)]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("s0", [2]), ("e0", [6]), ("a0", [3]), ("s1", [1]), ("e1", [7]), ("a1", [4]), ("parts", [2, 6]))]
    outs = ["shuffled", "last", "rows", "odd", "left", "right", "joined", "widened"]
    graph = helper.make_graph(nodes, "moves", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info(n, elem, None) for n in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    got = dict(zip(outs, session.run(None, {"x": x}), strict=True))
    want = {"shuffled": x.transpose(0, 2, 1, 3, 4), "last": x.transpose(0, 1, 2, 4, 3), "rows": x[:, :, :, 2:6],
            "odd": x[..., 1:7], "left": x[..., :2], "right": x[..., 2:],
            "joined": np.concatenate([x, x[:, :, :, 2:6]], axis=3), "widened": np.concatenate([x, x[..., 1:7]], axis=4)}
    for name in outs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    if x.itemsize < movement.WORD:  # (words where the run allows, elements elsewhere; int64 elements are words)
        assert any(moved) and not all(moved), moved
    else:
        assert moved and not any(moved), moved
