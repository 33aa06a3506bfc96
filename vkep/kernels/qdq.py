"""A QDQ group's kernel: DequantizeLinear nodes -> an op -> QuantizeLinear, run as the QLinear op that ORT's CPU EP
fuses them into (vkep/ort/qdq.py picks the groups at GetCapability and builds this at Compile). The QLinear
kernel is the node kernel of that op (QLinearConv's, QGemm's, ...), unchanged; this only hands it its inputs:
each one the fused node's input k, a constant uploaded once, or absent."""

from __future__ import annotations

from vkep.kernels.base import Kernel, Tensor
from vkep.kernels.elementwise import OP_CAST, dispatch_unary


class QdqGroup(Kernel):
    """`qlinear` over `sources`: per input of the QLinear op, the fused node's input index (an int), a constant
    (a Tensor), or None."""

    def __init__(self, spec, qlinear: Kernel, sources: list):
        super().__init__(spec, {}, 1, [])
        self.qlinear, self.sources = qlinear, sources

    def compute(self, call) -> None:
        if not self.output_count:  # (a group whose value no one reads: ORT gives the fused node no output)
            return
        inputs = [s if s is None or isinstance(s, Tensor) else call.inputs[s] for s in self.sources]
        while inputs and inputs[-1] is None:  # (optional inputs left off the end, as ORT passes a node's)
            inputs.pop()
        self.qlinear.compute(_Inputs(call, inputs))


class _Inputs:
    """The call the QLinear kernel sees: its own inputs, everything else the fused node's call."""

    def __init__(self, call, inputs: list):
        self._call, self.inputs = call, inputs

    def __getattr__(self, name):
        return getattr(self._call, name)


class Float32Product:
    """A float16 A through a kernel that computes as the CPU EP does in float32 only (MatMulNBits' int8 A at accuracy
    level 4): ORT puts Casts around the MatMulNBits it fuses for a float16 model, so A is cast to float32 into
    scratch memory, the kernel runs, and its float32 output is cast to float16."""

    def __init__(self, inner: Kernel):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def compute(self, call) -> None:
        a = call.inputs[0]
        a32 = call.scratch(a.shape, "float32")
        dispatch_unary(call, "unary.comp", {"op": OP_CAST}, a, a32, (0.0, 0.0))
        inner = _Float32Output(call, [a32, *call.inputs[1:]])
        self.inner.compute(inner)
        if inner.y32 is not None and inner.y32.size:
            y = call.output(0, inner.y32.shape, "float16")
            dispatch_unary(call, "unary.comp", {"op": OP_CAST}, inner.y32, y, (0.0, 0.0))


class _Float32Output(_Inputs):
    """The call the float32 kernel sees: A in float32, and its output 0 in float32 scratch memory."""

    def __init__(self, call, inputs: list):
        super().__init__(call, inputs)
        self.y32: Tensor | None = None

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        self.y32 = self._call.scratch(shape, "float32")
        return self.y32
