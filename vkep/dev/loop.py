"""One save of a kernel author's shader, end to end: compile, swap into the live sessions, check, time, print.

Import it after vkep.register(): vkep.ort, which it uses, lives in the plugin ORT loads."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import vkep
from vkep.conformance import generated
from vkep.dev.cases import CaseResult, LiveCase
from vkep.dev.model import LiveModel, ModelResult
from vkep.dev.target import Compiled, compile_variants, including, resolve
from vkep.gpu.timing import GpuTimer
from vkep.kernels import manifest
from vkep.ort.swap import swap_shader


@dataclass
class Outcome:
    """What one cycle found (the printed report, as data: tests read it)."""

    compiled: Compiled | None = None
    results: list[CaseResult] = field(default_factory=list)
    max_error: float | None = None
    micros: float | None = None
    timing: str = ""
    model: ModelResult | None = None
    seconds: float = 0.0  # save (or cycle start) to printed result
    kept_last_good: bool = False


def _number(value: float) -> str:
    return f"{value:.3g}"


def _micros(value: float) -> str:
    return f"{value:.3g} us" if value < 1000 else f"{value / 1000:.3g} ms"


def _millis(value: float) -> str:
    return f"{value:.3g} ms"


def _was(now: float | None, before: float | None, show: Callable[[float], str] = _number) -> str:
    """A figure beside the previous save's, with the change in percent."""
    if now is None:
        return "-"
    if before is None:
        return show(now)
    if before and before != now:
        return f"{show(now)} (was {show(before)}, {100 * (now - before) / before:+.0f}%)"
    return f"{show(now)} (was {show(before)})"


