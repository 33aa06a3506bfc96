"""Reductions: Reduce* over any axes, ArgMax/ArgMin, TopK, CumSum."""

from __future__ import annotations

import functools
import math
import struct

from vkep.kernels import host
from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    grid_1d,
    value_variant,
)

WG = 64  # thread-per-output workgroups of reduce.comp / argreduce.comp
MAX_GROUPS = 4  # kept and reduced dim groups reduce.comp decodes
CUMSUM_SERIAL = 4096  # longest line cumsum.comp scans with one thread ...
# ... and of floats, whose sums the CPU EP makes in order (a segmented scan rounds otherwise: a long phase
# accumulation such as Kokoro-82M's 38,400-sample CumSum drifts from the CPU EP's)
CUMSUM_SERIAL_FLOAT = LOOP_BUDGET - 64
CUMSUM_WG = 256
TOPK_MAX = 2048  # elements topk.comp sorts at once in shared memory
# loop iterations topk.comp spends a chunk of TOPK_MAX, as lavapipe counts them (each loop's leaving pass too):
# measured 434-443 at k 16 to 1024 (the most chunks one invocation ran right: 150, 148, 148, 149; 400 let rows of
# 148-150 chunks through, cut short: a wrong answer)
TOPK_CHUNK_LOOPS = 450
# float32 and float64 sums, means, max and min of contiguous rows as the CPU EP makes them (reduce.comp ORDER 1:
# the sums' rounding, which NaN the max and min keep)
EIGEN_ORDER = True
EIGEN_OPS = (0, 1, 2, 3)  # reduce.comp's ops that take it: sum, mean, max, min


@functools.cache
def reduce_op_code(op: str) -> int:
    """reduce.comp's op code of a reduction (its manifest entry's `op` constant)."""
    from vkep.kernels import manifest  # (at call time: the manifest names this module's kernels)

    return next(s.constants["op"] for s in manifest.registered() if s.op == op and s.impl == "reduce.Reduce")


def reduce_geometry(n_red: int, n_out: int, passes: int = 1) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """((split, workgroup size), groups): a thread per output element, or a workgroup per output element
    for long reductions (or too few outputs to fill the device), wide enough for the loop budget."""
    if n_red < 256 and not (n_red >= 32 and n_out <= 2048):
        return (0, WG), grid_1d(n_out, WG)
    wg = 64 if n_red < 8192 else 256 if n_red < 262144 else 1024
    if -(-n_red // wg) * passes > LOOP_BUDGET:
        raise UnsupportedError(f"reducing {n_red} elements into one exceeds what one workgroup can loop over")
    return (1, wg), grid_1d(n_out, 1)


def _ints(call, index: int) -> list[int] | None:
    """An int32/int64 CPU input as a list (None when absent)."""
    if len(call.inputs) <= index or call.inputs[index] is None:
        return None
    t = call.inputs[index]
    data = call.read_host(t)
    code = "q" if t.dtype == "int64" else "i"
    return list(struct.unpack(f"<{len(data) // struct.calcsize(code)}{code}", data))


def _axis(axis: int, rank: int) -> int:
    """A reduction's axis (a scalar's reduction takes axis 0 or -1)."""
    return axis_in(axis, max(rank, 1), "reduction")


def reduce_plan(shape: tuple[int, ...], axes: set[int], keepdims: bool) -> tuple:
    """(output shape, n_out, n_red, reduce.comp's push members but x and y): dims merged into alternating
    kept/reduced groups."""
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape) if keepdims or d not in axes)
    n_out = math.prod(s for d, s in enumerate(shape) if d not in axes)
    n_red = math.prod(shape[d] for d in axes)
    groups: list[list] = []  # [reduced?, size, stride], innermost last
    stride = 1
    strides = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = stride
        stride *= shape[d]
    for d, size in enumerate(shape):
        if size == 1 or (n_red == 0 and d in axes) or n_out == 0:
            continue  # nothing to decode (an empty reduction reads nothing)
        red = d in axes
        if groups and groups[-1][0] == red:
            groups[-1][1] *= size
            groups[-1][2] = strides[d]
        else:
            groups.append([red, size, strides[d]])
    kept = [(s, st) for r, s, st in groups if not r]
    red = [(s, st) for r, s, st in groups if r]
    if len(kept) > MAX_GROUPS or len(red) > MAX_GROUPS:
        raise UnsupportedError(f"reducing axes {sorted(axes)} of {shape} needs more than {MAX_GROUPS} dim groups")
    kept = [(1, 0)] * (MAX_GROUPS - len(kept)) + kept
    red = [(1, 0)] * (MAX_GROUPS - len(red)) + red
    members = {"n_out": n_out, "n_red": n_red, "out_dims": [s for s, _ in kept], "out_strides": [st for _, st in kept],
               "red_dims": [s for s, _ in red], "red_strides": [st for _, st in red]}
    return out_shape, n_out, n_red, members


