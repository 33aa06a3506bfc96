"""QuantizeLinear and DequantizeLinear (quantize.comp), per tensor or per axis, 8-bit integers."""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, UnsupportedError, axis_in, grid_1d, pack, shader_dtype

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
        quantize = self.constants[0] == MODE_QUANTIZE
        float_side = x if quantize else None
        if quantize:
            out = zp.dtype if zp is not None else ONNX_8BIT.get(self.attrs.get("output_dtype", 0), "uint8")
        else:
            out = scale.dtype
            wanted = self.attrs.get("output_dtype", 0)
            if wanted and wanted != {"float32": 1, "float16": 10}.get(out):
                raise UnsupportedError(f"DequantizeLinear: output_dtype {wanted} with {out} scales")
        if float_side is not None and scale.dtype != float_side.dtype:
            raise UnsupportedError(f"QuantizeLinear: x of {x.dtype} with scales of {scale.dtype}")
        if scale.size == 1:
            div = mod = 1
        else:
            axis = axis_in(self.attrs.get("axis", 1), len(x.shape), self.spec.op)
            if scale.shape != (x.shape[axis],) or (zp is not None and zp.shape != scale.shape):
                raise UnsupportedError(f"{self.spec.op}: scale {scale.shape} along axis {axis} of {x.shape}")
            div, mod = math.prod(x.shape[axis + 1:]), x.shape[axis]
        y = call.output(0, x.shape, out)
        if x.size:
            reads = [t for t in (x, scale, zp) if t is not None]
            call.dispatch(self.spec.shader, (shader_dtype(x), shader_dtype(y)), self.constants, [x, scale, zp, y],
                          pack("3I", x.size, div, mod), grid_1d(x.size, 256), reads, [y])
