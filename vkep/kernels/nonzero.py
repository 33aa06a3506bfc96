"""Outputs whose length depends on the values: NonZero (the coordinates of the non-zero elements) and Unique.

shaders/nonzero.comp counts each chunk's non-zero elements; the counts come back to the host (a stall: the
output's size must be known before ORT allocates it, as every EP's NonZero does) and a second pass writes each
element's coordinates at its place. The node is not replayed (vkep.ort.kernel: a call that reads the device).
Compress (gather.py) and Unique size their outputs the same way (place_nonzero).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from vkep.kernels import base
from vkep.kernels.base import LOOP_BUDGET, Kernel, Tensor, UnsupportedError, axis_in, grid_1d, shader_dtype

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


UNIQUE = "unique.comp"
UNIQUE_WG = 64  # unique.comp's workgroup
FIRST, PLACE_DISTINCT, INVERSE, SORT, GROUPS, SORT_STEP = 0, 1, 2, 3, 4, 5  # unique.comp's modes
UNIQUE_WORK = 2**27  # element comparisons a node may take where unique.comp compares every pair of items
SORT_MAX = 2**15  # items of one element sorted by one workgroup's bitonic network (within lavapipe's loop budget)


def groups_loops(m: int) -> int:
    """Loop steps of unique.comp's scan of the sorted items (MODE 4): each of its 64 lanes walks its chunk twice
    and the chunks before it."""
    return 2 * -(-m // UNIQUE_WG) + UNIQUE_WG + 4


class Unique(Kernel):
    """Unique (opset 11) over the elements (no axis) or the slices along `axis`: unique.comp finds each item's
    first occurrence and count (items of one element: by a sort, one workgroup's up to SORT_MAX, then a dispatch a
    step of the network, as far as groups_loops allows; else by comparing every pair, up to
    UNIQUE_WORK element comparisons), nonzero.comp counts and lists the first occurrences (the count read back sizes
    the outputs), then each distinct item takes its place (sorted, or in order of first occurrence) and every item
    its inverse index. float64 items are compared in double."""

    computes_float64 = True

    def compute(self, call) -> None:
        x = call.inputs[0]
        axis = self.attrs.get("axis")
        if axis is None:
            m, outer, inner = x.size, 1, 1
        else:
            axis = axis_in(axis, len(x.shape), self.spec.op)
            m, outer, inner = x.shape[axis], math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
        length = outer * inner
        if m and not length:
            raise UnsupportedError("Unique of empty slices (ORT's CPU EP aborts)")
        # (unique.comp's pairs: each of m items costs its element loop and two leaving passes, as lavapipe counts)
        # (items of one element are sorted: past SORT_MAX a dispatch a step of the network, as far as the scan of
        # the sorted items stays within lavapipe's loop count)
        if groups_loops(m) > LOOP_BUDGET if length == 1 else m * (length + 2) > LOOP_BUDGET or m * m * length > \
                UNIQUE_WORK:
            raise UnsupportedError(f"Unique of {m} items of {length} elements (unique.comp compares every pair)")

        def outputs(distinct: int) -> list[Tensor | None]:
            shape = (distinct,) if axis is None else x.shape[:axis] + (distinct,) + x.shape[axis + 1:]
            wanted = [call.output(0, shape)]
            for j, size in enumerate((distinct, m, distinct), start=1):
                t = call.output(j, (size,), "int64") if j < (self.output_count or 1) else None
                wanted.append(t if t is not None and t.addr else None)  # (an optional output named "")
            return wanted

        if m == 0:
            outputs(0)
            return
        sort = length == 1  # (single elements: a sort instead of comparing every pair)
        padded = 1 << max(m - 1, 1).bit_length() if sort else 0
        words = call.scratch((4 * m + padded,), "int32")
        first, counts_of, flags, slot = (Tensor(words.addr + 4 * m * k, (m,), "int32", words.io) for k in range(4))
        order = Tensor(words.addr + 16 * m, (padded,), "int32", words.io) if sort else None
        dtype, constants = base.value_variant(x), {"sorted": int(self.attrs["sorted"] != 0)}
        push = {"x": x, "y": None, "indices": None, "inverse": None, "counts": None, "first": first,
                "counts_of": counts_of, "flags": flags, "reps": None, "slot": slot, "order": order, "m": m,
                "len": length, "inner": inner, "distinct": 0, "padded": padded, "ranked": int(sort), "step": 0}
        if sort:
            if m <= SORT_MAX:
                call.dispatch(UNIQUE, dtype, {"mode": SORT, **constants}, push, (1, 1, 1), [x], [order])
            else:  # (the network a step a dispatch: log2(padded) (log2(padded) + 1) / 2 of them, after the fill)
                steps = [0] + [size << 8 | stride for size in range(1, padded.bit_length())
                               for stride in range(size - 1, -1, -1)]
                for step in steps:
                    call.dispatch(UNIQUE, dtype, {"mode": SORT_STEP, **constants}, {**push, "step": step},
                                  grid_1d(padded // 2, UNIQUE_WG), [x, order], [order])
            call.dispatch(UNIQUE, dtype, {"mode": GROUPS, **constants}, push, (1, 1, 1), [x, order],
                          [first, counts_of, flags, slot])
        else:
            call.dispatch(UNIQUE, dtype, {"mode": FIRST, **constants}, push, grid_1d(m, UNIQUE_WG), [x],
                          [first, counts_of, flags])
        reps: list[Tensor] = []
        distinct = place_nonzero(call, flags, m, (m,), lambda total: reps.append(call.scratch((total,), "int64"))
                                 or reps[0])
        y, indices, inverse, counts = outputs(distinct)
        push |= {"y": y, "indices": indices, "inverse": inverse, "counts": counts, "reps": reps[0],
                 "distinct": distinct}
        written = [t for t in (y, indices, counts) if t is not None]
        call.dispatch(UNIQUE, dtype, {"mode": PLACE_DISTINCT, **constants}, push, grid_1d(distinct, UNIQUE_WG),
                      [x, counts_of, reps[0], slot], [slot, *written])
        if inverse is not None:
            call.dispatch(UNIQUE, dtype, {"mode": INVERSE, **constants}, push, grid_1d(m, UNIQUE_WG), [first, slot],
                          [inverse])