def eigen_loops(dtype: str, n_red: int) -> int:
    """Loop steps reduce.comp's eigen_redux spends on a row of n_red, as lavapipe counts them: one a step of two
    packets (8 floats, but 4 doubles: at n_red // 8 a float64 row of 479,495 ran 119,870, cut short), and 64 for the
    leaving passes and the loops over the row's head and tail."""
    return n_red // (4 if dtype == "float64" else 8) + 64


def eigen_order(dtype: str, op: int, members: dict) -> bool:
    """Whether reduce.comp reduces in Eigen's order (ORDER 1), as ORT's CPU EP does for float32 and float64
    ReduceSum, ReduceMean, ReduceMax and ReduceMin over trailing axes (FastReduceKR: each row a contiguous run) on
    x86-64, and for float16 ReduceMax and ReduceMin (which it computes in float32 between Casts): one reduced dim
    group of stride 1, a row short enough for one invocation's loop."""
    red_dims, red_strides = members["red_dims"], members["red_strides"]
    contiguous = all(d == 1 for d in red_dims[:-1]) and (red_strides[-1] == 1 or red_dims[-1] == 1)
    typed = dtype in ("float32", "float64") or dtype == "float16" and op in (2, 3)
    return (EIGEN_ORDER and typed and op in EIGEN_OPS and contiguous and members["n_red"] > 0
            and eigen_loops(dtype, members["n_red"]) <= LOOP_BUDGET and host.cpu_flags() != frozenset())


def rows_in_order(dtype: str, op: int, members: dict) -> bool:
    """Whether reduce.comp sums in the CPU EP's row order (ORDER 2): float32 and float64 ReduceSum and ReduceMean over
    one group of leading axes with the kept ones after it (FastReduceRK: the first row, then each next one added;
    vkep's workgroups summed an NHWC image's spatial mean in a tree, 62 of 64 channels an ulp or more apart over
    96 x 96), and for float64 also a group of middle axes (FastReduceKRK: Eigen's rowwise sums, in the same order
    for doubles; float32's order there is Eigen's packets', not followed), an invocation an output: n_red loop steps
    within the budget."""
    red_dims, red_strides, out_dims = members["red_dims"], members["red_strides"], members["out_dims"]
    one_group = all(d == 1 for d in red_dims[:-1]) and red_dims[-1] > 1
    leading = all(d == 1 for d in out_dims[:-1])
    return (EIGEN_ORDER and dtype in ("float32", "float64") and op in (0, 1) and one_group and red_strides[-1] > 1
            and (leading or dtype == "float64") and members["n_red"] + 8 <= LOOP_BUDGET
            and host.cpu_flags() != frozenset())


def _record(call, code: int, x: Tensor, y: Tensor, members: dict, n_out: int, n_red: int) -> None:
    """One dispatch of reduce.comp's op `code` over reduce_plan's `members`: in Eigen's order where eigen_order takes
    it (an invocation a row: eigen_loops steps, within the budget), in the CPU EP's row order where rows_in_order
    does, else as reduce_geometry splits it."""
    (split, wg), groups = reduce_geometry(n_red, n_out, 2 if code == 8 else 1)  # (log-sum-exp: two passes)
    order = 1 if eigen_order(x.dtype, code, members) else 2 if rows_in_order(x.dtype, code, members) else 0
    if order:
        (split, wg), groups = (0, WG), grid_1d(n_out, WG)
    call.dispatch("reduce.comp", value_variant(x), {"op": code, "split": split, "local_size_x": wg, "order": order},
                  {**members, "x": x, "y": y}, groups, [x], [y])


def dispatch_reduce(call, op: str, x: Tensor, y: Tensor, axes: set[int]) -> None:
    """y (x's shape with `axes` kept as 1) = the reduction `op` (ReduceSum, ReduceMax, ...) of x over `axes`, as the
    Reduce kernel records it: for kernels that reduce as one step of their work."""
    _, n_out, n_red, members = reduce_plan(x.shape, axes, True)
    _record(call, reduce_op_code(op), x, y, members, n_out, n_red)


class Reduce(Kernel):
    """ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (the `op` constant picks which).

    Axes come from the attribute or, from opset 13 (ReduceSum) / 18 (the others), the CPU input 1.
    With no axes every dim is reduced, unless noop_with_empty_axes: then none is (the element
    transform, e.g. |x| for L1, still applies, as in ORT's CPU EP).
    """

    computes_float64 = True

    def compute(self, call) -> None:
        x = call.inputs[0]
        rank = len(x.shape)
        axes = _ints(call, 1) if 1 in self.spec.cpu_inputs else self.attrs.get("axes")
        if axes:
            reduced = {_axis(a, rank) for a in axes}
        else:
            reduced = set() if self.attrs.get("noop_with_empty_axes", 0) else set(range(rank))
        key = (x.shape, frozenset(reduced))
        if x.size > 2**32 - 1:
            raise UnsupportedError(f"{x.shape} has more than 2^32 elements")
        out_shape, n_out, n_red, members = self.planned(
            key, lambda: reduce_plan(x.shape, reduced, bool(self.attrs.get("keepdims", 1))))
        if n_red == 0 and n_out and x.dtype == "bool":  # (as ORT's CPU EP: no max or min of no bools)
            raise UnsupportedError(f"{self.spec.op} is not defined for empty set with bool type")
        y = call.output(0, out_shape)
        if n_out == 0:
            return
        _record(call, self.constants["op"], x, y, members, n_out, n_red)


