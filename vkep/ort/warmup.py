"""A session's pipelines, built and compiled before its first run.

Which pipelines a node uses follows from its shapes (kernels pick variants and specialization constants from
them), so each kernel whose input shapes the graph declares in full is run dry: a `DryCall` records the
pipelines its dispatches would use and touches no memory. Each pipeline is then created and executed once with
zero workgroups: a driver that compiles a shader when it first executes it (lavapipe does) compiles it then,
and nothing runs. That starts as early as each kernel's plan is final (`start_ahead`): when ORT creates it, or
once its weights are packed (the plan of a Conv depends on them: Winograd, rows padded), in the background
(vkep/gpu/ahead.py), while ORT goes on making the session; `warm` (OrtEp::OnSessionInitializationEnd, ORT 1.27+)
starts what is left and waits for all. Kernels that need a value only a run has (a CPU input such as Reshape's
shape) or declare symbolic dimensions are left to their first run (docs/design.md, "Cold start").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from vkep.kernels import interface
from vkep.kernels.base import Tensor, UnsupportedError, encode_dispatch, tensor_bytes, variant


class NeedsRunValue(Exception):
    """The dry run reached a value only a run has."""


class DryCall:
    """`vkep.kernels.base.Call` for planning only: outputs are shapes at address 0, dispatches are recorded."""

    def __init__(self, inputs: list[Tensor | None], constants: Callable[[int], bytes | None] = lambda index: None,
                 is_constant: Callable[[int], bool] = lambda index: False, largest: int = 0,
                 cpu_outputs: frozenset[int] = frozenset()):
        self.inputs = inputs
        self.constants = constants  # the bytes of input i where the graph holds it as a constant, else None
        self.is_constant = is_constant  # whether the graph holds input i as a constant (of any size)
        self.largest = largest  # the most bytes one tensor of the device may take (0: no check)
        self.cpu_outputs = cpu_outputs  # outputs in host memory ORT allocates
        self.pipelines: set[tuple] = set()

    def _fits(self, what: str, shape: tuple[int, ...], dtype: str) -> None:
        nbytes = tensor_bytes(math.prod(shape), dtype)
        if self.largest and nbytes > self.largest:
            raise UnsupportedError(f"{what} {list(shape)} {dtype} takes {nbytes:,} bytes, more than the device can "
                                   f"allocate at once ({self.largest:,} bytes: its memory heap)")

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        dtype = dtype or self.inputs[0].dtype
        if index not in self.cpu_outputs:
            self._fits(f"output {index}", shape, dtype)
        return Tensor(0, tuple(shape), dtype, -1 - index)

    def error_word(self) -> Tensor:
        return Tensor(0, (1,), "int32", Tensor.PERSISTENT)

    def dispatch(self, shader, dtype, constants, push, groups, reads, writes) -> None:
        self.pipelines.add((shader, dtype, tuple(constants.items())))
        # (encoded as a run encodes them: a value its member cannot hold refuses the node now)
        encode_dispatch(interface.push_layout(shader, variant(dtype)), push, reads, writes)

    def begin_loop(self) -> None:
        pass  # (a dry run keeps no plan: end_loop's repetitions matter to a plan only)

    def end_loop(self, times: int, counter: str) -> None:
        pass

    def read_device(self, tensor: Tensor) -> bytes:
        raise NeedsRunValue

    def read_host(self, tensor: Tensor) -> bytes:
        value = self.constants(tensor.io) if tensor.io is not None and tensor.io >= 0 else None
        if value is None:
            raise NeedsRunValue
        return value

    def holds_constant(self, tensor: Tensor) -> bool:
        """Whether `tensor` is an input the graph holds as a constant (PrepackWeight will pack it)."""
        return tensor.io is not None and tensor.io >= 0 and self.is_constant(tensor.io)

    def scratch(self, shape: tuple[int, ...], dtype: str) -> Tensor:
        self._fits("scratch memory", shape, dtype)
        return Tensor(0, tuple(shape), dtype, None)

    def copy(self, src: Tensor, dst: Tensor) -> None:
        pass

    def persistent(self, data: bytes) -> Tensor:
        return Tensor(0, (len(data),), "uint8", Tensor.PERSISTENT)

    def state(self, nbytes: int) -> Tensor:
        return Tensor(0, (nbytes,), "uint8", Tensor.PERSISTENT)

    def fills_state(self) -> bool:
        return False

    def write_host(self, tensor: Tensor, data: bytes) -> None:
        pass

    def upload(self, host: Tensor, dst: Tensor) -> None:
        pass

    def download(self, src: Tensor, host: Tensor) -> None:
        pass


def planned_pipelines(kernel) -> set[tuple]:
    """(shader, element type, constants) of every dispatch the kernel's first run will make, as far as its
    declared input shapes tell (empty where they do not)."""
    declared = kernel.impl.declared_inputs
    if declared is None:
        return set()
    inputs = [None if shape is None else Tensor(0, shape, dtype, i) for i, (shape, dtype) in enumerate(declared)]
    for index, (_, tensor) in kernel.packed.items():
        inputs[index] = tensor
    call = DryCall(inputs)
    try:
        kernel.impl.compute(call)
    except Exception:  # noqa: BLE001 — a value only the run has, or an input the run will reject
        return set()
    return call.pipelines


def _ahead_keys(pipelines: Iterable[tuple]) -> list[tuple]:
    """(shader, dtype, constants) as the device's Ahead takes them: (shader, -D defines, constants)."""
    return [(shader, tuple(sorted(variant(dtype).items())), constants) for shader, dtype, constants in pipelines]


