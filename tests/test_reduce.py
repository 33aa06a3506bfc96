"""Reductions on vkep against ORT's CPU EP: Reduce* (axes as attribute and as input, non-adjacent and
negative axes, keepdims, noop_with_empty_axes, empty tensors, long reductions), ArgMax/ArgMin, TopK,
CumSum, LogSoftmax and Hardmax."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import helper, numpy_helper

from vkep import runner
from vkep.kernels import manifest

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
AXES_INPUT_SINCE = {"ReduceSum": 13}  # the others take axes as an input from opset 18


def check_node(op: str, feeds: dict[str, np.ndarray], opset: int, consts: dict[str, np.ndarray] | None = None,
               outputs: list[tuple[str, np.dtype | None]] | None = None, input_order: list[str] | None = None,
               canonical=None, **attrs) -> list[np.ndarray]:
    """Run one `op` node on vkep (every node placed there) and on the CPU EP and compare. `consts` become
    initializers (CPU inputs); `outputs` lists (name, element type; None: that of the first feed); an
    empty input name in `input_order` is an omitted optional input. float16 feeds are checked against
    the float32 twin of the model. `canonical` maps both output lists before comparing (for outputs
    whose order is unspecified)."""
    consts = consts or {}
    first = next(iter(feeds.values()))
    outputs = outputs or [("y", None)]
    order = input_order or list(feeds) + list(consts)

    def model(as_fp32: bool):
        def elem(dtype):
            dtype = np.dtype(dtype)
            return helper.np_dtype_to_tensor_dtype(np.dtype(np.float32) if as_fp32 and dtype == np.float16 else dtype)
        inputs = [helper.make_tensor_value_info(n, elem(a.dtype), a.shape) for n, a in feeds.items()]
        outs = [helper.make_tensor_value_info(n, elem(t or first.dtype), None) for n, t in outputs]
        inits = [numpy_helper.from_array(v, n) for n, v in consts.items()]
        node = helper.make_node(op, order, [n for n, _ in outputs], **attrs)
        graph = helper.make_graph([node], op, inputs, outs, initializer=inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)

    session = runner.vkep_session(model(False), disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    ref_feeds = {n: a.astype(np.float32) if a.dtype == np.float16 else a for n, a in feeds.items()}
    want = runner.cpu_session(model(True)).run(None, ref_feeds)
    canonical = canonical or (lambda outs: outs)
    want = canonical(want)
    for _ in range(2):  # the second run may replay the recorded plan
        got = canonical(session.run(None, feeds))
        for g, w, (_, t) in zip(got, want, outputs, strict=True):
            dtype = np.dtype(t or first.dtype)
            assert g.dtype == dtype and g.shape == w.shape, (g.dtype, g.shape, w.shape)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **tolerance(dtype))
    return got


def _data(shape, dtype="float32", seed=0, low=-2.0, high=2.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    return rng.integers(-9, 10, size=shape).astype(dtype)


def _reduce(op: str, x: np.ndarray, axes, opset: int, **attrs):
    low = 0.1 if op == "ReduceLogSum" else -2.0
    feeds = {"x": _data(x.shape, x.dtype, low=low) if x.dtype.kind == "f" else x}
    if opset >= AXES_INPUT_SINCE.get(op, 18):
        consts = {} if axes is None else {"axes": np.array(axes, np.int64)}
        order = ["x", "axes"] if axes is not None else ["x"]
        return check_node(op, feeds, opset, consts, input_order=order, **attrs)
    if axes is not None:
        attrs["axes"] = axes
    return check_node(op, feeds, opset, **attrs)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("shape,axes,keepdims", [
    ((2, 3, 4, 5), [0, 2], 1),            # non-adjacent
    ((2, 3, 4, 5), [-1, -3], 0),          # negative
    ((2, 3, 4, 5, 2), [0, 2, 4], 1),      # three separate groups
    ((3, 1000), [1], 0),                  # long contiguous: a workgroup per output
    ((1000, 3), [0], 1),                  # long strided
    ((4, 40, 3, 50), [1, 3], 0),          # long over two groups
    ((2, 300000), [1], 1),                # past lavapipe's loop budget for narrow workgroups
    ((2, 3, 4), None, 1),                 # no axes: everything
    ((7,), [0], 0),                       # to a scalar
])
def test_reduce(ep_devices, op, shape, axes, keepdims):
    for opset in (13, 18):
        _reduce(op, _data(shape), axes, opset, keepdims=keepdims)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_longest_rows_in_eigens_order(ep_devices, op, dtype):
    """The longest rows reduce.comp takes in Eigen's order (one invocation a row, reduce.eigen_loops: a loop step
    per two packets, 4 doubles or 8 floats) stay within lavapipe's 65,535 loop steps; a row one longer is a
    workgroup's reduction. At n // 8 steps for doubles too, a float64 row of 479,495 ran 119,870 steps, cut short
    (its sum lost half the row, its max at the end was missed)."""
    from vkep.kernels import host
    from vkep.kernels.base import LOOP_BUDGET
    from vkep.kernels.reduce import eigen_loops, eigen_order, reduce_plan

    per_step = 4 if dtype == "float64" else 8
    longest = (LOOP_BUDGET - eigen_loops(dtype, 0)) * per_step + per_step - 1
    for n in (longest, longest + 1, (LOOP_BUDGET - 64) * 8 + 7):  # (the last: the old count's longest)
        if host.cpu_flags():  # (Eigen's order is taken on x86-64 only)
            assert eigen_order(dtype, 0, reduce_plan((1, n), {1}, True)[3]) == (n <= longest)
        x = _data((1, n), dtype, low=0.0, high=1.0)
        x[0, -12] = 5.0  # (the max near the end, in the loop over packets)
        check_node(op, {"x": x}, 13 if op == "ReduceMax" else 11, axes=[1])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_reduce_float16(ep_devices, op):
    _reduce(op, _data((4, 300, 5), "float16"), [1], 18)
    _reduce(op, _data((4, 3, 5), "float16"), [0, 2], 18)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceL1",
                                "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_reduce_int(ep_devices, op, dtype):
    x = _data((3, 4, 5), dtype)
    _reduce(op, x, [0, 2], 18)
    if op != "ReduceProd":
        _reduce(op, _data((2, 500), dtype), [1], 18, keepdims=0)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_noop_with_empty_axes(ep_devices, op):
    x = _data((2, 3))
    _reduce(op, x, [], 18, noop_with_empty_axes=1)   # an empty axes tensor: no reduction
    _reduce(op, x, None, 18, noop_with_empty_axes=1)  # an omitted axes input: the same
    _reduce(op, x, [], 18)                            # without noop: everything


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_empty(ep_devices, op):
    _reduce(op, np.zeros((2, 0, 3), np.float32), [1], 18)   # empty reduction: each op's identity
    _reduce(op, np.zeros((2, 0, 3), np.float32), [2], 18)   # empty output


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "int8", "uint8"])
def test_arg_reduce(ep_devices, op, dtype):
    x = _data((3, 4, 5), dtype) if dtype != "uint8" else _data((3, 4, 5), "int8").astype("uint8")
    for axis, keepdims, last in [(0, 1, 0), (-1, 0, 1), (1, 1, 1)]:
        check_node(op, {"x": x}, 13, outputs=[("y", np.int64)], axis=axis, keepdims=keepdims, select_last_index=last)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce_ties_and_long_axes(ep_devices, op):
    ties = np.array([[1, 3, 3, 0, 3], [2, 2, 0, 0, 2]], np.float32)
    for last in (0, 1):
        check_node(op, {"x": ties}, 13, outputs=[("y", np.int64)], axis=1, select_last_index=last)
    long = _data((2, 3000, 3))
    long[1, 1234, 2] = 5.0
    long[1, 2500, 2] = 5.0
    long[0, 7, 0] = -5.0
    for last in (0, 1):
        check_node(op, {"x": long}, 13, outputs=[("y", np.int64)], axis=1, select_last_index=last)
    check_node(op, {"x": long}, 11, outputs=[("y", np.int64)], axis=1, keepdims=0)


def _by_index(axis: int):
    """TopK's outputs in index order: with sorted=0 the order is unspecified (ORT's CPU EP's is a heap's)."""
    def canonical(outs):
        values, indices = outs
        order = np.argsort(indices, axis=axis, kind="stable")
        return [np.take_along_axis(values, order, axis), np.take_along_axis(indices, order, axis)]
    return canonical


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
@pytest.mark.parametrize("largest,sorted_", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_topk(ep_devices, dtype, largest, sorted_):
    x = _data((3, 7, 4), dtype)
    outputs = [("values", None), ("indices", np.int64)]
    for axis, k in [(1, 3), (-1, 4), (0, 1), (1, 0)]:
        check_node("TopK", {"x": x}, 11, {"k": np.array([k], np.int64)}, outputs, axis=axis, largest=largest,
                   sorted=sorted_, canonical=None if sorted_ else _by_index(axis))


def test_topk_long_rows_and_ties(ep_devices):
    outputs = [("values", None), ("indices", np.int64)]
    ties = np.array([[1, 3, 3, 0, 3, 1, 0]], np.float32)
    for largest in (0, 1):
        check_node("TopK", {"x": ties}, 11, {"k": np.array([4], np.int64)}, outputs, largest=largest)
    check_node("TopK", {"x": _data((2, 2000))}, 11, {"k": np.array([50], np.int64)}, outputs)
    # longer than one shared-memory sort: chunks merged with the best so far
    check_node("TopK", {"x": _data((3, 10000))}, 11, {"k": np.array([40], np.int64)}, outputs)
    check_node("TopK", {"x": _data((2, 5000), "int32")}, 11, {"k": np.array([1000], np.int64)}, outputs, largest=0)
    check_node("TopK", {"x": _data((2, 5000, 2))}, 11, {"k": np.array([7], np.int64)}, outputs, axis=1, sorted=0,
               canonical=_by_index(1))
    check_node("TopK", {"x": _data((2, 5))}, 1, outputs=outputs, k=2)  # k as an attribute
    check_node("TopK", {"x": _data((2, 5))}, 10, {"k": np.array([5], np.int64)}, outputs)


@pytest.mark.parametrize("k", [1, 64, 1024])
def test_topk_longest_rows_it_takes(ep_devices, k):
    """The longest rows TopK's check lets through (chunks of TOPK_MAX merged with the best so far, TOPK_CHUNK_LOOPS
    loop steps each) stay within lavapipe's 65,535 a workgroup, where its loops would end early and the result come
    out wrong (at 400 steps a chunk: rows of 148-150 chunks for k 64 and 1024 did); a row one chunk longer is left
    to the CPU EP."""
    from vkep.kernels.base import LOOP_BUDGET
    from vkep.kernels.reduce import TOPK_CHUNK_LOOPS, TOPK_MAX

    chunks = LOOP_BUDGET // TOPK_CHUNK_LOOPS
    outputs = [("values", None), ("indices", np.int64)]
    longest = TOPK_MAX + (chunks - 1) * (TOPK_MAX - k)
    check_node("TopK", {"x": _data((1, longest))}, 11, {"k": np.array([k], np.int64)}, outputs)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
def test_cumsum(ep_devices, dtype):
    x = _data((3, 4, 5), dtype)
    for axis_dtype, axis in [(np.int64, 1), (np.int32, -1), (np.int64, 0)]:
        for exclusive in (0, 1):
            for reverse in (0, 1):
                check_node("CumSum", {"x": x}, 14, {"axis": np.array(axis, axis_dtype)}, exclusive=exclusive,
                           reverse=reverse)


def test_cumsum_long_lines(ep_devices):
    # past 65535 elements a line: lavapipe ends any shader loop there, so long lines take a workgroup each
    x = np.ones((2, 70000), np.float32)
    check_node("CumSum", {"x": x}, 14, {"axis": np.array(1, np.int64)})
    check_node("CumSum", {"x": _data((70000, 2), "int32")}, 14, {"axis": np.array(0, np.int64)}, reverse=1,
               exclusive=1)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_softmax_family(ep_devices, op, dtype):
    x = _data((2, 3, 4, 5), dtype)
    for opset in (11, 13):  # before 13: the input is coerced to 2-D at `axis`
        for axis in (0, 1, -1):
            check_node(op, {"x": x}, opset, axis=axis)
    check_node(op, {"x": _data((3, 1500), dtype)}, 13)
    check_node(op, {"x": _data((2, 200000), dtype)}, 13)  # wide workgroups


def test_hardmax_ties(ep_devices):
    check_node("Hardmax", {"x": np.array([[2, 5, 5, 1], [3, 3, 3, 3]], np.float32)}, 13)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_cumprod(ep_devices, dtype):
    """CumProd (opset 26) through cumsum.comp's product mode, short lines and long ones (a workgroup per
    line, whose segment totals are combined without division: zeros must stay zeros)."""
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, (3, 4, 5)).astype(dtype)
    for axis, exclusive, reverse in [(1, 0, 0), (-1, 1, 0), (0, 0, 1), (2, 1, 1)]:
        check_node("CumProd", {"x": x}, 26, {"axis": np.array(axis, np.int64)}, exclusive=exclusive, reverse=reverse)
    # long lines: values near 1 keep the product finite; a zero in the middle must zero the rest
    long = rng.choice(np.array([1, -1], dtype), size=(2, 9000))
    long[0, 4500] = 0
    check_node("CumProd", {"x": long}, 26, {"axis": np.array(1, np.int64)}, reverse=1)


def _reduce_rows(op: str, x: np.ndarray, axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """op over the rows of x (axes=[axis], keepdims=0, opset 18) on vkep alone and on the CPU EP."""
    T = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)], "r",
                              [helper.make_tensor_value_info("x", T, x.shape)], [helper.make_tensor_value_info("y", T, None)],
                              [numpy_helper.from_array(np.array([axis], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    return got, runner.cpu_session(model).run(None, {"x": x})[0]


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceLogSumExp"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("length", [5, 3000])  # one thread per output, and a workgroup's tree (SPLIT)
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_nan_in_max_and_min_as_the_cpu_ep(ep_devices, op, dtype, length, layout):
    """ReduceMax and ReduceMin give NaN where a row's first element is NaN and pass over a NaN met later, as ORT's
    CPU EP does (Eigen's maxCoeff and ORT's update loops keep the accumulator of a comparison with NaN);
    ReduceLogSumExp gives NaN for any NaN (its sum of exps). Rows with a NaN first, in the middle, last, two, and
    none (±inf, ±0, denormals, ±3.4e38), in both reduction paths."""
    rng = np.random.default_rng(0)
    values = np.array([np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1.0, -2.5], np.float32)
    x = rng.choice(values, size=(6, length)).astype(dtype)
    mid = length // 2
    x[0, 0] = x[1, mid] = x[2, -1] = x[3, 0] = x[3, mid] = x[4, 1] = x[4, -2] = np.nan
    # (rows: contiguous, Eigen's packets; columns: strided, each output's elements in turn)
    got, want = _reduce_rows(op, x) if layout == "rows" else _reduce_rows(op, np.ascontiguousarray(x.T), axis=0)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite].astype(np.float64), want[finite].astype(np.float64), **tolerance(dtype))


REDUCE_SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1e38, -1e38, 0.5, -0.5,
                           2.0], np.float32)


@pytest.mark.parametrize("op", sorted({s.op for s in manifest.load() if s.shader == "reduce.comp"}))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_special_values_through_every_reduction(ep_devices, op, dtype):
    """Every reduction of the manifest over rows that each hold one special value (NaN, ±inf, ±0, denormals,
    extreme finite values; in float16 the large ones are already ±inf) among ordinary ones, as the CPU EP
    (NaN where it gives NaN). One special value per row (rows mixing NaN with others:
    test_nan_in_max_and_min_as_the_cpu_ep)."""
    with np.errstate(over="ignore"):
        x = np.stack([np.array([v, 1.0, -2.0, 0.25], np.float32) for v in REDUCE_SPECIAL]).astype(dtype)
    got, want = _reduce_rows(op, x)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tolerance(dtype))


@pytest.mark.parametrize("op", ["ReduceLogSum", "ReduceLogSumExp"])
def test_log_of_a_denormal_sum(ep_devices, op):
    """Found by the fuzzer: the log of a sum that stays denormal (lavapipe's log flushes it) gave -88.0
    where the CPU EP gives -92.1 for 1e-40."""
    x = np.array([[1e-40, 0.0], [1e-40, 2e-40], [-1e-40, 0.0]], np.float32)
    consts = {"axes": np.array([1], np.int64)}
    check_node(op, {"x": x} if op == "ReduceLogSum" else {"x": np.log(np.maximum(x, 1e-45)).astype(np.float32)},
               18, consts, input_order=["x", "axes"], keepdims=0)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "float32"])
def test_max_and_min_of_nothing(ep_devices, op, dtype):
    """Found by the fuzzer: the max (min) of an empty set is the element type's lowest (highest) value, as
    the CPU EP gives it; int8 and uint8 gave 0 (a 32-bit extreme's low byte)."""
    check_node(op, {"x": np.zeros((2, 0), dtype)}, 20, {"axes": np.array([1], np.int64)}, input_order=["x", "axes"],
               keepdims=0)


@pytest.mark.parametrize("op", ["ReduceLogSumExp", "ReduceLogSum"])
def test_float64_log_sums_as_the_cpu_ep(ep_devices, op):
    """float64 ReduceLogSumExp (max-shifted: log(sum(exp(x - max))) + max, as ORT's aggregator) and ReduceLogSum in
    double (reduce.comp's FLOAT64: fdlibm's exp, a two-double log; the CPU EP's glibc exp and log): rows and columns,
    short and long (a workgroup), NaN, infinities of both signs, values past exp's range; within double rounding."""
    from onnx import TensorProto

    rng = np.random.default_rng(21)
    for shape in ((40, 300), (3, 5000)):
        x = rng.normal(0, 50, shape)
        x[0, 3], x[1, :], x[2, 5] = np.nan, -np.inf, np.inf
        x[-1, :] = rng.uniform(700, 800, shape[1])
        if op == "ReduceLogSum":
            x = np.abs(x)
        for axis in (1, 0):
            graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], axes=[axis], keepdims=0)], "f64_lse",
                                      [helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(shape))],
                                      [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
            session = runner.vkep_session(model, disable_cpu_fallback=True)
            assert [ep for *_, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
            got, want = session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
