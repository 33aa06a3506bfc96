"""Data movement through one strided-gather shader (strided_copy.comp): Transpose, Slice, Expand, Tile,
Pad, DepthToSpace, SpaceToDepth, Trilu, Split; and Concat (concat.comp, up to 8 inputs a dispatch).

Every output element reads exactly one input element, so all of these are type-agnostic: a plan per
input shape (and CPU-input values) gives the collapsed dims and strides for the shader.
"""

from __future__ import annotations

import math
import struct

from vkep.kernels.base import (
    ITEMSIZE,
    MAX_ELEMENTS,
    NIBBLE_TYPES,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    fast_divisor,
    float_bits,
    grid_1d,
    moved_dtype,
    shader_dtype,
)
from vkep.kernels.elementwise import broadcast_shape, broadcast_strides

MAX_RANK = 6
# strided_copy, concat, gather, scatter, fill and resize.comp's local size: 64, not 256, for lavapipe's sake
# (elementwise.WORKGROUP says why; tests/test_gpu.py reads it back from the SPIR-V)
WG = 64
GATHER, TILE, PAD, TRILU = 0, 1, 2, 3
PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}
HOST_FORMAT = {"int64": "q", "int32": "i", "int16": "h", "int8": "b", "uint8": "B", "bool": "?", "float32": "f",
               "float16": "e", "float64": "d", "uint16": "H", "uint32": "I", "uint64": "Q"}


def host_values(call, t: Tensor | None) -> list | None:
    """The values of a CPU input (None when the optional input is absent)."""
    if t is None:
        return None
    data = call.read_host(t)
    return list(struct.unpack(f"<{t.size}{HOST_FORMAT[t.dtype]}", data)) if t.size else []


def optional_input(call, index: int) -> Tensor | None:
    return call.inputs[index] if len(call.inputs) > index else None


def contiguous_strides(shape) -> list[int]:
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= shape[d]
    return strides


def _check_size(shape) -> None:
    if math.prod(shape) > MAX_ELEMENTS:
        raise UnsupportedError(f"{tuple(shape)} has more elements than shaders index ({MAX_ELEMENTS})")


def strided_members(n: int, dims, offset: int = 0, a=(), b=(), c=()) -> dict:
    """strided_copy.comp's push members but the tensors: n, rank, offset, shape, and the per-dim int arrays
    a, b, c whose meaning the MODE picks (shorter arrays are padded with 0 when encoded). Where b and c are not
    given (MODE 0 and 1), they are the dims' divisors for fast_div."""
    if len(dims) > MAX_RANK:
        raise UnsupportedError(f"strided copy needs rank {len(dims)} > {MAX_RANK}")
    if not b and not c:
        divisors = [fast_divisor(d) for d in dims]
        b, c = [int32_bits(m) for m, _ in divisors], [s for _, s in divisors]
    return {"n": n, "rank": len(dims), "offset": offset, "shape": list(dims), "a": list(a), "b": list(b),
            "c": list(c)}


def int32_bits(word: int) -> int:
    """A 32-bit word (e.g. half of a pad value's bits) as the int32 it is stored as in an `int` member."""
    return word - (1 << 32) if word >= 1 << 31 else word


def gather_members(out_shape, strides, offset: int) -> dict:
    """strided_copy.comp's push members (but the tensors) of a MODE 0 dispatch: size-1 dims dropped, neighbours
    that stay contiguous in the input merged (the output is always contiguous)."""
    dims: list[int] = []
    st: list[int] = []
    for size, stride in zip(out_shape, strides, strict=True):
        if size == 1:
            continue
        if dims and st[-1] == stride * size:
            dims[-1] *= size
            st[-1] = stride
            continue
        dims.append(size)
        st.append(stride)
    _check_size(out_shape)
    return strided_members(math.prod(out_shape), dims, offset, st)


WORD = 8  # bytes a gather moves at once where it can (words_of)


def word_elements(dtype: str, tensors) -> int:
    """Elements of `dtype` an 8-byte word holds where a move may take words instead (the int64 variant: lavapipe's
    time is its lane loads and stores, whatever their width) and every tensor starts on a word, else 0."""
    size = ITEMSIZE[dtype]
    if dtype in NIBBLE_TYPES or size >= WORD or WORD % size or any(t.addr % WORD for t in tensors):
        return 0
    return WORD // size


