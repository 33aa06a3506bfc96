"""Elementwise nodes fused into one dispatch of shaders/fused.comp.

vkep/ort/fusion.py picks the groups (at GetCapability) and hands each to ORT to fuse; ORT's Compile then
gives the group back, and `Program` turns it into the shader's program: each node a step over registers, with
unary.comp's and binary.comp's op codes and attributes as the manifest gives them to those shaders.
Elementwise ops commute with broadcasting, so every step runs over the group's output shape: a node whose
output is smaller (a bias computed per channel) is computed per element of the output, from its inputs
broadcast to it.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from vkep.kernels.base import MAX_ELEMENTS, Kernel, UnsupportedError, grid_1d
from vkep.kernels.elementwise import WORKGROUP, broadcast_shape, broadcast_strides, collapse

SHADER = "fused.comp"
# fused.comp's limits and layout (its #defines)
MAX_INPUTS, MAX_OUTPUTS, MAX_RANK, REGISTERS = 8, 4, 6, 16
MODE_FULL, MODE_SCALAR, MODE_STRIDED = 0, 1, 2
KIND_UNARY, KIND_BINARY = 0, 1
MIN_FROM_B, MAX_FROM_C = 0x10000, 0x20000
# the op codes fused.comp's unary_step and binary_step take (unary.comp's and binary.comp's codes)
UNARY = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 24, 29, 30, 33, 34, 35, 38, 40, 43})
BINARY = frozenset({0, 1, 2, 3, 4, 7, 8, 9})
OP_CLIP = 40


@dataclass(frozen=True)
class Step:
    """One node of the group: `operands` are value numbers (the group's inputs 0..n-1, then step k's result
    n + k); Clip's min and max, where given as inputs, are its second and third operands."""

    kind: int
    op: int
    operands: tuple[int | None, ...]
    alpha: float = 0.0
    beta: float = 0.0


class Program:
    """A group's steps with registers allocated: the part of fused.comp's program that shapes do not change."""

    def __init__(self, inputs: int, steps: list[Step], outputs: list[int]):
        if inputs > MAX_INPUTS or len(outputs) > MAX_OUTPUTS:
            raise UnsupportedError(f"a fused group of {inputs} inputs and {len(outputs)} outputs")
        self.inputs, self.steps, self.outputs = inputs, steps, outputs
        last_use = {}
        for k, step in enumerate(steps):
            for v in step.operands:
                if v is not None:
                    last_use[v] = k
        register = {v: v for v in range(inputs)}  # (inputs stay in theirs: a later step may read them)
        free = list(range(inputs, REGISTERS))
        words = []
        for k, step in enumerate(steps):
            regs = [register[v] if v is not None else 0 for v in step.operands] + [0, 0, 0]
            for v in step.operands:  # a result no later step reads frees its register for this step's
                if v is not None and v >= inputs and last_use[v] == k and v not in outputs:
                    free.append(register[v])
            if not free:
                raise UnsupportedError(f"a fused group needs more than {REGISTERS} registers")
            dst = register[inputs + k] = free.pop(0)
            flags = 0
            if step.kind == KIND_UNARY and step.op == OP_CLIP:
                flags |= (MIN_FROM_B if step.operands[1:2] not in ((), (None,)) else 0)
                flags |= (MAX_FROM_C if step.operands[2:3] not in ((), (None,)) else 0)
            words += [step.kind << 16 | step.op, dst | regs[0] << 4 | regs[1] << 8 | regs[2] << 12 | flags,
                      _bits(step.alpha), _bits(step.beta)]
        self.step_words = words
        self.output_registers = [register[v] for v in outputs]

    def words(self, shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], list[int]]:
        """(output shape, the program's words) for inputs of these shapes."""
        out = broadcast_shape(*shapes)
        dims, strides = collapse(out, *(broadcast_strides(s, out) for s in shapes))
        if len(dims) > MAX_RANK:
            raise UnsupportedError(f"a fused broadcast of {shapes} needs rank {len(dims)} > {MAX_RANK}")
        n = math.prod(out)
        header = [len(dims), self.inputs, len(self.steps), len(self.outputs)] + _padded(dims, MAX_RANK)
        per_input = []
        for shape, s in zip(shapes, strides + [[]] * (MAX_INPUTS - len(shapes)), strict=False):
            mode = (MODE_SCALAR if math.prod(shape) == 1 else
                    MODE_FULL if math.prod(shape) == n else MODE_STRIDED)
            per_input += [mode] + _padded(s, MAX_RANK)
        per_input += [0] * ((1 + MAX_RANK) * (MAX_INPUTS - len(shapes)))
        return out, header + per_input + _padded(self.output_registers, MAX_OUTPUTS) + self.step_words


def _padded(values, count: int) -> list[int]:
    return (list(values) + [0] * count)[:count]


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


class FusedElementwise(Kernel):
    """The kernel of a fused group (made by vkep/ort/fusion.py from the graph ORT compiles, not from the
    manifest): one dispatch over the group's output shape."""

    def __init__(self, spec, program: Program, dtype: str):
        super().__init__(spec, {}, 1, [dtype] * program.inputs)
        self.program = program
        self.dtype = dtype

    def compute(self, call) -> None:
        inputs = call.inputs
        shapes = [t.shape for t in inputs]
        out, words = self.planned(tuple(shapes), lambda: self.program.words(shapes))
        n = math.prod(out)
        if n > MAX_ELEMENTS:
            raise UnsupportedError(f"{out} has {n:,} elements; shaders index at most {MAX_ELEMENTS:,}")
        outputs = [call.output(j, out, self.dtype) for j in range(len(self.program.outputs))]
        if not n:
            return
        program = call.persistent(struct.pack(f"<{len(words)}I", *words))
        addresses = _padded_tensors(outputs, MAX_OUTPUTS) + _padded_tensors(inputs, MAX_INPUTS) + [program]
        call.dispatch(SHADER, self.dtype, (), addresses, struct.pack("<I", n), grid_1d(n, WORKGROUP),
                      [*inputs, program], outputs)


def _padded_tensors(tensors: list, count: int) -> list:
    return list(tensors) + [None] * (count - len(tensors))
