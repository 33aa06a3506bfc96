"""Softmax and LogSoftmax along any axis (opset < 13: over the flattened trailing dimensions)."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, grid_1d, pack, shader_dtype


class Softmax(Kernel):
    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape)
        if x.size == 0:
            return
        rank = len(x.shape)
        axis = self.attrs["axis"] % max(rank, 1)
        if self.since_version >= 13:
            outer, length, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
        else:  # opset 1-12: the input is read as 2-D [prod(:axis), prod(axis:)]
            outer, length, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis:]), 1
        rows = outer * inner
        call.dispatch(self.spec.shader, shader_dtype(x), self.constants, [x, y], pack("3I", rows, length, inner),
                      grid_1d(rows, 1), [x], [y])