def words_of(members: dict, x: Tensor, y: Tensor) -> tuple[dict, str] | None:
    """A gather's members (MODE 0) over 8-byte words, and the variant moving them (int64), where its innermost run,
    every other stride and the offset are whole words and both tensors start on one (word_elements): a channel
    shuffle's Transpose or a Slice of whole rows moves 2 floats a lane."""
    per = word_elements(x.dtype, (x, y))
    dims, strides = list(members["shape"]), list(members["a"])
    if (not per or not dims or strides[-1] != 1 or dims[-1] % per or members["offset"] % per
            or any(st % per for st in strides[:-1])):
        return None
    return strided_members(members["n"] // per, dims[:-1] + [dims[-1] // per], members["offset"] // per,
                           [st // per for st in strides[:-1]] + [1]), "int64"


def dispatch_gather_members(call, x: Tensor, y: Tensor, members: dict) -> None:
    """y = strided_copy.comp's gather (MODE 0) of x by `members`, in words where it can (words_of)."""
    words = words_of(members, x, y)
    members, dtype = words if words is not None else (members, moved_dtype(x))
    call.dispatch("strided_copy.comp", dtype, {"mode": GATHER, "sub": 0}, {**members, "x": x, "y": y},
                  grid_1d(members["n"], WG), [x], [y])


def dispatch_gather(call, x: Tensor, y: Tensor, shape, strides) -> None:
    """y (contiguous, `shape`) = x read at element `strides`, in one dispatch of strided_copy.comp: for kernels that
    move a layout in their own work (a transpose into scratch memory and back)."""
    call.dispatch("strided_copy.comp", moved_dtype(x), {"mode": GATHER, "sub": 0},
                  {**gather_members(shape, strides, 0), "x": x, "y": y}, grid_1d(math.prod(shape), WG), [x], [y])


class Strided(Kernel):
    """Base: `_plan(call)` returns (output shape, push members but x and y, strided_copy.comp's MODE and SUB)
    and is cached per key."""

    def _key(self, call) -> tuple:
        return (call.inputs[0].shape,)

    def compute(self, call) -> None:
        x = call.inputs[0]
        shape, members, (mode, sub) = self.planned(self._key(call), lambda: self._plan(call))
        y = call.output(0, shape)
        if y.size and mode == GATHER:
            dispatch_gather_members(call, x, y, members)
        elif y.size:
            call.dispatch("strided_copy.comp", moved_dtype(x), {"mode": mode, "sub": sub}, {**members, "x": x, "y": y},
                          grid_1d(y.size, WG), [x], [y])

    def _plan(self, call) -> tuple:
        raise NotImplementedError


class Transpose(Strided):
    def invalid_attribute(self) -> str | None:
        perm = list(self.attrs.get("perm") or [])
        return f"perm={perm}: not a permutation of 0..{len(perm) - 1}" if sorted(perm) != list(range(len(perm))) else None

    def _plan(self, call):
        shape = call.inputs[0].shape
        perm = list(self.attrs.get("perm") or []) or list(range(len(shape)))[::-1]
        if sorted(perm) != list(range(len(shape))):
            raise UnsupportedError(f"Transpose: perm {perm} does not fit rank {len(shape)}")
        strides = contiguous_strides(shape)
        out = [shape[p] for p in perm]
        return tuple(out), gather_members(out, [strides[p] for p in perm], 0), (GATHER, 0)


def slice_plan(shape, starts, ends, axes, steps) -> tuple[list[int], list[int], int]:
    """Output shape, element strides and offset of a Slice, clamped as the ONNX spec says."""
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    strides = contiguous_strides(shape)
    out, st, offset = list(shape), list(strides), 0
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis %= rank
        dim = shape[axis]
        if step == 0:
            raise UnsupportedError("Slice: a step is 0")
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        out[axis] = max(0, -(-(end - start) // step))
        st[axis] = strides[axis] * step
        if out[axis]:
            offset += start * strides[axis]
    return out, st, offset


class Slice(Strided):
    def _key(self, call):
        if self.since_version < 10:
            return (call.inputs[0].shape,)
        return (call.inputs[0].shape,) + tuple(tuple(host_values(call, optional_input(call, i)) or ())
                                                for i in range(1, 5))

    def _plan(self, call):
        shape = call.inputs[0].shape
        if self.since_version < 10:
            starts, ends = list(self.attrs["starts"]), list(self.attrs["ends"])
            axes, steps = list(self.attrs.get("axes") or []) or None, None
        else:
            starts, ends, axes, steps = (host_values(call, optional_input(call, i)) for i in range(1, 5))
        out, st, offset = slice_plan(shape, starts, ends, axes, steps)
        return tuple(out), gather_members(out, st, offset) if math.prod(out) else {}, (GATHER, 0)


class Crop(Strided):
    """ORT's experimental Crop (opsets 1-9): `border` [left, top, right, bottom] cut off [N, C, H, W], or, with
    `scale` [height, width], a window of that size at (top, left). Where ORT's checks fail its run, or it would read
    outside X (negative values), the node is refused."""

    def _key(self, call):
        return (call.inputs[0].shape,)

    def _plan(self, call):
        shape = call.inputs[0].shape
        border, scale = list(self.attrs["border"]), list(self.attrs.get("scale") or [])
        if len(shape) != 4 or len(border) != 4 or len(scale) not in (0, 2) or min(border + scale, default=0) < 0:
            raise UnsupportedError(f"Crop: X {shape}, border {border}, scale {scale}")
        left, top, right, bottom = border
        bottom_limit, right_limit = (top + scale[0], left + scale[1]) if scale else (shape[2] - bottom, shape[3] - right)
        if shape[2] < top + bottom or shape[3] < left + right or bottom_limit > shape[2] or right_limit > shape[3]:
            raise UnsupportedError(f"Crop: border {border}, scale {scale} do not fit X {shape} (ORT fails such a run)")
        out, st, offset = slice_plan(shape, [top, left], [bottom_limit, right_limit], [2, 3], None)
        return tuple(out), gather_members(out, st, offset) if math.prod(out) else {}, (GATHER, 0)


class Expand(Strided):
    def _key(self, call):
        return call.inputs[0].shape, tuple(host_values(call, call.inputs[1]))

    def _plan(self, call):
        shape = call.inputs[0].shape
        out = broadcast_shape(shape, tuple(host_values(call, call.inputs[1])))
        return out, gather_members(out, broadcast_strides(shape, out), 0), (GATHER, 0)


class Tile(Strided):
    def _key(self, call):
        return call.inputs[0].shape, tuple(host_values(call, call.inputs[1]))

    def _plan(self, call):
        shape = call.inputs[0].shape
        reps = host_values(call, call.inputs[1])
        if len(reps) != len(shape) or any(r < 0 for r in reps):
            raise UnsupportedError(f"Tile: repeats {reps} do not fit {shape}")
        out = tuple(d * r for d, r in zip(shape, reps, strict=True))
        dims: list[int] = []
        mods: list[int] = []
        for d, r in zip(shape, reps, strict=True):
            if d * r == 1:
                continue
            if dims and r == 1:  # (c_prev * d + c) mod (m_prev * d) = (c_prev mod m_prev) * d + c
                dims[-1] *= d
                mods[-1] *= d
                continue
            dims.append(d * r)
            mods.append(d)
        _check_size(out)
        return out, strided_members(math.prod(out), dims, 0, mods), (TILE, 0)


class Pad(Strided):
    def _key(self, call):
        return (call.inputs[0].shape,) + tuple(tuple(host_values(call, optional_input(call, i)) or ())
                                                for i in range(1, 4))

    def _plan(self, call):
        x = call.inputs[0]
        shape, rank = x.shape, len(x.shape)
        mode = self.attrs.get("mode", "constant")
        if mode not in PAD_MODES:
            raise UnsupportedError(f"Pad: mode {mode!r}")
        if self.since_version < 11 and not self.spec.domain:  # (com.microsoft Pad 1 takes them as inputs)
            pads = list(self.attrs.get("pads") or self.attrs.get("paddings") or [])
            value = self.attrs.get("value", 0.0)
            axes = None
        else:
            pads = host_values(call, call.inputs[1])
            cv = host_values(call, optional_input(call, 2))
            value = cv[0] if cv else 0
            axes = host_values(call, optional_input(call, 3))
        axes = list(range(rank)) if axes is None else [axis_in(a, rank, "Pad") for a in axes]
        if len(pads) != 2 * len(axes):
            raise UnsupportedError(f"Pad: {len(pads)} pads for {len(axes)} axes")
        begin, end = [0] * rank, [0] * rank
        for k, a in enumerate(axes):
            begin[a], end[a] = pads[k], pads[k + len(axes)]
        out = tuple(d + b + e for d, b, e in zip(shape, begin, end, strict=True))
        if any(d < 0 for d in out):
            raise UnsupportedError(f"Pad: negative output shape {out}")
        _check_size(out)
        if mode == "constant":  # the input is read as contiguous; negative pads need no special case
            dims, ins, bs = _merge_unpadded(out, shape, begin, end)
            if x.dtype == "float64":  # (moved as int64: the value's double bits)
                bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
            elif x.dtype in ("float32", "float16"):
                bits = float_bits(float(value))
            else:
                bits = int(value) & 0xFFFFFFFFFFFFFFFF
            members = strided_members(math.prod(out), dims, 0, ins, bs, [int32_bits(bits & 0xFFFFFFFF),
                                                                          int32_bits(bits >> 32)])
        else:  # negative pads crop first, then the cropped region is padded (as ORT and the reference do)
            strides = contiguous_strides(shape)
            crop_lo = [max(-b, 0) for b in begin]
            region = [d - max(-b, 0) - max(-e, 0) for d, b, e in zip(shape, begin, end, strict=True)]
            if any(r <= 0 for r in region) and math.prod(out):
                raise UnsupportedError(f"Pad: mode {mode} of an empty region")
            offset = sum(c * st for c, st in zip(crop_lo, strides, strict=True))
            members = strided_members(math.prod(out), out, offset, region, [max(b, 0) for b in begin], strides)
        return out, members, (PAD, PAD_MODES[mode])


def _merge_unpadded(out, shape, begin, end) -> tuple[list[int], list[int], list[int]]:
    """Dims (out, in, begin pad) with neighbours that are both unpadded merged into one."""
    dims: list[int] = []
    ins: list[int] = []
    bs: list[int] = []
    for o, d, b, e in zip(out, shape, begin, end, strict=True):
        if dims and b == e == 0 and bs[-1] == 0 and dims[-1] == ins[-1]:
            dims[-1] *= d
            ins[-1] *= d
            continue
        dims.append(o)
        ins.append(d)
        bs.append(b)
    return dims, ins, bs


class DepthToSpace(Strided):
    """A reshape to 6-D, a transpose, a reshape back: one strided gather."""

    def _plan(self, call):
        shape = call.inputs[0].shape
        if len(shape) != 4:
            raise UnsupportedError(f"{self.spec.op} takes a 4-D input, got {shape}")
        n, c, h, w = shape
        b = self.attrs["blocksize"]
        if self.spec.op == "DepthToSpace":
            if c % (b * b):
                raise UnsupportedError(f"DepthToSpace: {c} channels are not a multiple of {b}x{b}")
            cc = c // (b * b)
            if self.attrs.get("mode", "DCR") == "DCR":
                view, perm = (n, b, b, cc, h, w), (0, 3, 4, 1, 5, 2)
            else:
                view, perm = (n, cc, b, b, h, w), (0, 1, 4, 2, 5, 3)
            final = (n, cc, h * b, w * b)
        else:
            if h % b or w % b:
                raise UnsupportedError(f"SpaceToDepth: {h}x{w} is not a multiple of {b}")
            # (opset 28's mode: the block's offsets outside the channels (DCR, the only order before) or inside)
            crd = self.attrs.get("mode", "DCR") == "CRD"
            view, perm = (n, c, h // b, b, w // b, b), (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
            final = (n, c * b * b, h // b, w // b)
        strides = contiguous_strides(view)
        return final, gather_members([view[p] for p in perm], [strides[p] for p in perm], 0), (GATHER, 0)


class Trilu(Strided):
    def _key(self, call):
        return call.inputs[0].shape, tuple(host_values(call, optional_input(call, 1)) or ())

    def _plan(self, call):
        shape = call.inputs[0].shape
        if len(shape) < 2:
            raise UnsupportedError(f"Trilu takes rank >= 2, got {shape}")
        _check_size(shape)
        k = (host_values(call, optional_input(call, 1)) or [0])[0]
        rows, cols = shape[-2:]
        k = max(-rows - 1, min(cols + 1, k))  # beyond the matrix every k keeps all or nothing
        dims = [math.prod(shape[:-2]), rows, cols]
        return shape, strided_members(math.prod(shape), dims, k), (TRILU, int(self.attrs.get("upper", 1)))


class Split(Kernel):
    """One strided gather per output (at most 4 outputs keep the node replayable)."""

    def _sizes(self, call, dim: int) -> list[int]:
        split = host_values(call, optional_input(call, 1)) if self.since_version >= 13 else None
        split = split or list(self.attrs.get("split") or [])
        if split:
            return split
        count = self.attrs.get("num_outputs") or getattr(self, "output_count", None)
        if not count:
            raise UnsupportedError("Split: equal parts need the node's output count (or num_outputs)")
        part = -(-dim // count)  # opset 18: the last part may be smaller
        return [min(part, max(dim - k * part, 0)) for k in range(count)]

    def compute(self, call) -> None:
        x = call.inputs[0]
        key = (x.shape, tuple(host_values(call, optional_input(call, 1)) or ()) if self.since_version >= 13 else ())
        plans = self.planned(key, lambda: self._plan(call, x.shape))
        for j, (shape, members) in enumerate(plans):
            y = call.output(j, shape)
            if y.size:
                dispatch_gather_members(call, x, y, members)

    def _plan(self, call, shape) -> list:
        axis = axis_in(self.attrs.get("axis", 0), len(shape), "Split")
        sizes = self._sizes(call, shape[axis])
        if sum(sizes) != shape[axis] or any(s < 0 for s in sizes):
            raise UnsupportedError(f"Split: sizes {sizes} do not add up to {shape[axis]}")
        strides = contiguous_strides(shape)
        plans, start = [], 0
        for size in sizes:
            out = shape[:axis] + (size,) + shape[axis + 1:]
            plans.append((out, gather_members(out, strides, start * strides[axis]) if math.prod(out) else {}))
            start += size
        return plans


class Concat(Kernel):
    variadic = True

    MAX_INPUTS = 7  # per dispatch: concat.comp's push constants hold 7 inputs + the output

    def _plan(self, shapes: tuple) -> tuple:
        ref = max(shapes, key=len)
        rank = len(ref)
        axis = axis_in(self.attrs["axis"], rank, "Concat")
        for s in shapes:
            if len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, ref, strict=True)) if d != axis):
                raise UnsupportedError(f"Concat: shapes {shapes} differ off axis {axis}")
        total = sum(s[axis] for s in shapes)
        out = ref[:axis] + (total,) + ref[axis + 1:]
        _check_size(out)
        outer, inner = math.prod(ref[:axis]), math.prod(ref[axis + 1:])
        live = [j for j, s in enumerate(shapes) if s[axis]]
        groups, base = [], 0
        for g in range(0, len(live), self.MAX_INPUTS):
            inputs = live[g:g + self.MAX_INPUTS]
            ends, acc = [], 0
            for j in inputs:
                acc += shapes[j][axis]
                ends.append(acc)
            push = {"n": outer * acc * inner, "inner": inner, "gaxis": acc, "axis_total": total, "axis_base": base,
                    "ends": ends}
            groups.append((inputs, push))
            base += acc
        return out, groups

    def compute(self, call) -> None:
        xs = call.inputs
        key = tuple(x.shape for x in xs)
        out, groups = self.planned(key, lambda: self._plan(key))
        y = call.output(0, out)
        if not y.size:
            return
        for inputs, push in groups:
            ins = [xs[j] for j in inputs]  # (x's unused slots are null addresses, their ends 0: never read)
            dtype = moved_dtype(xs[0])
            per = word_elements(y.dtype, (y, *ins))
            if per and push["inner"] % per == 0:  # (whole words a run)
                push, dtype = {**push, "n": push["n"] // per, "inner": push["inner"] // per}, "int64"
            call.dispatch("concat.comp", dtype, {}, {**push, "y": y, "x": ins}, grid_1d(push["n"], WG), ins, [y])


class ReverseSequence(Kernel):
    """ReverseSequence: each batch entry's first lens[b] time steps reversed (shaders/reverse_sequence.comp);
    the lengths are read on the device, one out of range fails the run."""

    def compute(self, call) -> None:
        x, lens = call.inputs[:2]
        time_axis, batch_axis = self.attrs.get("time_axis", 0), self.attrs.get("batch_axis", 1)
        if len(x.shape) < 2 or {time_axis, batch_axis} != {0, 1}:
            raise UnsupportedError(f"ReverseSequence: time_axis {time_axis} and batch_axis {batch_axis} must be 0 "
                                   f"and 1 of an input of rank 2 or more (not {len(x.shape)})")
        steps, batches = x.shape[time_axis], x.shape[batch_axis]
        if lens.shape != (batches,):
            raise UnsupportedError(f"ReverseSequence: sequence_lens {list(lens.shape)} for {batches} batch entries")
        y = call.output(0, x.shape)
        if not y.size:
            return
        inner = math.prod(x.shape[2:])
        outer_stride = inner * x.shape[1]  # (axis 0's stride; axis 1's is inner)
        push = {"x": x, "lens": lens, "y": y, "err": call.error_word(), "n": y.size, "steps": steps,
                "batches": batches, "inner": inner,
                "time_stride": outer_stride if time_axis == 0 else inner,
                "batch_stride": outer_stride if batch_axis == 0 else inner}
        call.dispatch("reverse_sequence.comp", shader_dtype(x), {}, push, grid_1d(y.size, WG), [x, lens], [y])
