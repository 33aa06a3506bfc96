"""MemcpyFromHost / MemcpyToHost: the copies ORT inserts where the graph crosses to or from the CPU EP."""

from __future__ import annotations

from vkep.kernels.base import Kernel


class Memcpy(Kernel):
    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape)
        if self.spec.op == "MemcpyFromHost":
            call.upload(x, y)
        else:
            call.download(x, y)
