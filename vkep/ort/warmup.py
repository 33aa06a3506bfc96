"""A session's pipelines, built and compiled before its first run (OrtEp::OnSessionInitializationEnd, ORT 1.27+).

Which pipelines a node uses follows from its shapes (kernels pick variants and specialization constants from
them), so each kernel whose input shapes the graph declares in full is run dry once: a `DryCall` records the
pipelines its dispatches would use and touches no memory. Each pipeline is then created and executed once with
zero workgroups: a driver that compiles a shader when it first executes it (lavapipe does) compiles it then,
and nothing runs. Kernels that need a value only a run has (a CPU input such as Reshape's shape) or declare
symbolic dimensions are left to their first run (docs/design.md, "Cold start").
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

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


def warm(kernels: list, gpu, log) -> None:
    """Build every pipeline the kernels (a session's, all on `gpu`) will use and have the driver compile each
    (a zero-workgroup dispatch), counting them in the device's PipelineCache.warming (vkep run's progress)."""
    start = time.perf_counter()
    work: dict[tuple, object] = {}  # (shader, dtype, constants) → a kernel that uses it
    for kernel in kernels:
        for key in planned_pipelines(kernel):
            work.setdefault(key, kernel)
    if not work:
        return

    def build(item):
        (shader, dtype, constants), kernel = item
        try:
            return kernel.pipeline(shader, dtype, dict(constants))
        except Exception as exc:  # noqa: BLE001 — a head start, not a check: the run meets it, with its node
            log.verbose(f"no head start for {shader} ({kernel.label}): {exc}")
            return None

    cache, stream = gpu.pipelines, gpu.default_stream()
    job = cache.warming_started(len(work))
    try:
        # created in parallel (a GPU driver compiles here), each submitted as soon as it is built with a dispatch
        # of zero workgroups: a driver that compiles at first execution (lavapipe: on its one queue's thread,
        # one pipeline after another) compiles it there while the other threads still create the rest
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="vkep-pipelines") as pool:
            submitted = []  # the timeline value each zero dispatch completes at
            for future in as_completed([pool.submit(build, item) for item in work.items()]):
                if (pipeline := future.result()) is not None:
                    stream.dispatch(pipeline, bytes(16), (0, 0, 0), b"", 0, 0)
                    submitted.append(stream.flush())
        for value in submitted:
            stream.wait(value)
            cache.warmed_one(job)
        if submitted:
            log.info(f"built and compiled the session's {len(submitted)} pipelines before its first run in "
                     f"{time.perf_counter() - start:.2f} s")
    finally:
        cache.warming_ended(job)
