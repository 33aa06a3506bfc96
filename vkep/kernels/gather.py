"""Index-driven ops: Gather, GatherElements, GatherND (gather.comp), ScatterND, ScatterElements, TensorScatter
(scatter.comp) and com.microsoft GatherBlockQuantized (gather_block_quantized.comp). Indices stay on the device: the
shaders read them, wrap negatives, clamp, and report one out of range (the run then fails, as on ORT's CPU EP:
shaders/common.glsl, gpu.stream.IndexOutOfRange); GatherBlockQuantized gives zeros for one, as the CPU EP does."""

from __future__ import annotations

import math

from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    declines_float64,
    grid_1d,
    moved_dtype,
    shader_dtype,
    value_variant,
)
from vkep.kernels.movement import MAX_RANK, WG, _check_size, contiguous_strides
from vkep.kernels.nonzero import place_nonzero

GATHER, GATHER_ELEMENTS, GATHER_ND = 0, 1, 2
COPY, SCATTER_ND, SCATTER_ND_REDUCE, SCATTER_ELEMENTS, TENSOR_SCATTER = 0, 1, 2, 3, 4
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


def _chunks(length: int, most: int) -> list[tuple[int, int]]:
    """[first, end) runs of at most `most` covering range(length) (one, empty, for 0)."""
    return [(first, min(first + most, length)) for first in range(0, length, most)] or [(0, 0)]


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
            call.dispatch("gather.comp", moved_dtype(x), {**self.constants, "idx64": _idx64(idx)},
                          {**members, "x": x, "idx": idx, "y": y, "err": call.error_word()},
                          grid_1d(y.size, WG), [x, idx], [y])