class ArgReduce(Kernel):
    """ArgMax / ArgMin along `axis` (keepdims, select_last_index); int64 indices."""

    computes_float64 = True

    def compute(self, call) -> None:
        x = call.inputs[0]
        rank = len(x.shape)
        axis = _axis(self.attrs["axis"], rank)
        shape = x.shape or (1,)
        outer, length, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
        keep = self.attrs.get("keepdims", 1)
        out_shape = tuple(1 if d == axis else s for d, s in enumerate(x.shape) if keep or d != axis)
        y = call.output(0, out_shape, "int64")
        rows = outer * inner
        if rows == 0:
            return
        if length == 0:
            raise UnsupportedError(f"{self.spec.op} over an empty axis")
        (split, wg), groups = reduce_geometry(length, rows)
        push = {"x": x, "y": y, "rows": rows, "len": length, "inner": inner,
                "last": int(self.attrs.get("select_last_index", 0))}
        call.dispatch(self.spec.shader, value_variant(x), {**self.constants, "split": split, "local_size_x": wg},
                      push, groups, [x], [y])


class TopK(Kernel):
    """TopK (k from the attribute before opset 10, else from the CPU input 1): one workgroup per row
    sorts the row in shared memory (bitonic), in chunks of TOPK_MAX for longer rows."""

    computes_float64 = True

    def compute(self, call) -> None:
        x = call.inputs[0]
        rank = len(x.shape)
        axis = _axis(self.attrs.get("axis", -1), rank)
        k = self.attrs["k"] if self.since_version < 10 else _ints(call, 1)[0]
        length = x.shape[axis]
        if not 0 <= k <= length:
            raise UnsupportedError(f"TopK: k={k} is out of range for axis length {length}")
        out_shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        values = call.output(0, out_shape)
        indices = call.output(1, out_shape, "int64")
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
        rows = outer * inner
        if rows == 0 or k == 0:
            return
        if length > TOPK_MAX and k > TOPK_MAX // 2:
            raise UnsupportedError(f"TopK: k={k} above {TOPK_MAX // 2} on rows longer than {TOPK_MAX}")
        chunks = 1 + max(0, -(-(length - TOPK_MAX) // (TOPK_MAX - k)))
        if chunks * TOPK_CHUNK_LOOPS > LOOP_BUDGET:
            raise UnsupportedError(f"TopK: rows of {length} elements are too long for one workgroup")
        width = 1 << max(0, (min(length, TOPK_MAX) - 1).bit_length())  # the first sort's power of two
        flags = int(self.attrs.get("largest", 1)) | (int(self.attrs.get("sorted", 1)) << 1)
        push = {"x": x, "values": values, "indices": indices, "rows": rows, "len": length, "inner": inner, "k": k,
                "width": width, "flags": flags}
        call.dispatch(self.spec.shader, value_variant(x), {}, push, grid_1d(rows, 1), [x], [values, indices])


class CumSum(Kernel):
    """CumSum or CumProd (the manifest's `op` constant) along the axis given by the CPU input 1
    (exclusive, reverse): a thread per line, or a workgroup per line for long lines. float64 in double."""

    computes_float64 = True

    def compute(self, call) -> None:
        x = call.inputs[0]
        rank = len(x.shape)
        axis = _axis(_ints(call, 1)[0], rank)
        y = call.output(0, x.shape)
        shape = x.shape or (1,)
        length, inner = shape[axis], math.prod(shape[axis + 1:])
        lines = math.prod(shape[:axis]) * inner
        if x.size == 0:
            return
        push = {"x": x, "y": y, "lines": lines, "len": length, "inner": inner,
                "exclusive": int(self.attrs.get("exclusive", 0)), "reverse": int(self.attrs.get("reverse", 0))}
        serial = CUMSUM_SERIAL_FLOAT if x.dtype in ("float32", "float16", "float64") else CUMSUM_SERIAL
        if length <= serial:
            split, wg, groups = 0, WG, grid_1d(lines, WG)
        elif 2 * -(-length // CUMSUM_WG) + 16 <= LOOP_BUDGET:
            split, wg, groups = 1, CUMSUM_WG, grid_1d(lines, 1)
        else:
            raise UnsupportedError(f"{self.spec.op}: lines of {length} elements are too long for one workgroup")
        call.dispatch(self.spec.shader, value_variant(x), {**self.constants, "split": split, "local_size_x": wg}, push,
                      groups, [x], [y])
