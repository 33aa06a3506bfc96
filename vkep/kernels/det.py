"""Det (ONNX 11, 22; float32) as ORT 1.32's CPU EP computes it (core/providers/cpu/math/det.cc: Eigen's determinant(),
a partial-pivot LU): shaders/det.comp, one invocation a matrix, in Eigen's unblocked order (Eigen factors matrices of
up to 16 rows so, past that its blocked LU with its GEMM's orders of sums): bit for bit up to 48 rows."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, UnsupportedError, grid_1d

WG = 64  # det.comp's workgroup
MAX_M = 48  # (an invocation's loops: about M^3 / 3 steps of the LU, within lavapipe's budget)


class Det(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        rank = input_ranks[0] if input_ranks else None
        return f"X of rank {rank} (a determinant needs [..., M, M])" if rank not in (None, -1) and rank < 2 else None

    @classmethod
    def declines_dims(cls, attrs: dict, input_dims) -> str | None:
        dims = input_dims[0] if input_dims else None
        if dims is not None and len(dims) >= 2 and isinstance(dims[-1], int) and dims[-1] > MAX_M:
            return f"matrices of {dims[-1]} x {dims[-1]} (det.comp takes up to {MAX_M} rows)"
        return None

    def compute(self, call) -> None:
        x = call.inputs[0]
        if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
            raise UnsupportedError(f"Det: X {list(x.shape)} is not [..., M, M] (the CPU EP refuses it too)")
        m = x.shape[-1]
        if m > MAX_M:
            raise UnsupportedError(f"Det: matrices of {m} x {m} (det.comp takes up to {MAX_M} rows)")
        y = call.output(0, x.shape[:-2])
        count = math.prod(x.shape[:-2])
        if count == 0:
            return
        lu = call.scratch((max(x.size, 1),), "float32")
        call.dispatch(self.spec.shader, "float32", {}, {"x": x, "lu": lu, "y": y, "count": count, "m": m},
                      grid_1d(count, WG), [x], [lu, y])
