"""Index-driven ops: Gather, GatherElements, GatherND (gather.comp) and ScatterND, ScatterElements
(scatter.comp). Indices stay on the device: the shaders read them, wrap negatives, clamp, and report one out of range
(the run then fails, as on ORT's CPU EP: shaders/common.glsl, gpu.stream.IndexOutOfRange)."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, Tensor, UnsupportedError, axis_in, grid_1d, shader_dtype
from vkep.kernels.movement import MAX_RANK, WG, _check_size, contiguous_strides
from vkep.kernels.nonzero import place_nonzero

GATHER, GATHER_ELEMENTS, GATHER_ND = 0, 1, 2
COPY, SCATTER_ND, SCATTER_ND_REDUCE, SCATTER_ELEMENTS = 0, 1, 2, 3
REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def _idx64(t) -> int:
    if t.dtype not in ("int64", "int32"):
        raise UnsupportedError(f"indices of type {t.dtype}")
    return int(t.dtype == "int64")


def _members(n: int, p: list[int], rank: int = 0, dims=(), strides=()) -> dict:
    """gather.comp's and scatter.comp's push members but the tensors: n, the mode's parameters p0..p3, and
    rank, dims and strides where the mode walks every dimension."""
    if len(dims) > MAX_RANK:
        raise UnsupportedError(f"rank {len(dims)} > {MAX_RANK}")
    p = list(p) + [0] * (4 - len(p))
    return {"n": n, "p0": p[0], "p1": p[1], "p2": p[2], "p3": p[3], "rank": rank, "dims": list(dims),
            "strides": list(strides)}


class _Indexed(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        """GatherElements and ScatterElements address every dimension of the indices."""
        if spec.op in ("GatherElements", "ScatterElements", "Scatter") and any((r or 0) > MAX_RANK for r in input_ranks):
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
            members = _members(math.prod(out), [inner, math.prod(ishape), shape[axis]])
        elif mode == GATHER_ELEMENTS:
            rank = len(shape)
            axis = axis_in(self.attrs.get("axis", 0), rank, self.spec.op)
            if len(ishape) != rank:
                raise UnsupportedError(f"GatherElements: indices {ishape} and data {shape} differ in rank")
            out = ishape
            members = _members(math.prod(out), [axis, shape[axis]], rank, ishape, contiguous_strides(shape))
        else:
            b = self.attrs.get("batch_dims", 0)
            k = ishape[-1]
            if b + k > len(shape) or shape[:b] != ishape[:b]:
                raise UnsupportedError(f"GatherND: indices {ishape} do not fit data {shape} (batch_dims {b})")
            out = ishape[:-1] + shape[b + k:]
            inner = math.prod(shape[b + k:])
            strides = contiguous_strides(shape)[b:b + k]
            members = _members(math.prod(out), [inner, math.prod(ishape[b:-1]), k, math.prod(shape[b:])], 0,
                               shape[b:b + k], strides)
        _check_size(out)
        return out, members

    def compute(self, call) -> None:
        x, idx = call.inputs[:2]
        out, members = self._cached(call)
        y = call.output(0, out)
        if y.size:
            call.dispatch("gather.comp", shader_dtype(x), {**self.constants, "idx64": _idx64(idx)},
                          {**members, "x": x, "idx": idx, "y": y, "err": call.error_word()},
                          grid_1d(y.size, WG), [x, idx], [y])


class Scatter(_Indexed):
    """ScatterND and ScatterElements (and Scatter, its name before opset 11): copy data to the output, then write the updates."""

    def _plan(self, shape, ishape, ushape) -> tuple:
        _check_size(shape)
        if self.spec.op == "ScatterND":
            k = ishape[-1]
            rows = math.prod(ishape[:-1])
            inner = math.prod(shape[k:])
            if k > len(shape) or ushape != ishape[:-1] + shape[k:]:
                raise UnsupportedError(f"ScatterND: updates {ushape} do not fit indices {ishape} / data {shape}")
            if self.reduction == 0:
                mode, n = SCATTER_ND, rows * inner
            else:
                mode, n = SCATTER_ND_REDUCE, inner
            members = _members(n, [inner, k, rows], 0, shape[:k], contiguous_strides(shape)[:k])
        else:
            rank = len(shape)
            axis = axis_in(self.attrs.get("axis", 0), rank, self.spec.op)
            if len(ishape) != rank or ushape != ishape:
                raise UnsupportedError(f"ScatterElements: indices {ishape}, updates {ushape}, data {shape}")
            mode = SCATTER_ELEMENTS
            n = math.prod(ushape) // ushape[axis] if ushape[axis] else 0
            members = _members(n, [axis, shape[axis]], rank, ushape, contiguous_strides(shape))
        return _members(math.prod(shape), []), (mode, members)

    @property
    def reduction(self) -> int:
        name = self.attrs.get("reduction", "none")
        if name not in REDUCTIONS:
            raise UnsupportedError(f"{self.spec.op}: reduction {name!r}")
        return REDUCTIONS[name]

    def compute(self, call) -> None:
        x, idx, upd = call.inputs[:3]
        copy, (mode, members) = self._cached(call)
        y = call.output(0, x.shape)
        if not y.size:
            return
        dtype, i64 = shader_dtype(x), _idx64(idx)
        call.dispatch("scatter.comp", dtype, {"mode": COPY, "idx64": i64, "reduce": 0},
                      {**copy, "x": x, "idx": None, "upd": None, "y": y, "err": None}, grid_1d(y.size, WG), [x], [y])
        if members["n"]:
            call.dispatch("scatter.comp", dtype, {"mode": mode, "idx64": i64, "reduce": self.reduction},
                          {**members, "x": None, "idx": idx, "upd": upd, "y": y, "err": call.error_word()},
                          grid_1d(members["n"], WG), [idx, upd, y], [y])


class Compress(Kernel):
    """Compress: the slices along `axis` (absent: the elements of x flattened) whose condition entry is true. The
    kept indices are the condition's NonZero coordinates (nonzero.place_nonzero: their count read back sizes the
    output), then a Gather along the axis. A condition longer than the axis counts only its first entries, a
    shorter one drops the slices past it (as ORT's CPU EP)."""

    def compute(self, call) -> None:
        x, condition = call.inputs[:2]
        axis = self.attrs.get("axis")
        shape = x.shape if axis is not None else (x.size,)
        axis = axis_in(axis if axis is not None else 0, len(shape), self.spec.op)
        n = min(condition.size, shape[axis])
        kept: list[Tensor] = []

        def indices(total: int) -> Tensor:
            kept.append(call.scratch((max(total, 1),), "int64"))
            return kept[0]

        total = place_nonzero(call, condition, n, (n,), indices)
        out = shape[:axis] + (total,) + shape[axis + 1:]
        y = call.output(0, out)
        if y.size:
            members = _members(y.size, [math.prod(shape[axis + 1:]), total, shape[axis]])
            call.dispatch("gather.comp", shader_dtype(x), {"mode": GATHER, "idx64": 1},
                          {**members, "x": x, "idx": kept[0], "y": y, "err": call.error_word()},
                          grid_1d(y.size, WG), [x, kept[0]], [y])
