"""The worker pool of `vkep conformance`: N worker processes, one case at a time each.

A worker is `python -m vkep.conformance.worker EP FD_IN FD_OUT` (or another interpreter running the same
code, e.g. the WebGPU tool's virtualenv): pickled tasks go in through one pipe, records come back through
another. A worker that dies during a case (a driver crash) or gives no answer within the timeout (a hang)
is replaced; its case is recorded as `error` ("crashed (signal SIGSEGV): ..." / "timeout: ...").
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from vkep.conformance.worker import VULKAN


@dataclass
class Case:
    name: str
    op: str  # domain-qualified op type; "Op (expanded)" for the function-body variant of a case
    model: bytes
    data_sets: list  # [(inputs, expected outputs)], numpy (TensorProtos converted)
    rtol: float
    atol: float
    dtype: str = ""  # the element type of its first input (else output): float, float16, int8, ... (corpus)


class WorkerStartError(RuntimeError):
    """A worker could not start, or its EP cannot run at all: the whole run stops."""


class _Worker:
    def __init__(self, cmd: list[str], env: dict, log_path: Path):
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([*cmd, str(task_r), str(res_w)], pass_fds=(task_r, res_w), env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        os.close(task_r)
        os.close(res_w)
        self.tasks = Connection(task_w, readable=False)
        self.results = Connection(res_r, writable=False)
        self.ready = False
        self.info: dict = {}
        self.case: int | None = None
        self.since = time.monotonic()

    def send(self, index: int, payload: bytes) -> None:
        self.case, self.since = index, time.monotonic()
        self.tasks.send_bytes(payload)

    def death(self) -> str:
        code = self.proc.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        tail = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()][-8:]
        fatal = next((ln for ln in tail if "Fatal Python error" in ln or "Error" in ln), "")
        return f"crashed ({how})" + (f": {fatal.strip()}" if fatal else "")

    def stop(self, kill: bool = False) -> None:
        for conn in (self.tasks, self.results):
            conn.close()
        if kill:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def worker_command(ep: str) -> list[str]:
    return [sys.executable, "-m", "vkep.conformance.worker", ep]


def run_cases(cases: list[Case], ep: str = VULKAN, jobs: int = 2, timeout: float = 60.0, validation: bool = False,
              cmd: list[str] | None = None, progress=None, debug: dict[str, str] | None = None,
              startup_timeout: float = 300.0, session: dict | None = None,
              env: dict[str, str] | None = None) -> tuple[list[dict], dict]:
    """Run `cases` on `ep` in a pool of `jobs` workers; (records in corpus order, the first worker's info).

    `cmd` is the worker command (default: this interpreter, `-m vkep.conformance.worker EP`); the two pipe
    descriptors are appended. `debug` maps a case name to "crash" or "hang" (tests of the pool itself).
    `session` holds the session settings of every case (worker.configure: optimization level,
    memory reuse), for the reference and the EP under test alike, and `ep_options`, vkep's EP options.
    `env` is added to the workers' environment (a driver's VK_DRIVER_FILES, a process-wide switch).
    """
    cmd = cmd or worker_command(ep)
    env = dict(os.environ, **(env or {}), VKEP_VALIDATION="1" if validation else "0", PYTHONFAULTHANDLER="1")
    records: list[dict | None] = [None] * len(cases)
    pending = deque(range(len(cases)))
    info: dict = {}
    with tempfile.TemporaryDirectory(prefix="vkep-conformance-") as tmp:
        starts = 0

        def start() -> _Worker:
            nonlocal starts
            starts += 1
            return _Worker(cmd, env, Path(tmp) / f"worker-{starts}.log")

        workers = [start() for _ in range(max(1, min(jobs, len(cases))))]

        def finish(w: _Worker, rec: dict) -> None:
            case = cases[w.case]
            rec = {"name": case.name, "op": case.op, "dtype": case.dtype,
                   **{k: v for k, v in rec.items() if k != "name"}}
            records[w.case] = rec
            w.case = None
            if progress:
                progress.update(rec)

        try:
            while pending or any(w.case is not None for w in workers):
                for w in workers:
                    if w.ready and w.case is None and pending:
                        i = pending.popleft()
                        c = cases[i]
                        task = {"name": c.name, "model": c.model, "data_sets": c.data_sets, "rtol": c.rtol,
                                "atol": c.atol, "debug": (debug or {}).get(c.name), "session": session}
                        try:
                            w.send(i, pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
                        except OSError:  # it died between cases: the case goes to a new worker
                            pending.appendleft(i)
                            w.case = None
                            w.stop(kill=True)
                            workers[workers.index(w)] = start()
                busy = [w for w in workers if not w.ready or w.case is not None]
                now = time.monotonic()
                limits = [(startup_timeout if not w.ready else timeout) - (now - w.since) for w in busy]
                for conn in wait([w.results for w in busy], timeout=max(0.0, min(limits, default=1.0))):
                    w = next(w for w in busy if w.results is conn)
                    try:
                        msg = pickle.loads(conn.recv_bytes())
                    except (EOFError, OSError):
                        reason = w.death()
                        if not w.ready:
                            log = w.log_path.read_text(errors="replace")[-3000:]
                            raise WorkerStartError(f"a conformance worker died while starting: {reason}; "
                                                   f"its log:\n{log}") from None
                        finish(w, {"status": "error", "message": reason,
                                   "seconds": round(time.monotonic() - w.since, 3)})
                        w.stop()
                        workers[workers.index(w)] = start()
                        continue
                    if not w.ready:
                        if not msg.get("ready"):
                            raise WorkerStartError(f"{ep} cannot run: {msg.get('error')}")
                        w.ready, info = True, info or msg["info"]
                        continue
                    finish(w, msg)
                now = time.monotonic()
                for w in list(workers):
                    if w.ready and w.case is not None and now - w.since > timeout:
                        finish(w, {"status": "error", "message": f"timeout: no result after {timeout:g} s",
                                   "seconds": round(now - w.since, 3)})
                        w.stop(kill=True)
                        workers[workers.index(w)] = start()
                    elif not w.ready and now - w.since > startup_timeout:
                        raise WorkerStartError(f"a conformance worker did not start within {startup_timeout:g} s")
        finally:
            for w in workers:
                try:
                    if w.case is None and w.ready:
                        w.tasks.send_bytes(pickle.dumps(None))
                except OSError:
                    pass
                w.stop(kill=not w.ready or w.case is not None)
            if progress:
                progress.close()
    return [r for r in records if r is not None], info


class Progress:
    """One `\\r` line on a terminal (counts and the case just finished); plain periodic lines otherwise."""

    def __init__(self, total: int, stream=None, every_s: float = 15.0, label: str = "vkep"):
        self.total, self.done, self.counts, self.label = total, 0, Counter(), label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s, self.last = every_s, time.monotonic()
        self.start = self.last

    def _line(self, name: str = "") -> str:
        c = self.counts
        line = (f"[{self.done}/{self.total}] all-on-{self.label} {c['pass-vkep']}  partial {c['pass-partial']}  "
                f"cpu {c['pass-cpu']}  wrong {c['wrong']}  error {c['error']}  skip-cpu {c['skip-cpu']}")
        return f"{line}  {name}" if name else line

    def update(self, rec: dict) -> None:
        self.done += 1
        self.counts[rec["status"]] += 1
        now = time.monotonic()
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.stream.write("\r" + self._line(rec["name"])[:width].ljust(width))
            self.stream.flush()
        elif now - self.last >= self.every_s or self.done == self.total:
            self.last = now
            self.stream.write(f"conformance: {self._line()} ({now - self.start:.0f} s)\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.stream.write("\r" + self._line()[:width].ljust(width) + "\n")
            self.stream.flush()
