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

A kernel knows its node by its input and output names only (KernelInfo), and sibling subgraphs (an If's two
branches, the two Loops of a bidirectional layer) may name values alike. So a producer is known by its output's
name and its node's input names; one that two subgraphs share, or that two kernels match, or that a kernel
matches in two groups, keeps its wait. Only the others stop waiting, and only for a waiter among them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class ParentReads:
    """Every subgraph's outputs that vkep nodes make and nothing but the subgraph's own If, Loop or Scan reads on
    the host, by producer: (output name, the producer's input names) → its subgraph's group (None: ambiguous)."""

    def __init__(self):
        self.names: set[str] = set()
        self.by_key: dict[tuple, SubgraphOutputs | None] = {}
        self.groups: dict[frozenset, SubgraphOutputs] = {}  # (ORT may ask for a graph's capability twice)

    def add_graph(self, producers: set[tuple[str, tuple[str, ...]]]) -> None:
        """One subgraph's (output name, producer's input names) pairs (GetCapability)."""
        if not producers:
            return
        keys = frozenset(producers)
        group = self.groups.setdefault(keys, SubgraphOutputs())
        for key in keys:
            self.names.add(key[0])
            self.by_key[key] = group if self.by_key.get(key, group) is group else None

    def join(self, kernel, names: tuple[str, ...], makers: Callable[[], list[tuple[str, ...] | None]]) -> frozenset[int]:
        """The outputs of a kernel (at session creation) that it waits for, until its group, if it is in one
        without doubt, knows its last producer. `makers()[j]`: the input names of the node that makes output j (a
        fused kernel's nodes are not the kernel's node), None if not known; asked only of a kernel that makes such
        an output."""
        # (a `cpu_outputs` output is written on the host, complete when its Compute returns)
        indices = frozenset(j for j, name in enumerate(names) if name in self.names and j not in kernel.cpu_outputs)
        if not indices:
            return indices
        made_by = makers()
        groups = {self.by_key.get((names[j], made_by[j])) if made_by[j] is not None else None for j in indices}
        if len(groups) == 1 and None not in groups:
            groups.pop().join(kernel, {names[j] for j in indices}, indices)
        return indices


class SubgraphOutputs:
    """The kernels that make one subgraph's outputs its If, Loop or Scan reads, and which of them waits."""

    def __init__(self):
        self.members: dict[int, tuple] = {}  # id(KernelInstance) → (it, its output indices, their names)
        self.made: dict[str, int] = {}  # output name → how many kernels make it
        self.arrived: set[str] = set()
        self.waiter = None  # the producer that runs last, once an execution has shown it
        self.lock = threading.Lock()

    def join(self, kernel, names: set[str], indices: frozenset[int]) -> None:
        with self.lock:
            self.members[id(kernel)] = (kernel, indices, names)
            for name in names:
                self.made[name] = self.made.get(name, 0) + 1
            kernel.subgraph_outputs = self
            late, self.waiter = self.waiter is not None, None
        if late:  # (not seen: ORT makes every kernel before the first run) everyone waits again, and learns again
            self.arrived.clear()
            for other, others, _ in list(self.members.values()):
                other.host_read_outputs = other.host_read_outputs | others
                other.invalidate_plan()

    def executed(self, kernel) -> None:
        """A producer's Compute went through Python (its first execution does): the producer whose outputs
        complete those of the unambiguous producers becomes the waiter, and the others among those stop waiting."""
        if self.waiter is not None:
            return
        with self.lock:
            sure = [m for m in self.members.values() if all(self.made[name] == 1 for name in m[2])]
            if self.waiter is not None or not any(k is kernel for k, _, _ in sure):
                return
            self.arrived |= self.members[id(kernel)][2]
            if not self.arrived >= set().union(*(names for _, _, names in sure)):
                return
            self.waiter = kernel
            others = [(k, indices) for k, indices, _ in sure if k is not kernel]
        for other, indices in others:
            other.host_read_outputs = other.host_read_outputs - indices
            other.invalidate_plan()  # (its plan waits: the next Python execution writes one that does not)
