"""If, Loop, Scan: the host runtime runs these itself (it owns the subgraphs); vkep's part is to keep
their tensors on the device and to give the runtime the device operations it needs between
iterations (Loop: concatenating per-iteration outputs; Scan: transposing scan inputs/outputs).
The subgraph bodies are partitioned like any graph, so their nodes run on vkep."""

from __future__ import annotations

from vkep.kernels.base import Kernel


class ControlFlow(Kernel):
    """A marker: the runtime's own control-flow kernel executes this node."""

    def compute(self, call) -> None:  # never called: the runtime's kernel runs instead
        raise NotImplementedError(f"{self.spec.op} is executed by the runtime's control-flow kernel")


class If(ControlFlow):
    pass


class Loop(ControlFlow):
    pass


class Scan(ControlFlow):
    pass
