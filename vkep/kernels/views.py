"""Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout at inference: a new shape over the same bytes.

The manifest lets ORT alias output 0 to input 0; when it does, nothing is recorded at all. When it
does not (e.g. the output is a graph output), the bytes are copied: by a dispatch of strided_copy.comp over
32-bit words where the size allows (a dispatch replays natively: docs/design.md, "The replay contract"),
else by a device copy.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from vkep.kernels import random
from vkep.kernels.base import Kernel, Tensor, UnsupportedError, axis_in, grid_1d, moved_dtype, shader_dtype
from vkep.kernels.movement import GATHER, WG, strided_members


def copy_bytes(call, x: Tensor, y: Tensor) -> None:
    """y = x's bytes (or nothing where ORT aliased them)."""
    if x.addr == y.addr or not y.nbytes or y.nbytes % 4 or x.addr % 4 or y.addr % 4:
        call.copy(x, y)
        return
    words = y.nbytes // 4
    xw, yw = Tensor(x.addr, (words,), "int32", x.io), Tensor(y.addr, (words,), "int32", y.io)
    call.dispatch("strided_copy.comp", shader_dtype(xw), {"mode": GATHER, "sub": 0},
                  {**strided_members(words, [words], 0, [1]), "x": xw, "y": yw}, grid_1d(words, WG), [xw], [yw])


class View(Kernel):
    def compute(self, call) -> None:
        x = call.inputs[0]
        shape = getattr(self, "_" + self.spec.op.lower())(call, x.shape)
        if math.prod(shape) != x.size:
            raise UnsupportedError(f"{self.spec.op}: cannot view {x.shape} as {shape}")
        y = call.output(0, tuple(shape))
        copy_bytes(call, x, y)

    def _axes(self, call, index: int) -> list[int]:
        """Axes from the attribute (older opsets) or from the CPU input `index` (opset 13+)."""
        if len(call.inputs) > index and call.inputs[index] is not None:
            data = call.read_host(call.inputs[index])
            return list(struct.unpack(f"<{len(data) // 8}q", data))
        return list(self.attrs.get("axes") or [])

    def _reshape(self, call, shape):
        # (opsets 1-4: the shape is an attribute)
        target = self._axes(call, 1) if self.since_version >= 5 else list(self.attrs.get("shape") or [])
        allowzero = self.attrs.get("allowzero", 0)
        out = [shape[i] if (d == 0 and not allowzero and i < len(shape)) else d for i, d in enumerate(target)]
        if out.count(-1) > 1:
            raise UnsupportedError(f"Reshape: more than one -1 in {target}")
        if -1 in out:
            known = math.prod(d for d in out if d != -1)
            out[out.index(-1)] = math.prod(shape) // known if known else 0
        return out

    def _flatten(self, call, shape):
        axis = axis_in(self.attrs["axis"], len(shape), "Flatten", inclusive_end=True)
        return [math.prod(shape[:axis]), math.prod(shape[axis:])]

    def _squeeze(self, call, shape):
        axes = {axis_in(a, len(shape), "Squeeze") for a in self._axes(call, 1)}
        if not axes:
            return [d for d in shape if d != 1]
        if any(shape[a] != 1 for a in axes):
            raise UnsupportedError(f"Squeeze: axes {sorted(axes)} of {shape} are not all 1")
        return [d for i, d in enumerate(shape) if i not in axes]

    def _unsqueeze(self, call, shape):
        axes = self._axes(call, 1)
        rank = len(shape) + len(axes)
        axes = sorted(axis_in(a, rank, "Unsqueeze") for a in axes)
        out = list(shape)
        for a in axes:
            out.insert(a, 1)
        return out

    def _expanddims(self, call, shape):
        """com.microsoft ExpandDims: a 1 inserted at the int32 scalar input `axis` (-1: after the last)."""
        (axis,) = struct.unpack("<i", call.read_host(call.inputs[1])[:4])
        out = list(shape)
        out.insert(axis_in(axis, len(shape) + 1, "ExpandDims"), 1)
        return out

    def _identity(self, call, shape):
        return list(shape)


class Dropout(Kernel):
    """Dropout: at inference the output is the input (aliased where ORT allows), the optional mask all true
    (fill.comp). In training mode (opset 12 on, its ratio and training_mode read on the host) the values the CPU EP
    draws (random.draw_dropout); float64 X in training mode is left to the CPU EP."""

    draws_on = True  # (training mode: a new engine each run, seeded by the runs before)

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if len(input_ranks) > 2 and input_ranks[2] is not None and input_types and input_types[0] == "float64":
            return "float64 Dropout with a training_mode input (its draws are float32 only here)"
        return None

    def __init__(self, *args):
        super().__init__(*args)
        self.seed = random.dropout_seed(self.attrs.get("seed"))

    def training_ratio(self, call) -> float | None:
        """The ratio where this run drops values (training_mode true and ratio not 0), else None; an error where the
        CPU EP fails the run (a ratio outside [0, 1) or of more than one value)."""
        inputs = list(call.inputs) + [None, None]
        ratio, training = inputs[1], inputs[2]
        value = 0.5
        if ratio is not None:
            values = np.frombuffer(call.read_host(ratio), ratio.dtype)
            if values.size != 1:
                raise UnsupportedError("Dropout: ratio input should have a single value (the CPU EP fails the run)")
            value = float(np.float32(values[0]))
            if not 0.0 <= value < 1.0:
                raise UnsupportedError(f"Dropout: ratio {value} is outside [0, 1) (the CPU EP fails the run)")
        if training is None or not training.size or not call.read_host(training)[0] or value == 0.0:
            return None
        return value

    def compute(self, call) -> None:
        x = call.inputs[0]
        ratio = self.training_ratio(call) if self.since_version >= 12 else None
        if ratio is not None:
            if x.dtype == "float64":
                raise UnsupportedError("float64 Dropout in training mode")
            y = call.output(0, x.shape)
            mask = call.output(1, x.shape, "bool") if (self.output_count or 1) > 1 else None
            if x.size:
                random.draw_dropout(call, self.seed, ratio, x, y, mask)
            return
        copy_bytes(call, x, call.output(0, x.shape))
        if (self.output_count or 1) > 1:  # (opsets 7-9: a mask of X's type, all 0 from ORT's CPU EP)
            old = self.since_version < 10
            mask = call.output(1, x.shape, x.dtype if old else "bool")
            if mask.size:
                call.dispatch(self.spec.shader, moved_dtype(mask), self.constants,  # (opsets 7-9: 0 in any type)
                              {"y": mask, "start": 0 if old else 1, "delta": 0, "n": mask.size},
                              grid_1d(mask.size, WG), [], [mask])
