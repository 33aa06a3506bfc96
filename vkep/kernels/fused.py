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

from vkep.kernels.base import MAX_ELEMENTS, Kernel, UnsupportedError
from vkep.kernels.elementwise import broadcast_shape, broadcast_strides, collapse, wide_grid

SHADER = "fused.comp"
# fused.comp's limits and layout (its #defines and specialization constants)
MAX_INPUTS, MAX_OUTPUTS, MAX_RANK, REGISTERS, MAX_STEPS = 8, 4, 6, 16, 16
MODE_FULL, MODE_SCALAR, MODE_STRIDED = 0, 1, 2
KIND_UNARY, KIND_BINARY = 0, 1
MIN_FROM_B, MAX_FROM_C = 0x10000, 0x20000
# the op codes a step may have: unary.comp's float math and activations (not its predicates, logic or Cast),
# binary.comp's arithmetic (not its comparisons, logic, bitwise ops or the steps of Sum and Mean). Not Sin, Cos,
# Tan (their exact argument reduction), Softplus and Mish (log1p's rounding trick): compiled under fused.comp's
# float controls (it keeps NaN) they round differently from unary.comp by an ulp, and a fused group computes
# what its nodes compute, bit for bit (tests/test_fusion.py). Not Tanh, Erf, Gelu and Exp either: unary_mlas.comp
# computes them as MLAS does, which fused.comp leaves out (its compile time)
UNARY = (frozenset(range(0, 25)) | frozenset(range(29, 42)) | {43}) - {13, 14, 15, 35, 37} - {2, 5, 24, 38}
BINARY = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
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
    """A group's steps with registers allocated, as fused.comp's specialization constants."""

    def __init__(self, inputs: int, steps: list[Step], outputs: list[int]):
        if inputs > MAX_INPUTS or len(outputs) > MAX_OUTPUTS or len(steps) > MAX_STEPS:
            raise UnsupportedError(f"a fused group of {inputs} inputs, {len(steps)} steps, {len(outputs)} outputs")
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
            for v in {v for v in step.operands if v is not None}:  # a result read for the last time frees its
                if v >= inputs and last_use[v] == k and v not in outputs:  # register for this step's own
                    free.append(register[v])
            if not free:
                raise UnsupportedError(f"a fused group needs more than {REGISTERS} registers")
            dst = register[inputs + k] = free.pop(0)
            flags = 0
            if step.kind == KIND_UNARY and step.op == OP_CLIP:
                flags |= MIN_FROM_B if len(step.operands) > 1 and step.operands[1] is not None else 0
                flags |= MAX_FROM_C if len(step.operands) > 2 and step.operands[2] is not None else 0
            words.append((step.kind << 16 | step.op, dst | regs[0] << 4 | regs[1] << 8 | regs[2] << 12 | flags,
                          _bits(step.alpha), _bits(step.beta)))
        self.step_words = words  # (code, registers, alpha bits, beta bits) per step
        self.output_registers = sum(register[v] << (4 * j) for j, v in enumerate(outputs))

    def step_constants(self, prefix: str = "") -> dict[str, int]:
        """The steps as specialization constants (fused.comp's CODE_k, REGS_k, ALPHA_k, BETA_k; epilogue.glsl's
        the same after its prefix EPI_)."""
        return {f"{prefix}{name}_{k}": value for k, step in enumerate(self.step_words)
                for name, value in zip(("CODE", "REGS", "ALPHA", "BETA"), step, strict=True)}

    def plan(self, shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], dict[str, int], bytes | None]:
        """(output shape, specialization constants but WIDE, the layout words of STRIDED inputs as bytes, or None)
        for inputs of these shapes."""
        out = broadcast_shape(*shapes)
        dims, strides = collapse(out, *(broadcast_strides(s, out) for s in shapes))
        if len(dims) > MAX_RANK:
            raise UnsupportedError(f"a fused broadcast of {shapes} needs rank {len(dims)} > {MAX_RANK}")
        n = math.prod(out)
        modes = [MODE_SCALAR if math.prod(s) == 1 else MODE_FULL if math.prod(s) == n else MODE_STRIDED
                 for s in shapes]
        words = None
        if MODE_STRIDED in modes:
            values = [len(dims)] + _padded(dims, MAX_RANK) + [w for st in strides for w in _padded(st, MAX_RANK)]
            words = struct.pack(f"<{len(values)}I", *values)
        constants = {"INPUTS": self.inputs, "STEPS": len(self.steps), "OUTPUTS": len(self.outputs),
                     "MODES": sum(m << (2 * k) for k, m in enumerate(modes)), "OUT_REGS": self.output_registers,
                     **self.step_constants()}  # (WIDE comes with the element count)
        return out, constants, words


def _padded(values, count: int) -> list[int]:
    return (list(values) + [0] * count)[:count]


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


class FusedElementwise(Kernel):
    """The kernel of a fused group (made by vkep/ort/fusion.py from the graph ORT compiles, not from the
    manifest): one dispatch over the group's output shape."""

    def __init__(self, spec, program: Program, dtype: str):
        super().__init__(spec, {}, 1, [dtype] * program.inputs)  # (constants too)
        self.program = program
        self.dtype = dtype
        self.constant_tensors: list = []  # the group's constants, after its inputs (uploaded once, persistent)

    def compute(self, call) -> None:
        inputs = list(call.inputs) + self.constant_tensors
        shapes = [t.shape for t in inputs]
        out, constants, words = self.planned(tuple(shapes), lambda: self.program.plan(shapes))
        n = math.prod(out)
        if n > MAX_ELEMENTS:
            raise UnsupportedError(f"{out} has {n:,} elements; shaders index at most {MAX_ELEMENTS:,}")
        outputs = [call.output(j, out, self.dtype) for j in range(len(self.program.outputs))]
        if not n or not outputs:  # (no output: a group whose value no one reads)
            return
        layout = call.persistent(words) if words else None
        wide, grid = wide_grid(n)
        call.dispatch(SHADER, self.dtype, {"WIDE": wide, **constants},
                      {"y": outputs, "x": inputs, "layout_words": layout, "n": n}, grid,
                      [*inputs, layout] if layout else list(inputs), outputs)
