"""com.microsoft QLinearSoftmax (what ORT's quantizer makes of a Softmax in the QOperator format), as ORT's CPU
EP computes it (qlinear_softmax.cc, shaders/qlinear_softmax.comp): exponentials from a 256-entry table that
depends on X's scale and the row length, built here in double as the CPU EP builds it, then summed and divided
in float32 in the CPU EP's order. X's scale must be a constant (manifest `prepack`, `constant_inputs`): its
value is read when packed."""

from __future__ import annotations

import math

import numpy as np

from vkep.kernels.base import LOOP_BUDGET, Kernel, UnsupportedError, axis_in, grid_1d, padded

WG = 64  # qlinear_softmax.comp's
FLT_MAX = float(np.finfo(np.float32).max)
RESERVE_BITS = 5  # the CPU EP's margin below FLT_MAX for a float sum of the row (QlinearBuildLookupTableUint32)


def exp_table(x_scale: float, length: int) -> np.ndarray:
    """exp((i - 255 + shift) * x_scale) for i in 0..255, in double, rounded to float32; shift keeps a row's sum
    of `length` entries below FLT_MAX."""
    headroom = np.float32(FLT_MAX) / np.float32(length)  # (a float division there)
    shift = max(0.0, math.log(float(headroom)) - RESERVE_BITS) / x_scale
    i = np.arange(256, dtype=np.float64)
    return np.exp((i - 255 + shift) * np.float64(x_scale)).astype(np.float32)


class QLinearSoftmax(Kernel):
    """Inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point (per tensor); attributes opset (the Softmax's:
    below 13 a row is every dimension from axis on, else the axis alone) and axis."""

    def __init__(self, *args):
        super().__init__(*args)
        self.x_scale: float | None = None  # known once packed (GetCapability's dry run plans without it)

    def pack(self, index: int, weight: np.ndarray) -> tuple[np.ndarray, str]:
        if index == 1 and weight.size == 1:
            self.x_scale = float(weight.reshape(-1)[0])
        return weight, "raw"

    def compute(self, call) -> None:
        x, x_scale, _, y_scale, y_zp = padded(call.inputs, 5)
        for t, what in ((x_scale, "X_scale"), (y_scale, "Y_scale"), (y_zp, "Y_zero_point")):
            if t is not None and t.size != 1:
                raise UnsupportedError(f"QLinearSoftmax: {what} of shape {t.shape} (per tensor only)")
        if y_zp is not None and y_zp.dtype != x.dtype:
            raise UnsupportedError(f"QLinearSoftmax: X {x.dtype} with a {y_zp.dtype} Y_zero_point")
        rows, length, inner = self.planned(x.shape, lambda: self._plan(x.shape))
        y = call.output(0, x.shape, x.dtype)
        if rows == 0 or length == 0:
            return
        table = call.persistent(exp_table(self.x_scale if self.x_scale is not None else 1.0, length).tobytes())
        ins = {"x": x, "table": table, "y_scale": y_scale, "y_zp": y_zp}
        call.dispatch(self.spec.shader, "uint8", {"signed": int(x.dtype == "int8")},
                      {**ins, "y": y, "rows": rows, "len": length, "inner": inner}, grid_1d(rows, WG),
                      [t for t in ins.values() if t is not None], [y])

    def _plan(self, shape: tuple) -> tuple[int, int, int]:
        """(rows, row length, distance between a row's elements)."""
        opset = self.attrs["opset"]
        axis = self.attrs.get("axis")
        axis = axis_in(axis if axis is not None else (1 if opset < 13 else -1), len(shape), "QLinearSoftmax")
        if opset < 13:
            length, inner = math.prod(shape[axis:]), 1
        else:
            length, inner = shape[axis], math.prod(shape[axis + 1:])
        if 3 * length > LOOP_BUDGET:
            raise UnsupportedError(f"QLinearSoftmax: rows of {length} are beyond one invocation's loop budget")
        return math.prod(shape) // max(length, 1) if length else 0, length, max(inner, 1)