class DevLoop:
    def __init__(self, kernel: str, model: str | None = None, out: TextIO = sys.stdout):
        vkep.register()
        self.target = resolve(kernel)
        self.model_path = model
        self.out = out
        self.cases: list[LiveCase] | None = None  # made after the first good compile
        self.skipped: list[str] = []
        self.model: LiveModel | None = None
        self.timer: GpuTimer | None = None
        self.last_good: Outcome | None = None
        self._seen = self._mtimes()  # a save during the first cycle (before watching starts) still counts

    def _mtimes(self) -> dict[Path, float]:
        return {p: p.stat().st_mtime for p in self.target.watched() if p.exists()}

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # -- one cycle ------------------------------------------------------------------------------------
    def cycle(self, changed: list[Path] | None = None, saved_at: float | None = None) -> Outcome:
        origin = saved_at if saved_at is not None else time.time()
        outcome = Outcome()
        names = ", ".join(p.name for p in changed) if changed else "start"
        self.say(f"-- vkep dev {self.target.name}: {names} at {time.strftime('%H:%M:%S')}")
        if changed and any(p in set(map(Path.resolve, manifest.manifest_paths())) for p in changed):
            fields = self.target.reload()
            if fields:
                self.say(f"  manifest  the entry's {', '.join(fields)} changed: restart vkep dev to use them "
                         "(ORT's kernel registry is built once per process)")
            else:
                self.say("  manifest  test hints reloaded: the reference cases are made again")
                self._close_cases()
        outcome.compiled = compiled = compile_variants(self.target)
        if compiled.errors:
            for message in compiled.errors:
                self.say("  compile   FAILED " + message.replace("\n", "\n            "))
            outcome.kept_last_good = True
            good = self.last_good
            self.say("  kept      the last good pipelines" + (
                f": max error {_was(good.max_error, None)}, time {_was(good.micros, None, _micros)} ({good.timing})"
                if good else " (none yet: fix the shader)"))
            return self._done(outcome, origin, saved_at is not None)
        self.say(f"  compile   {len(self.target.variants)} variant(s) of {', '.join(self.target.shaders)}: "
                 f"{compiled.compiled} compiled and validated by spirv-val, {compiled.reused} from the SPIR-V cache "
                 f"({compiled.seconds:.2f} s)")
        swapped = self.last_good is None or self.last_good.compiled.keys != compiled.keys  # (a new source)
        live = sorted(set(self.target.shaders) | including(changed or []))
        nodes = sum(swap_shader(shader) for shader in live) if swapped else 0
        if nodes:
            self.say(f"  swap      {nodes} live node(s) rebuild their pipelines (sessions kept)")
        self._check(outcome)
        self._time(outcome)
        if self.model_path:
            self._run_model(outcome)
        self.last_good = outcome
        return self._done(outcome, origin, saved_at is not None)

    def _check(self, outcome: Outcome) -> None:
        if self.cases is None:
            self.cases, self.skipped = [], []
            for case in generated.cases(self.target.specs):
                try:
                    self.cases.append(LiveCase(case))
                except Exception as exc:  # noqa: BLE001 — e.g. the CPU EP cannot run the reference (as the tests skip)
                    self.skipped.append(f"{case.name}: {str(exc).splitlines()[0][:120]}")
        previous = self.last_good
        start = time.perf_counter()
        outcome.results = [case.check() for case in self.cases]
        seconds = time.perf_counter() - start
        ran = [r for r in outcome.results if r.error is not None]
        failed = [r for r in outcome.results if not r.ok]
        outcome.max_error = max((r.error for r in ran), default=None)
        worst = max(ran, key=lambda r: r.error).name if ran else "-"
        self.say(f"  check     {len(outcome.results)} reference case(s) vs the CPU EP: max error "
                 f"{_was(outcome.max_error, previous.max_error if previous else None)} in {worst}; "
                 + (f"{len(failed)} FAILED" if failed else "all within tolerance")
                 + (f"; {len(self.skipped)} not run" if self.skipped else "") + f" ({seconds:.2f} s)")
        for r in failed[:6]:
            self.say(f"            {r.name}: " + (r.problem or f"max error {r.error:.3g} beyond tolerance"))
        for reason in self.skipped[:3] if previous is None else []:  # (said once, when the cases are made)
            self.say(f"            not run: {reason}")

    def _time(self, outcome: Outcome) -> None:
        timed = next((c for c in self.cases or [] if c.case.dtype == "float32"), (self.cases or [None])[0])
        if timed is None:
            return
        if self.timer is None:
            self.timer = GpuTimer(timed.kernels[0].gpu)
        try:
            outcome.micros, outcome.timing = timed.time(self.timer)
        except Exception as exc:  # noqa: BLE001 — a kernel that fails a bound run: the check shows why
            self.say(f"  time      {timed.name}: not timed ({str(exc).splitlines()[0]})")
            return
        previous = self.last_good.micros if self.last_good else None
        self.say(f"  time      {timed.name}: {_was(outcome.micros, previous, _micros)} [{outcome.timing}]")

    def _run_model(self, outcome: Outcome) -> None:
        if self.model is None:
            self.model = LiveModel(self.model_path)
        previous = self.last_good.model if self.last_good else None
        result = outcome.model = self.model.run()
        change = "" if result.vs_previous is None else f"; changed by {result.vs_previous:.3g} since the last save"
        self.say(f"  model     {Path(self.model_path).name} ({result.nodes_on_vkep}/{result.nodes} nodes on vkep, "
                 f"same session): max |vkep - CPU EP| {_was(result.vs_cpu, previous.vs_cpu if previous else None)}"
                 f"{change}; latency {_was(result.latency_ms, previous.latency_ms if previous else None, _millis)}")

    def _done(self, outcome: Outcome, origin: float, saved: bool) -> Outcome:
        outcome.seconds = time.time() - origin
        self.say(f"  result    {outcome.seconds:.2f} s after the {'save' if saved else 'start'}")
        return outcome

    # -- watching -------------------------------------------------------------------------------------
    def watch(self) -> None:
        """A cycle on every save of a watched file, until Ctrl-C."""
        try:
            from watchfiles import watch
        except ImportError:
            raise RuntimeError("vkep dev watches files with watchfiles: pip install 'vkep[dev]' (or run one cycle "
                               "with --once)") from None

        watched = set(self.target.watched())
        folders = sorted({p.parent for p in watched})

        def wanted(_change, path: str) -> bool:
            return Path(path).resolve() in watched

        missed = [p for p, mtime in self._mtimes().items() if self._seen.get(p) != mtime]
        if missed:
            self.cycle(missed, max(p.stat().st_mtime for p in missed))
        self.say(f"   watching {len(watched)} file(s): {', '.join(sorted(p.name for p in watched))}")
        try:
            for changes in watch(*folders, watch_filter=wanted, debounce=30, step=10):
                paths = sorted({Path(p).resolve() for _, p in changes})
                saved = max((p.stat().st_mtime for p in paths if p.exists()), default=None)
                try:
                    self.cycle(paths, saved)
                except Exception as exc:  # noqa: BLE001 — the loop outlives a failed cycle: the next save retries
                    self.say(f"  failed    {type(exc).__name__}: {exc}")
                watched = set(self.target.watched())  # an include added or removed
        except KeyboardInterrupt:
            pass

    def _close_cases(self) -> None:
        self.cases = None
        if self.timer is not None:
            self.timer.destroy()
            self.timer = None

    def close(self) -> None:
        self._close_cases()
        self.model = None

