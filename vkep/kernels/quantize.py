"""QuantizeLinear and DequantizeLinear (quantize.comp), per tensor or per axis, 8-bit integers."""

from __future__ import annotations

import math

from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    grid_1d,
    pack,
    padded,
    shader_dtype,
)

MODE_QUANTIZE, MODE_DEQUANTIZE = 0, 1
ONNX_8BIT = {2: "uint8", 3: "int8"}  # TensorProto codes of output_dtype


class QuantizeLinear(Kernel):
    """x's type is the scale's on the float side; the zero point's (or output_dtype, or uint8) on the
    integer side. Blocked quantization (block_size) stays on the CPU EP."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("block_size", 0):
            return f"block_size={attrs['block_size']} (blocked quantization)"
        if attrs.get("output_dtype", 0) not in (0, *ONNX_8BIT):
            return f"output_dtype={attrs['output_dtype']}"
        return None

    def compute(self, call) -> None:
        x, scale = call.inputs[:2]
        zp = call.inputs[2] if len(call.inputs) > 2 else None
        if self.constants[0] == MODE_QUANTIZE:
            out = zp.dtype if zp is not None else ONNX_8BIT.get(self.attrs.get("output_dtype", 0), "uint8")
            if scale.dtype != x.dtype:
                raise UnsupportedError(f"QuantizeLinear: x of {x.dtype} with scales of {scale.dtype}")
        else:
            out = scale.dtype
            wanted = self.attrs.get("output_dtype", 0)
            if wanted and wanted != {"float32": 1, "float16": 10}.get(out):
                raise UnsupportedError(f"DequantizeLinear: output_dtype {wanted} with {out} scales")
        if scale.size == 1:
            div = mod = 1
        else:
            axis = axis_in(self.attrs.get("axis", 1), len(x.shape), self.spec.op)
            if scale.shape != (x.shape[axis],) or (zp is not None and zp.shape != scale.shape):
                raise UnsupportedError(f"{self.spec.op}: scale {scale.shape} along axis {axis} of {x.shape}")
            div, mod = math.prod(x.shape[axis + 1:]), x.shape[axis]
        y = call.output(0, x.shape, out)
        if x.size:
            dispatch_quantize(call, self.constants[0], x, scale, zp, y, div, mod)


def dispatch_quantize(call, mode: int, x: Tensor, scale: Tensor, zp: Tensor | None, y: Tensor, div: int,
                      mod: int) -> None:
    """quantize.comp over x: scale and zero point of element g at (g / div) % mod."""
    call.dispatch("quantize.comp", (shader_dtype(x), shader_dtype(y)), (mode,), [x, scale, zp, y],
                  pack("3I", x.size, div, mod), grid_1d(x.size, 256), [t for t in (x, scale, zp) if t is not None], [y])


class DynamicQuantizeLinear(Kernel):
    """y, y_scale, y_zero_point of x (float32 to uint8): the parameters in one workgroup of
    dynamic_quantize.comp, then quantize.comp with them."""

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape, "uint8")
        scale, zp = call.output(1, (), "float32"), call.output(2, (), "uint8")
        if x.size > 256 * LOOP_BUDGET:
            raise UnsupportedError(f"DynamicQuantizeLinear over {x.size} elements (one workgroup's loop budget)")
        call.dispatch(self.spec.shader, "float32", (), [x, scale, zp], pack("I", x.size), (1, 1, 1), [x],
                      [scale, zp])
        if x.size:
            dispatch_quantize(call, MODE_QUANTIZE, x, scale, zp, y, 1, 1)


class MatMulInteger(Kernel):
    """A [..., M, K] times B [K, N] (or the same batches) in int32 from 8-bit operands; zero points
    scalar, per row of a 2-D A or per column of B."""

    def compute(self, call) -> None:
        inputs = padded(call.inputs, 4)
        a, b, azp, bzp = inputs[:4]
        if len(a.shape) < 2 or len(b.shape) < 2 or a.shape[-1] != b.shape[-2]:
            raise UnsupportedError(f"MatMulInteger of {a.shape} and {b.shape}")
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        batches = math.prod(a.shape[:-2])
        if len(b.shape) == 2:
            b_stride = 0
        elif b.shape[:-2] == a.shape[:-2]:
            b_stride = k * n
        else:
            raise UnsupportedError(f"MatMulInteger: batch dimensions of {a.shape} and {b.shape}")
        steps = []
        for zp, length, name in ((azp, m, "a_zero_point"), (bzp, n, "b_zero_point")):
            if zp is None or zp.size == 1:
                steps.append(0)
            elif zp.shape in ((length,), (length, 1) if name == "a_zero_point" else (1, length)) and batches == 1:
                steps.append(1)
            else:
                raise UnsupportedError(f"MatMulInteger: {name} of shape {zp.shape}")
        if k > LOOP_BUDGET:
            raise UnsupportedError(f"MatMulInteger: K={k} past one invocation's loop budget")
        y = call.output(0, a.shape[:-1] + (n,), "int32")
        if y.size:
            constants = (int(a.dtype == "int8"), int(b.dtype == "int8"))
            tail = pack("7I", m, n, k, batches, b_stride, *steps)
            call.dispatch(self.spec.shader, shader_dtype(a), constants, [a, b, azp, bzp, y], tail,
                          grid_1d(y.size, 64), [t for t in (a, b, azp, bzp) if t is not None], [y])
