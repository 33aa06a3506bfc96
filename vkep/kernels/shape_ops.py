"""Ops whose output depends only on shapes or on CPU scalars: Shape and Size (written on the host into a
CPU output), Range and EyeLike (computed by fill.comp from push constants)."""

from __future__ import annotations

import math
import struct

import numpy as np

from vkep.kernels.base import (
    LOOP_BUDGET,
    MAX_ELEMENTS,
    Kernel,
    UnsupportedError,
    float_bits,
    grid_1d,
    moved_dtype,
    shader_dtype,
)
from vkep.kernels.elementwise import ONNX_TYPES
from vkep.kernels.movement import WG, host_values


class Shape(Kernel):
    def compute(self, call) -> None:
        shape = call.inputs[0].shape
        rank = len(shape)
        if self.spec.op == "Size":
            y = call.output(0, (), "int64")
            call.write_host(y, struct.pack("<q", math.prod(shape)))
            return
        start, end = self.attrs.get("start", 0), self.attrs.get("end")
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
        dims = shape[start:end] if end > start else ()
        y = call.output(0, (len(dims),), "int64")
        call.write_host(y, struct.pack(f"<{len(dims)}q", *dims))


class Range(Kernel):
    def compute(self, call) -> None:
        t = call.inputs[0]
        start, limit = (host_values(call, x)[0] for x in call.inputs[:2])
        # (com.microsoft's Range: delta optional, 1 by default)
        delta = host_values(call, call.inputs[2])[0] if len(call.inputs) > 2 and call.inputs[2] is not None else 1
        if delta == 0:
            raise UnsupportedError("Range: delta is 0")
        if t.dtype.startswith("float"):
            n = max(math.ceil((limit - start) / delta), 0)
            start_bits, delta_bits = float_bits(start), float_bits(delta)
        else:
            n = max(-((start - limit) // delta), 0)
            start_bits, delta_bits = start, delta
        if n > MAX_ELEMENTS:
            raise UnsupportedError(f"Range of {n} {t.dtype} elements")
        y = call.output(0, (n,))
        if n and t.dtype.startswith("float"):
            # fill.comp's MODE 1 (one invocation adds delta n times, as the CPU EP) a dispatch per LOOP_BUDGET
            # elements, each from the running value there, summed alike here (numpy's float32 accumulate: each sum
            # rounded in turn). (Past one dispatch's loop, the run used to fail: a Range's length is known at run time.)
            value = np.float32(start)
            for first in range(0, n, LOOP_BUDGET):
                count = min(LOOP_BUDGET, n - first)
                part = y.view(4 * first, (count,))
                call.dispatch(self.spec.shader, shader_dtype(t), {"mode": 1},
                              {"y": part, "start": float_bits(float(value)), "delta": delta_bits, "n": count},
                              (1, 1, 1), [], [part])
                sums = np.full(count + 1, delta, np.float32)
                sums[0] = value
                value = np.add.accumulate(sums, dtype=np.float32)[count]  # (the value after this part's)
        elif n:
            call.dispatch(self.spec.shader, shader_dtype(t), {"mode": 0},
                          {"y": y, "start": start_bits, "delta": delta_bits, "n": n}, grid_1d(n, WG), [], [y])


class ConstantOfShape(Kernel):
    """fill.comp with delta 0: every element is the `value` attribute (float32 0 by default)."""

    def compute(self, call) -> None:
        shape = tuple(host_values(call, call.inputs[0]))
        value = self.attrs["value"]
        dtype = "float32" if value is None else ("bool" if value.dtype.kind == "b" else str(value.dtype))
        scalar = 0 if value is None else value.reshape(-1)[0].item()
        n = math.prod(shape)
        if n > MAX_ELEMENTS:
            raise UnsupportedError(f"ConstantOfShape of {n} elements")
        y = call.output(0, shape, dtype)
        if n:
            if dtype == "float64":  # (filled as int64: the value's bits)
                bits = struct.unpack("<q", struct.pack("<d", scalar))[0]
            else:
                bits = float_bits(scalar) if dtype.startswith("float") else int(scalar)
            call.dispatch(self.spec.shader, moved_dtype(y), self.constants, {"y": y, "start": bits, "delta": 0, "n": n},
                          grid_1d(n, WG), [], [y])


class EyeLike(Kernel):
    """fill.comp's mode 2: a 2-D output of the input's shape, ones on diagonal `k`, of the type the `dtype`
    attribute names (absent: the input's)."""

    def compute(self, call) -> None:
        x = call.inputs[0]
        if len(x.shape) != 2:  # (the run fails, as on ORT's CPU EP)
            raise UnsupportedError(f"EyeLike: input of rank {len(x.shape)}, not 2")
        code = self.attrs.get("dtype")
        if code is not None and code not in ONNX_TYPES:
            raise UnsupportedError(f"EyeLike: no shader variant for element type {code}")
        y = call.output(0, x.shape, x.dtype if code is None else ONNX_TYPES[code])
        if y.size:
            call.dispatch(self.spec.shader, shader_dtype(y), self.constants,
                          {"y": y, "start": self.attrs["k"], "delta": x.shape[1], "n": y.size},
                          grid_1d(y.size, WG), [], [y])
