"""A status line on stderr while a slow phase of `vkep run` goes on: on a cold start (lavapipe compiles each
shader the first time it runs it, vkep prepacks weights), creating a session or the first run can take a
minute, and a silent minute looks like a hang. Nothing is printed for a phase shorter than `DELAY` (1 s)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import vkep

DELAY = 1.0  # seconds before a phase is shown at all


def _done_so_far() -> str:
    devices = [v for k, v in vkep.stats().items() if k != "process"]
    pipelines = sum(d.get("pipelines_built", 0) for d in devices)
    packed = sum(d.get("prepacked_bytes", 0) for d in devices)
    warming = [d["pipelines_warming"] for d in devices if d.get("pipelines_warming")]
    if warming:  # the session's pipelines, compiled before its first run: a bar of done / total
        done, total = (sum(w[i] for w in warming) for i in (0, 1))
        filled = round(20 * done / max(total, 1))
        parts = [f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total} pipelines compiled"]
    else:
        parts = [f"{pipelines} pipelines created"]
    if packed:
        parts.append(f"{packed / 2**20:.0f} MB of weights prepacked")
    return ", ".join(parts)


@contextmanager
def phase(label: str, why: str = "", stream=None) -> Iterator[None]:
    """Show `label`, the time spent and vkep's work so far, every second on a terminal (one line, rewritten)
    or every 10 s otherwise, until the block ends."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    stop = threading.Event()
    start = time.perf_counter()
    shown = [False]

    def show(final: bool = False) -> None:
        elapsed = time.perf_counter() - start
        text = f"vkep: {label}: {elapsed:.0f} s, {_done_so_far()}" + ("" if final or not why else f" ({why})")
        if tty:
            stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            stream.write(text + "\n")
        stream.flush()
        shown[0] = True

    def loop() -> None:
        if stop.wait(DELAY):
            return
        show()
        while not stop.wait(1.0 if tty else 10.0):
            show()

    thread = threading.Thread(target=loop, name="vkep-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if shown[0]:
            show(final=True)
