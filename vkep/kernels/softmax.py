"""Softmax, LogSoftmax and Hardmax along any axis (opset < 13: over the flattened trailing dimensions)."""

from __future__ import annotations

import math

from vkep.kernels import host
from vkep.kernels.base import (
    FLOAT64_SUFFIX,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    grid_1d,
    has_float64,
    onnx_spec,
    shader_dtype,
)
from vkep.kernels.elementwise import OP_SUB_LOG, dispatch_binary, dispatch_unary
from vkep.kernels.reduce import LOOP_BUDGET, dispatch_reduce

MLAS_ORDER = True  # float32 Softmax and LogSoftmax in the CPU EP's order where it applies (softmax.comp ORDER 1, 2)
# softmax.comp's ORDER and workgroup (MLAS's lanes) on a host whose CPU EP sums exps with MLAS's FMA3 kernel, and
# with its AVX-512F kernel
ORDER_FMA3, ORDER_AVX512F = (1, 8), (2, 16)
# rows of at most SERIAL_LENGTH, SERIAL_WG of them or more: one invocation a row (softmax.comp SERIAL), SERIAL_WG rows a
# workgroup; a detector's DFL Softmax, 86,016 rows of 16, ran a workgroup of 8 a row. (3 passes of the row within
# lavapipe's loop count)
SERIAL_LENGTH, SERIAL_WG = 256, 64


def mlas_lanes() -> tuple[int, int]:
    """(softmax.comp's ORDER, its workgroup) that follows this host's CPU EP."""
    return ORDER_AVX512F if host.mlas_avx512f() else ORDER_FMA3


def mlas_order(kernel: Kernel, dtype: str, length: int) -> str | None:
    """The softmax.comp variant whose ORDER 1 (ORT's CPU EP's sums and exp, to the last bit) computes this node, or
    None: Softmax or LogSoftmax of float32 on x86-64 with AVX2 and FMA (another host's MLAS adds in another order),
    rows within what MLAS's lanes (mlas_lanes) loop over. LogSoftmax takes the FLOAT64 variant (its log is glibc's logf, in
    double), on devices with shaderFloat64."""
    mode = kernel.constants.get("mode")
    if (not MLAS_ORDER or mode not in (0, 1) or dtype != "float32" or kernel.device_info is None
            or not host.mlas_fma3() or 3 * -(-length // mlas_lanes()[1]) + 32 > LOOP_BUDGET):
        return None
    if mode == 0:
        return "float32"
    return "float32" + FLOAT64_SUFFIX if has_float64(kernel.device_info) else None


def row_workgroup(length: int, passes: int) -> int:
    """Threads per row: wide for long rows, so each thread's `passes` loops stay in the loop budget."""
    wg = 64 if length < 8192 else 1024
    if passes * -(-length // wg) + 32 > LOOP_BUDGET:
        raise UnsupportedError(f"rows of {length} elements are too long for one workgroup")
    return wg


def softmax_float64(call, x: Tensor, y: Tensor, log: bool = False) -> None:
    """float64 Softmax (or LogSoftmax) of x [outer, length, inner] along its middle axis, in the steps the CPU EP takes
    (SoftmaxCPU<double>): the row's max, x - max, exp, the sum, then / sum (or x - max - log(fmax(sum, 1e-20f)): a NaN
    sum gives log(1e-20f)), through the FLOAT64 variants of reduce.comp, binary.comp and unary.comp."""
    rows = call.scratch((x.shape[0], 1, x.shape[2]), "float64")
    shifted = call.scratch(x.shape, "float64") if log else y
    dispatch_reduce(call, "ReduceMax", x, rows, {1})
    dispatch_binary(call, onnx_spec("Sub").constants["op"], x, rows, shifted)
    dispatch_unary(call, "unary.comp", {"op": onnx_spec("Exp").constants["op"]}, shifted, y, (0.0, 0.0))
    dispatch_reduce(call, "ReduceSum", y, rows, {1})
    dispatch_binary(call, OP_SUB_LOG if log else onnx_spec("Div").constants["op"], shifted, rows, y)


class Softmax(Kernel):
    """The manifest's `mode` constant: 0 Softmax, 1 LogSoftmax, 2 Hardmax; float64 Softmax and LogSoftmax:
    softmax_float64."""

    computes_float64 = True

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape)
        if x.size == 0:
            return
        rank = len(x.shape)
        axis = axis_in(self.attrs["axis"], max(rank, 1), self.spec.op)
        if self.since_version >= 13:
            outer, length, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
        else:  # opset 1-12: the input is read as 2-D [prod(:axis), prod(axis:)]
            outer, length, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis:]), 1
        rows = outer * inner
        if x.dtype == "float64":
            return softmax_float64(call, x.view(0, (outer, length, inner)), y.view(0, (outer, length, inner)),
                                   log=self.constants["mode"] == 1)
        push = {"x": x, "y": y, "rows": rows, "axis_len": length, "inner": inner}
        ordered = mlas_order(self, x.dtype, length)
        if ordered is not None:
            order, lanes = mlas_lanes()
            if length <= SERIAL_LENGTH and rows >= SERIAL_WG:  # (a row an invocation: the same values)
                return call.dispatch(self.spec.shader, ordered, {**self.constants, "local_size_x": SERIAL_WG,
                                                                 "order": order, "serial": 1},
                                     push, grid_1d(rows, SERIAL_WG), [x], [y])
            return call.dispatch(self.spec.shader, ordered, {**self.constants, "local_size_x": lanes, "order": order},
                                 push, grid_1d(rows, 1), [x], [y])
        wg = row_workgroup(length, 3)
        call.dispatch(self.spec.shader, shader_dtype(x), {**self.constants, "local_size_x": wg}, push,
                      grid_1d(rows, 1), [x], [y])
