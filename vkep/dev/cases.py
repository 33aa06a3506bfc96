"""The kernel's generated reference cases (vkep.conformance.generated), each a live vkep session kept across
saves, checked against the CPU EP's outputs (computed once), and the microbenchmark of one of them."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

import vkep
from vkep import runner
from vkep.conformance import generated
from vkep.gpu.stream import BATCH_COMMANDS
from vkep.gpu.timing import GpuTimer
from vkep.kernels.base import hazard_spans
from vkep.ort.factory import shares_host_memory
from vkep.ort.kernel import KERNELS

QUIET = 3  # ORT's log severity for the sessions made here: errors only (old opsets warn on every session)


def largest_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| in float64; NaN where both are NaN counts as equal, elsewhere as infinitely wrong."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    if g.shape != w.shape:
        return float("inf")
    if g.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        diff = np.abs(g - w)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(g) & (g == w)
    diff[both_nan | same_inf] = 0.0
    diff[np.isnan(diff)] = np.inf
    return float(diff.max())


@dataclass
class CaseResult:
    name: str
    error: float | None  # None: the case did not run (see `problem`)
    ok: bool
    problem: str = ""


class LiveCase:
    """One generated case: its vkep session, feeds and the CPU EP's outputs, made once."""

    def __init__(self, case: generated.Case):
        self.case = case
        self.name = case.name
        spec = case.spec
        self.model = generated.one_node_model(spec, case.opset, case.dtype, case.constraint)
        self.feeds = generated.feeds_for(self.model, spec, case.dtype)
        self.out_types = generated.output_types(case)
        self.want = runner.cpu_session(generated.reference_model(case), log_severity=QUIET).run(None, generated.reference_feeds(self.feeds))
        before = set(KERNELS)
        self.session = runner.vkep_session(self.model, disable_cpu_fallback=True, log_severity=QUIET)
        self.kernels = [KERNELS[k] for k in set(KERNELS) - before]  # this session's nodes (one)
        self.binding = None
        self.values: dict[str, ort.OrtValue] = {}

    def check(self) -> CaseResult:
        try:
            got = self.session.run(None, self.feeds)
        except Exception as exc:  # noqa: BLE001 — the kernel failed: that is the result to show
            return CaseResult(self.name, None, False, str(exc).splitlines()[0])
        errors = [largest_error(g, w) for g, w in zip(got, self.want, strict=True)]
        ok = all(g.shape == w.shape and g.dtype == t and np.allclose(
            g.astype(np.float64), w.astype(np.float64), equal_nan=True, **generated.tolerance(t))
            for g, w, t in zip(got, self.want, self.out_types, strict=True))
        return CaseResult(self.name, max(errors, default=0.0), ok)

    # -- timing ---------------------------------------------------------------------------------------
    def _bind(self) -> None:
        """Inputs and outputs in vkep memory that stay allocated: the node then replays, and the addresses in
        its recorded dispatches stay valid for the benchmark."""
        gpu = self.kernels[0].gpu
        uuid = gpu.info.uuid
        device = next((d for d in vkep.devices() if d.ep_metadata.get("vulkan.device_uuid") == uuid), None)
        if device is None:
            raise RuntimeError(f"no OrtEpDevice for {gpu.info.name}")
        kind = "HOST_ACCESSIBLE" if shares_host_memory(gpu.info) else "DEFAULT"
        info = device.memory_info(getattr(ort.OrtDeviceMemoryType, kind))
        binding = self.session.io_binding()
        fed_on_host = set(self.case.spec.cpu_inputs)
        for vi in self.model.graph.input:
            array = self.feeds[vi.name]
            if int(vi.name[2:]) in fed_on_host:
                binding.bind_cpu_input(vi.name, array)
                continue
            value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), array.dtype, memory_info=info)
            value.update_inplace(np.ascontiguousarray(array))
            self.values[vi.name] = value
            binding.bind_ortvalue_input(vi.name, value)
        for out, want, dtype in zip(self.session.get_outputs(), self.want, self.out_types, strict=True):
            value = ort.OrtValue.ortvalue_from_shape_and_type(list(want.shape), dtype, memory_info=info)
            self.values[out.name] = value
            binding.bind_ortvalue_output(out.name, value)
        self.binding = binding

    def time(self, timer: GpuTimer | None, rounds: int = 7) -> tuple[float, str]:
        """(microseconds, how): the node's dispatches between GPU timestamps where the device writes them, else
        the host time of a whole session run (both the median of `rounds`)."""
        if self.binding is None:
            self._bind()
        self.session.run_with_iobinding(self.binding)  # through Python after a swap: records the node's dispatches
        host = []
        for _ in range(rounds):
            start = time.perf_counter()
            self.session.run_with_iobinding(self.binding)
            host.append(time.perf_counter() - start)
        kernel = self.kernels[0]
        ops = kernel.last_ops
        if timer is None or not timer.available or not ops or len(ops) > BATCH_COMMANDS // 2:
            why = ("no timestamps on this queue" if timer is None or not timer.available
                   else f"{len(ops)} dispatches: more than one batch" if ops
                   else "no dispatch of its own to repeat: a view, a copy, or scratch memory")
            return statistics.median(host) * 1e6, f"host timing: session run ({why})"
        reps = max(1, min(16, (BATCH_COMMANDS // 2) // len(ops)))
        stream = kernel.gpu.default_stream()
        spans = [hazard_spans(reads, writes) for _, _, _, _, reads, writes in ops]

        def record() -> None:
            for _ in range(reps):
                for (pipeline, _, push, groups, reads, writes), span in zip(ops, spans, strict=True):
                    stream.dispatch(pipeline, push, groups, span, len(reads), len(writes))

        gpu_ns = [timer.time(stream, record) / reps for _ in range(rounds)]
        return statistics.median(gpu_ns) / 1e3, f"gpu timestamps: {len(ops)} dispatch(es), {reps} back to back"
