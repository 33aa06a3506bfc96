"""Elementwise ops: binary with full ONNX broadcasting, and unary activations."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, UnsupportedError, pack, shader_dtype

MAX_RANK = 6
MAX_ELEMENTS = 2**32 - 1  # shaders index with 32-bit integers
WORKGROUP = 256


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        dims = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise UnsupportedError(f"shapes {shapes} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of `shape` read as `out` (0 along broadcast dimensions)."""
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    strides, step = [0] * len(out), 1
    for d in range(len(out) - 1, -1, -1):
        strides[d] = step if padded[d] != 1 else 0
        step *= padded[d]
    return strides


def collapse(out: tuple[int, ...], *operand_strides: list[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand."""
    dims: list[int] = []
    strides: list[list[int]] = [[] for _ in operand_strides]
    for d, size in enumerate(out):
        if size == 1:
            continue
        if dims and all(s[-1] == st[d] * size for s, st in zip(strides, operand_strides, strict=False)):
            dims[-1] *= size
            for s, st in zip(strides, operand_strides, strict=False):
                s[-1] = st[d]
            continue
        dims.append(size)
        for s, st in zip(strides, operand_strides, strict=False):
            s.append(st[d])
    return dims or [1], [s or [1] for s in strides]


def _pad(values: list[int]) -> list[int]:
    return values + [0] * (MAX_RANK - len(values))


class Binary(Kernel):
    """Add, Sub, Mul, Div (the manifest's `op` constant picks which)."""

    def __init__(self, *args):
        super().__init__(*args)
        self._plans: dict[tuple, tuple] = {}

    def _plan(self, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple:
        out = broadcast_shape(sa, sb)
        n = math.prod(out)
        if n > MAX_ELEMENTS:
            raise UnsupportedError(f"{out} has {n} elements; shaders index at most {MAX_ELEMENTS}")
        dims, (st_a, st_b) = collapse(out, broadcast_strides(sa, out), broadcast_strides(sb, out))
        if len(dims) > MAX_RANK:
            raise UnsupportedError(f"broadcast of {sa} and {sb} needs rank {len(dims)} > {MAX_RANK}")
        tail = pack("2I18I", n, len(dims), *_pad(dims), *_pad(st_a), *_pad(st_b))
        return out, n, tail

    def compute(self, call) -> None:
        a, b = call.inputs
        key = (a.shape, b.shape)
        plan = self._plans.get(key) or self._plans.setdefault(key, self._plan(a.shape, b.shape))
        out, n, tail = plan
        y = call.output(0, out)
        if n:
            self.dispatch_1d(call, n, WORKGROUP, shader_dtype(a), [a, b, y], tail, [a, b], [y])


class Unary(Kernel):
    """Activations computed per element (the manifest's `op` constant picks which)."""

    alpha_attr = "alpha"
    beta_attr = "beta"

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape)
        n = x.size
        if n:
            alpha = float(self.attrs.get(self.alpha_attr, 0.0))
            beta = float(self.attrs.get(self.beta_attr, 0.0))
            self.dispatch_1d(call, n, WORKGROUP, shader_dtype(x), [x, y], pack("Iff", n, alpha, beta), [x], [y])
