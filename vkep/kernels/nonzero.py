"""NonZero: the coordinates of the non-zero elements, an output whose length depends on the values.

shaders/nonzero.comp counts each chunk's non-zero elements; the counts come back to the host (a stall: the
output's size must be known before ORT allocates it, as every EP's NonZero does) and a second pass writes each
element's coordinates at its place. The node is not replayed (vkep.ort.kernel: a call that reads the device).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from vkep.kernels.base import Kernel, Tensor, UnsupportedError, grid_1d, shader_dtype

SHADER = "nonzero.comp"
WG = 256  # elements a chunk (nonzero.comp's workgroup)
MAX_RANK = 8
COUNT, PLACE = 0, 1


class NonZero(Kernel):
    def compute(self, call) -> None:
        x = call.inputs[0]
        dims = x.shape or (1,)  # (a scalar's coordinates are those of a 1-element vector, as ORT's CPU EP)
        place_nonzero(call, x, math.prod(dims), dims, lambda total: call.output(0, (len(dims), total), "int64"))


def place_nonzero(call, x: Tensor, n: int, dims: tuple[int, ...], make_output: Callable[[int], Tensor]) -> int:
    """The coordinates (int64 [rank, total], rank = len(dims)) of the non-zero elements among x's first `n` elements
    (read as `dims`, row-major) written into make_output(total); returns total. The output's size depends on the
    values: the counts are read back before make_output (a stall, and a call that is not replayed)."""
    if len(dims) > MAX_RANK:
        raise UnsupportedError(f"NonZero of rank {len(dims)} (nonzero.comp takes {MAX_RANK})")
    if n == 0:
        make_output(0)
        return 0
    chunks = -(-n // WG)
    counts = call.scratch((chunks,), "int32")
    push = {"x": x, "counts": counts, "n": n, "rank": len(dims), "dims": dims}
    call.dispatch(SHADER, shader_dtype(x), {"mode": COUNT}, {**push, "y": None, "total": 0},
                  grid_1d(n, WG), [x], [counts])
    total = int(np.frombuffer(call.read_device(counts), np.uint32).sum())
    y = make_output(total)
    if total:
        call.dispatch(SHADER, shader_dtype(x), {"mode": PLACE}, {**push, "y": y, "total": total},
                      grid_1d(n, WG), [x, counts], [y])
    return total
