"""Index-driven ops: Gather, GatherElements, GatherND (gather.comp) and ScatterND, ScatterElements
(scatter.comp). Indices stay on the device: the shaders read them, wrap negatives, clamp, and report one out of range
(the run then fails, as on ORT's CPU EP: shaders/common.glsl, gpu.stream.IndexOutOfRange)."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, UnsupportedError, axis_in, grid_1d, pack, shader_dtype
from vkep.kernels.movement import MAX_RANK, WG, _check_size, contiguous_strides

GATHER, GATHER_ELEMENTS, GATHER_ND = 0, 1, 2
COPY, SCATTER_ND, SCATTER_ND_REDUCE, SCATTER_ELEMENTS = 0, 1, 2, 3
REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def _idx64(t) -> int:
    if t.dtype not in ("int64", "int32"):
        raise UnsupportedError(f"indices of type {t.dtype}")
    return int(t.dtype == "int64")


def _arrays(dims, strides) -> list[int]:
    if len(dims) > MAX_RANK:
        raise UnsupportedError(f"rank {len(dims)} > {MAX_RANK}")
    pad = [0] * (MAX_RANK - len(dims))
    return list(dims) + pad + list(strides) + pad


class _Indexed(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        """GatherElements and ScatterElements address every dimension of the indices."""
        if spec.op in ("GatherElements", "ScatterElements") and any((r or 0) > MAX_RANK for r in input_ranks):
            return f"{spec.op} of rank above {MAX_RANK}"
        return None

    def _cached(self, call) -> tuple:
        key = tuple(t.shape for t in call.inputs)
        return self.planned(key, lambda: self._plan(*key))


class Gather(_Indexed):
    """Gather, GatherElements, GatherND: the manifest's `mode` constant picks the shader mode."""

    def _plan(self, shape, ishape) -> tuple:
        mode = self.constants["mode"]
        if mode == GATHER:
            axis = axis_in(self.attrs.get("axis", 0), len(shape), self.spec.op)
            out = shape[:axis] + ishape + shape[axis + 1:]
            inner = math.prod(shape[axis + 1:])
            args = [inner, math.prod(ishape), shape[axis], 0, 0] + _arrays([], [])
        elif mode == GATHER_ELEMENTS:
            rank = len(shape)
            axis = axis_in(self.attrs.get("axis", 0), rank, self.spec.op)
            if len(ishape) != rank:
                raise UnsupportedError(f"GatherElements: indices {ishape} and data {shape} differ in rank")
            out = ishape
            args = [axis, shape[axis], 0, 0, rank] + _arrays(ishape, contiguous_strides(shape))
        else:
            b = self.attrs.get("batch_dims", 0)
            k = ishape[-1]
            if b + k > len(shape) or shape[:b] != ishape[:b]:
                raise UnsupportedError(f"GatherND: indices {ishape} do not fit data {shape} (batch_dims {b})")
            out = ishape[:-1] + shape[b + k:]
            inner = math.prod(shape[b + k:])
            strides = contiguous_strides(shape)[b:b + k]
            args = [inner, math.prod(ishape[b:-1]), k, math.prod(shape[b:]), 0] + _arrays(shape[b:b + k], strides)
        _check_size(out)
        return out, pack(f"6I{2 * MAX_RANK}I", math.prod(out), *args)

    def compute(self, call) -> None:
        x, idx = call.inputs[:2]
        out, tail = self._cached(call)
        y = call.output(0, out)
        if y.size:
            call.dispatch("gather.comp", shader_dtype(x), {"mode": self.constants["mode"], "idx64": _idx64(idx)},
                          [x, idx, y, call.error_word()], tail,
                          grid_1d(y.size, WG), [x, idx], [y])


class Scatter(_Indexed):
    """ScatterND and ScatterElements: copy data to the output, then write the updates."""

    def _plan(self, shape, ishape, ushape) -> tuple:
        _check_size(shape)
        if self.spec.op == "ScatterND":
            k = ishape[-1]
            rows = math.prod(ishape[:-1])
            inner = math.prod(shape[k:])
            if k > len(shape) or ushape != ishape[:-1] + shape[k:]:
                raise UnsupportedError(f"ScatterND: updates {ushape} do not fit indices {ishape} / data {shape}")
            arrays = _arrays(shape[:k], contiguous_strides(shape)[:k])
            if self.reduction == 0:
                mode, n = SCATTER_ND, rows * inner
            else:
                mode, n = SCATTER_ND_REDUCE, inner
            args = [inner, k, rows, 0, 0]
        else:
            rank = len(shape)
            axis = axis_in(self.attrs.get("axis", 0), rank, self.spec.op)
            if len(ishape) != rank or ushape != ishape:
                raise UnsupportedError(f"ScatterElements: indices {ishape}, updates {ushape}, data {shape}")
            mode = SCATTER_ELEMENTS
            n = math.prod(ushape) // ushape[axis] if ushape[axis] else 0
            arrays = _arrays(ushape, contiguous_strides(shape))
            args = [axis, shape[axis], 0, 0, rank]
        copy = pack(f"6I{2 * MAX_RANK}I", math.prod(shape), *[0] * (5 + 2 * MAX_RANK))
        return copy, (mode, pack(f"6I{2 * MAX_RANK}I", n, *args, *arrays), n)

    @property
    def reduction(self) -> int:
        name = self.attrs.get("reduction", "none")
        if name not in REDUCTIONS:
            raise UnsupportedError(f"{self.spec.op}: reduction {name!r}")
        return REDUCTIONS[name]

    def compute(self, call) -> None:
        x, idx, upd = call.inputs[:3]
        copy, (mode, tail, n) = self._cached(call)
        y = call.output(0, x.shape)
        if not y.size:
            return
        dtype, i64 = shader_dtype(x), _idx64(idx)
        call.dispatch("scatter.comp", dtype, (COPY, i64, 0), [x, None, None, y, None], copy, grid_1d(y.size, WG),
                      [x], [y])
        if n:
            call.dispatch("scatter.comp", dtype, (mode, i64, self.reduction), [None, idx, upd, y, call.error_word()],
                          tail,
                          grid_1d(n, WG), [idx, upd, y], [y])
