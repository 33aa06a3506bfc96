"""OneHot (opsets 9, 11): the depth is a CPU input (it sets the output's shape); the on and off values are read
on the device (shaders/onehot.comp)."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, UnsupportedError, axis_in, grid_1d, shader_dtype
from vkep.kernels.movement import host_values

WG = 64  # (onehot.comp)


class OneHot(Kernel):
    def compute(self, call) -> None:
        indices, depth_input, values = call.inputs[:3]
        depth = int(host_values(call, depth_input)[0])  # (a float depth truncated, as ORT's cast)
        if depth <= 0:
            raise UnsupportedError(f"OneHot: depth {depth} must be positive")  # (the CPU EP fails the run too)
        if values.size != 2:
            raise UnsupportedError(f"OneHot: values has {values.size} elements, not 2 (off, on)")
        axis = axis_in(self.attrs.get("axis", -1), len(indices.shape) + 1, "OneHot")
        shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
        y = call.output(0, shape, values.dtype)
        if y.size:
            push = {"indices": indices, "values": values, "y": y, "n": y.size, "depth": depth,
                    "inner": math.prod(indices.shape[axis:])}
            types = (shader_dtype(indices), shader_dtype(values))
            call.dispatch("onehot.comp", types[0] if types[0] == types[1] else types, {}, push,
                          grid_1d(y.size, WG), [indices, values], [y])