class Scatter(_Indexed):
    """ScatterND and ScatterElements (and Scatter, its name before opset 11): copy data to the output, then write the
    updates. float64 moves as int64, and reduces in double (scatter.comp's FLOAT64 variant)."""

    computes_float64 = True  # (with a reduction: declines_on)

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types: list[str | None]) -> str | None:
        """(float64 with a reduction computes in double: shaderFloat64; without one it only moves)"""
        return declines_float64(info, input_types) if attrs.get("reduction", "none") != "none" else None

    def _plan(self, shape, ishape, ushape) -> tuple:
        _check_size(shape)
        if self.spec.op == "ScatterND":
            k = ishape[-1]
            rows = math.prod(ishape[:-1])
            inner = math.prod(shape[k:])
            if k > len(shape) or ushape != ishape[:-1] + shape[k:]:
                raise UnsupportedError(f"ScatterND: updates {ushape} do not fit indices {ishape} / data {shape}")
            if self.reduction == 0:
                mode, n, chunks = SCATTER_ND, rows * inner, [(0, rows)]
            else:
                # (an invocation walks the rows in order, each its K indices: K + 2 loop steps a row; a dispatch
                # takes as many rows as lavapipe's loop count allows, the next one the rows after them)
                mode, n = SCATTER_ND_REDUCE, inner
                chunks = _chunks(rows, max(1, (LOOP_BUDGET - 4) // (k + 2)))
            members = _members(n, [inner, k, rows], 0, shape[:k], contiguous_strides(shape)[:k])
        else:
            rank = len(shape)
            axis = axis_in(self.attrs.get("axis", 0), rank, self.spec.op)
            if len(ishape) != rank or ushape != ishape:
                raise UnsupportedError(f"ScatterElements: indices {ishape}, updates {ushape}, data {shape}")
            mode = SCATTER_ELEMENTS
            # (an invocation walks its update line along the axis in order, and the dimensions twice: a dispatch
            # takes as much of the line as lavapipe's loop count allows, the next one the rest)
            chunks = _chunks(ushape[axis], LOOP_BUDGET - 2 * rank - 4)
            n = math.prod(ushape) // ushape[axis] if ushape[axis] else 0
            members = _members(n, [axis, shape[axis]], rank, ushape, contiguous_strides(shape))
        return _members(math.prod(shape), []), (mode, members, chunks)

    @property
    def reduction(self) -> int:
        name = self.attrs.get("reduction", "none")
        if name not in REDUCTIONS:
            raise UnsupportedError(f"{self.spec.op}: reduction {name!r}")
        return REDUCTIONS[name]

    def compute(self, call) -> None:
        x, idx, upd = call.inputs[:3]
        copy, (mode, members, chunks) = self._cached(call)
        y = call.output(0, x.shape)
        if not y.size:
            return
        moved, i64 = moved_dtype(x), _idx64(idx)
        call.dispatch("scatter.comp", moved, {"mode": COPY, "idx64": i64, "reduce": 0},
                      {**copy, "x": x, "idx": None, "upd": None, "y": y, "err": None}, grid_1d(y.size, WG), [x], [y])
        if members["n"]:
            dtype = value_variant(x) if self.reduction else moved
            # (in order: each dispatch reduces into what the one before left; the walks of ScatterND's reduction and
            # ScatterElements take [p3, p2), the other mode ignores them)
            for first, end in chunks:
                call.dispatch("scatter.comp", dtype, {"mode": mode, "idx64": i64, "reduce": self.reduction},
                              {**members, "p3": first, "p2": end, "x": None, "idx": idx, "upd": upd, "y": y,
                               "err": call.error_word()}, grid_1d(members["n"], WG), [idx, upd, y], [y])


class TensorScatter(Kernel):
    """TensorScatter (opset 24, a KV cache updated in place): the cache copied to the output unless ORT gave it the
    cache's memory (the manifest's alias), then the update's rows written from write_indices[b] along `axis`,
    wrapping in circular mode. Indices as ORT's CPU EP checks them: a negative one, or in linear mode one whose
    rows pass the end, fails the run."""

    def _plan(self, shape: tuple[int, ...], ushape: tuple[int, ...]) -> tuple:
        _check_size(shape)
        rank = len(shape)
        axis = axis_in(self.attrs["axis"], rank, "TensorScatter")
        mode = self.attrs["mode"]
        if axis == 0 or mode not in ("linear", "circular"):
            raise UnsupportedError(f"TensorScatter: axis {self.attrs['axis']} / mode {mode!r}")
        if len(ushape) != rank or any(u != c for k, (u, c) in enumerate(zip(ushape, shape, strict=True)) if k != axis) or \
                ushape[axis] > shape[axis]:
            raise UnsupportedError(f"TensorScatter: update {ushape} does not fit the cache {shape} on axis {axis}")
        per_batch = math.prod(shape[1:axis])  # (rows of the outer index a batch spans)
        members = _members(math.prod(ushape), [math.prod(shape[axis + 1:]), ushape[axis], shape[axis],
                                                int(mode == "circular")], 1, [per_batch])
        return _members(math.prod(shape), []), members

    def compute(self, call) -> None:
        cache, update = call.inputs[:2]
        write = call.inputs[2] if len(call.inputs) > 2 else None
        if write is not None and (write.dtype != "int64" or write.shape != cache.shape[:1]):
            raise UnsupportedError(f"TensorScatter: write_indices {write.shape} {write.dtype} for cache {cache.shape}")
        copy, members = self.planned((cache.shape, update.shape), lambda: self._plan(cache.shape, update.shape))
        y = call.output(0, cache.shape)
        if not y.size:
            return
        dtype = shader_dtype(cache)
        if y.addr != cache.addr:  # (ORT aliased the output to the cache: it is already there)
            call.dispatch("scatter.comp", dtype, {"mode": COPY, "idx64": 1, "reduce": 0},
                          {**copy, "x": cache, "idx": None, "upd": None, "y": y, "err": None}, grid_1d(y.size, WG),
                          [cache], [y])
        if members["n"]:
            call.dispatch("scatter.comp", dtype, {"mode": TENSOR_SCATTER, "idx64": 1, "reduce": 0},
                          {**members, "x": None, "idx": write, "upd": update, "y": y, "err": call.error_word()},
                          grid_1d(members["n"], WG), [t for t in (write, update, y) if t is not None], [y])


class GatherBlockQuantized(Kernel):
    """com.microsoft GatherBlockQuantized (gather_block_quantized.comp): Gather along gather_axis of a table
    quantized in blocks of block_size along quantize_axis, dequantized as read. int4 / uint4 data (zero point 0
    where none is given), or uint8 holding two 4-bit values a byte (bits 4, zero point 8) or one (bits 8,
    zero point 128) with gather_axis 0 and quantize_axis last, the packing of ORT's MatMulNBits quantizer."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        block, bits = attrs.get("block_size", 128), attrs.get("bits", 4)
        if block < 16 or block & (block - 1):
            return f"block_size={block}: not a power of 2 from 16 (the CPU EP refuses it)"
        if bits not in ((4, 8) if input_types[0] == "uint8" else (4,)):
            return f"bits={bits} with {input_types[0]} data"
        return None

    def compute(self, call) -> None:
        data, idx, scale = call.inputs[:3]
        zp = call.inputs[3] if len(call.inputs) > 3 else None
        out_shape, members, constants = self.planned(
            (data.shape, idx.shape, scale.shape, zp.shape if zp is not None else None, data.dtype),
            lambda: self._plan(data, idx, scale, zp))
        y = call.output(0, out_shape, shader_dtype(scale))
        if y.size:
            call.dispatch(self.spec.shader, shader_dtype(scale), {**constants, "idx64": _idx64(idx)},
                          {**members, "data": data, "idx": idx, "scale": scale, "zp": zp, "y": y, "n": y.size},
                          grid_1d(y.size, WG), [t for t in (data, idx, scale, zp) if t is not None], [y])

    def _plan(self, data, idx, scale, zp) -> tuple:
        op, shape, rank = self.spec.op, data.shape, len(data.shape)
        g = axis_in(self.attrs.get("gather_axis", 0), rank, op)
        q = axis_in(self.attrs.get("quantize_axis", 1), rank, op)
        bits, bsize = self.attrs.get("bits", 4), self.attrs.get("block_size", 128)
        packed = data.dtype == "uint8"
        per_byte = 8 // bits if packed else 1  # (uint8: elements a byte, the last dimension's)
        if packed and (g != 0 or q != rank - 1):
            raise UnsupportedError(f"{op}: uint8 data needs gather_axis 0 and quantize_axis last ({g}, {q})")
        qdim = shape[q] * per_byte
        blocks = -(-qdim // bsize)
        want = tuple(blocks if d == q else n for d, n in enumerate(shape))
        if scale.shape != want:
            raise UnsupportedError(f"{op}: scales {scale.shape} for data {shape} in blocks of {bsize}")
        if zp is not None:
            zp_want = tuple(-(-blocks // per_byte) if d == q else n for d, n in enumerate(want))
            if zp.shape != zp_want or zp.dtype != data.dtype:
                raise UnsupportedError(f"{op}: zero points {zp.shape} with scales {scale.shape}")
        out = shape[:g] + idx.shape + shape[g + 1:]
        if data.size == 0 and math.prod(out):  # (every index out of range of an empty table: zeros, not done)
            raise UnsupportedError(f"{op}: indices into an empty table {shape}")
        if packed:
            out = out[:-1] + (out[-1] * per_byte,)
        _check_size(out)
        _check_size((data.size * per_byte,))
        qn = math.prod(shape[q + 1:])
        rowlen = blocks * qn
        members = {"block": math.prod(shape[g + 1:]) * per_byte, "count": max(idx.size, 1), "axis_len": shape[g],
                   "qdim": qdim, "qn": max(qn, 1), "blocks": blocks, "bsize": bsize,
                   "zp_stride": 2 * -(-rowlen // 2) if packed and bits == 4 else rowlen}
        constants = {"bits": 8 if packed and bits == 8 else 4, "signed": int(data.dtype == "int4"),
                     "default_zp": (1 << (bits - 1)) if packed else 0}
        return out, members, constants


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