def awaits_weights(kernel) -> bool:
    """Whether a weight of the kernel that its plan depends on (kernels.yaml `prepack`) is still to be packed."""
    declared = kernel.impl.declared_inputs or []
    present = {i for i, (shape, _) in enumerate(declared) if shape is not None}
    return bool(set(kernel.spec.prepack) & present - set(kernel.packed))


def start_ahead(kernel) -> None:
    """Start compiling the kernel's pipelines in the background, where its plan is final now (its weights packed,
    or none to pack): a head start, never an error."""
    if kernel.impl.declared_inputs is None or awaits_weights(kernel):
        return
    try:
        kernel.planned = planned_pipelines(kernel)
        kernel.gpu.ahead.start(_ahead_keys(kernel.planned))
    except Exception:  # noqa: BLE001 — warm (or the first run) builds them otherwise, and reports
        pass


def warm(kernels: list, gpu, log) -> None:
    """Build every pipeline the kernels (a session's, all on `gpu`) will use and have the driver compile each
    (a zero-workgroup dispatch on the ahead stream, started earlier where start_ahead could), counting them in the
    device's PipelineCache.warming (vkep run's progress)."""
    start = time.perf_counter()
    work: dict[tuple, object] = {}  # (shader, dtype, constants) → a kernel that uses it
    for kernel in kernels:  # (each run dry once: start_ahead's plans where it made them)
        for key in kernel.planned if kernel.planned is not None else planned_pipelines(kernel):
            work.setdefault(key, kernel)
    if not work:
        return
    cache = gpu.pipelines
    job = cache.warming_started(len(work))
    compiled = 0
    try:
        futures = gpu.ahead.start(_ahead_keys(work))
        for future, ((shader, _, _), kernel) in zip(futures, work.items(), strict=False):
            try:
                gpu.ahead.wait(future.result())
            except Exception as exc:  # noqa: BLE001 — a head start, not a check: the run meets it, with its node
                log.verbose(f"no head start for {shader} ({kernel.label}): {exc}")
                continue
            cache.warmed_one(job)
            compiled += 1
        if compiled:
            log.info(f"built and compiled the session's {compiled} pipelines before its first run in "
                     f"{time.perf_counter() - start:.2f} s")
    finally:
        cache.warming_ended(job)
