"""One wait per execution of a subgraph for the outputs its If, Loop or Scan reads (docs/design.md, "Host access
and reused memory", rule 2).

ORT reads a subgraph's outputs with the CPU once the whole subgraph has run: a Loop its condition, its carried
values and its scan outputs, every iteration. Each producer used to wait for its GPU work before its Compute
returned: a tf2onnx SimpleRNN body of 11 nodes made 4 submits and waits an iteration. The wait of the producer
that runs last covers the others' work (the device has one stream and queue), so once one execution has shown
which producer that is, only it waits; the others record and return.

Why the order holds: ORT runs a subgraph's nodes by its execution plan, which is fixed when the session is made,
and vkep's nodes share one logic stream of it; every producer runs in every execution, before ORT reads
anything. The first execution waits at every producer (each one's first Compute is on Python's path), and the
producer whose outputs complete the group there is the plan's last one (no producer can complete it before a
producer the plan puts after it has run, in any run). The others' plans, written with a wait, are dropped, so
their next execution writes them without one.

Kernels know their outputs by name only, and sibling subgraphs (an If's two branches, two Loops' bodies) may
name values alike. So a group that two kernels make one name of (a kernel of another graph, or a copy of the
branch) never picks a waiter: all its producers wait, as before. Nor does a group with a name no kernel makes.
"""

from __future__ import annotations

import threading


class SubgraphOutputs:
    """The outputs of one subgraph that vkep kernels make and that nothing but the subgraph's own If, Loop or
    Scan reads on the host (by name), and the kernels that make them."""

    def __init__(self, names: set[str]):
        self.names = set(names)
        self.members: dict[int, tuple] = {}  # id(KernelInstance) → (it, its output indices and names in the group)
        self.made: dict[str, int] = {}  # name → how many kernels make it
        self.arrived: set[str] = set()
        self.waiter = None  # the producer that runs last, once an execution has shown it
        self.lock = threading.Lock()

    def join(self, kernel, output_names) -> frozenset[int]:
        """Register a producer (at session creation); the indices of its outputs in this group, which it waits
        for until the group knows its last producer."""
        # (a `cpu_outputs` output is written on the host, complete when its Compute returns: no member of the group)
        host_made = {name for j, name in enumerate(output_names) if j in kernel.cpu_outputs}
        indices = frozenset(j for j, name in enumerate(output_names) if name in self.names and name not in host_made)
        with self.lock:
            self.names -= host_made
            if not indices:
                return indices
            self.members[id(kernel)] = (kernel, indices, {output_names[j] for j in indices})
            for j in indices:
                self.made[output_names[j]] = self.made.get(output_names[j], 0) + 1
            kernel.subgraph_outputs = self
            late = self.waiter is not None
            self.waiter = None
        if late:  # (not seen: ORT makes every kernel before the first run) everyone waits again, and learns again
            self.arrived.clear()
            for other, others, _ in list(self.members.values()):
                other.host_read_outputs = other.host_read_outputs | others
                other.invalidate_plan()
        return indices

    def executed(self, kernel) -> None:
        """A producer's Compute went through Python (its first execution does): the first producer whose outputs
        complete the group becomes its waiter, and the others stop waiting for these outputs."""
        if self.waiter is not None:
            return
        with self.lock:
            if self.waiter is not None or id(kernel) not in self.members:
                return
            self.arrived |= self.members[id(kernel)][2]
            if self.arrived != self.names or any(self.made.get(name) != 1 for name in self.names):
                return
            self.waiter = kernel
            others = [(k, indices) for k, indices, _ in self.members.values() if k is not kernel]
        for other, indices in others:
            other.host_read_outputs = other.host_read_outputs - indices
            other.invalidate_plan()  # (its plan waits: the next Python execution writes one that does not)
