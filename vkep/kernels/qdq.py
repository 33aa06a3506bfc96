"""A QDQ group's kernel: DequantizeLinear nodes -> an op -> QuantizeLinear, run as the QLinear op that ORT's CPU EP
fuses them into (vkep/ort/qdq.py picks the groups at GetCapability and builds this at Compile). The QLinear
kernel is the node kernel of that op (QLinearConv's, QGemm's, ...), unchanged; this only hands it its inputs:
each one the fused node's input k, a constant uploaded once, or absent."""

from __future__ import annotations

from vkep.kernels.base import Kernel, Tensor


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
