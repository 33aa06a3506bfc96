"""Load test: four threads for a while over shared and separate vkep sessions, outputs checked against ORT's
CPU EP, memory watched. Threads 0 and 1 share one session (vkep's default model), thread 2 runs a session of
its own (a BERT-style encoder), thread 3 creates a session, runs it and releases it, again and again (a
chain of Adds). Memory must stay flat: vkep's live device bytes and the process's resident size at the end
may not exceed what they were after the first quarter of the time by more than a margin.

    .venv/bin/python tools/soak.py --seconds 300          # minutes, by hand
    .venv/bin/python tools/soak.py --seconds 10 --json    # what tests/test_load.py runs

Prints one JSON line with --json (runs per thread, failures, memory samples); exit status 1 on a wrong
output, an exception, a hung thread or memory that grew.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import vkep  # noqa: E402
from vkep import models, runner  # noqa: E402

RSS_MARGIN = 64 << 20  # bytes the process may grow after warming up (allocator arenas, Python's caches)
LIVE_MARGIN = 1 << 20  # vkep device bytes


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _live() -> int:
    """vkep's live device bytes over every opened device (stats() keys them by index, beside "process")."""
    return sum(d["live_bytes"] for key, d in vkep.stats().items() if isinstance(key, int))


def soak(seconds: float) -> dict:
    faulthandler.enable()  # a crash prints every thread's Python stack
    vkep.register()
    shared_model, own_model, churn_model = models.default_model(), models.bert_encoder(), models.add_chain(48)
    shared = runner.vkep_session(shared_model)
    refs = {id(m): runner.cpu_session(m) for m in (shared_model, own_model, churn_model)}
    runs, failures = [0] * 4, []
    stop = time.monotonic() + seconds

    def check(model, session, seed: int, worker: int) -> None:
        feeds = models.bert_inputs(model, seed) if model is own_model else models.random_inputs(model, seed)
        got = session.run(None, feeds)
        if seed % 5 == 0:  # (the reference costs time too: every fifth run)
            for g, w in zip(got, refs[id(model)].run(None, feeds), strict=True):
                if not np.allclose(g, w, rtol=1e-3, atol=1e-4):
                    failures.append(f"thread {worker}, run {seed}: max difference {np.abs(g - w).max()}")

    def work(worker: int) -> None:
        try:
            own = runner.vkep_session(own_model) if worker == 2 else None
            while time.monotonic() < stop and not failures:
                if worker < 2:
                    check(shared_model, shared, runs[worker], worker)
                elif worker == 2:
                    check(own_model, own, runs[worker], worker)
                else:
                    session = runner.vkep_session(churn_model)
                    check(churn_model, session, runs[worker], worker)
                    del session
                runs[worker] += 1
        except BaseException as exc:  # noqa: BLE001 — reported, not raised in a thread
            failures.append(f"thread {worker}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    samples = []  # (seconds, live device bytes, resident bytes)
    start = time.monotonic()
    while any(t.is_alive() for t in threads) and time.monotonic() < stop + 60:
        time.sleep(min(1.0, seconds / 20))
        gc.collect()
        samples.append((round(time.monotonic() - start, 2), _live(), _rss()))
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    if hung:
        failures.append(f"threads {hung} still running 60 s after the end")
        faulthandler.dump_traceback(all_threads=True)  # where they are, on stderr
    warm = [s for s in samples if s[0] >= seconds / 4] or samples
    grew = []
    if warm:
        base_live, base_rss = warm[0][1], warm[0][2]
        end_live, end_rss = samples[-1][1], samples[-1][2]
        if end_live > base_live + LIVE_MARGIN:
            grew.append(f"vkep live bytes {base_live} -> {end_live}")
        if end_rss > base_rss + RSS_MARGIN:
            grew.append(f"resident bytes {base_rss} -> {end_rss}")
    return {"seconds": seconds, "runs": runs, "failures": failures[:10], "grew": grew,
            "samples": samples[:: max(1, len(samples) // 10)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = soak(args.seconds)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"runs per thread {report['runs']} in {args.seconds:.0f} s")
        for s in report["samples"]:
            print(f"  {s[0]:7.1f} s  vkep live {s[1] / 1e6:8.2f} MB  resident {s[2] / 1e6:8.1f} MB")
        for line in report["failures"] + report["grew"]:
            print("FAIL:", line)
    return 1 if report["failures"] or report["grew"] else 0


if __name__ == "__main__":
    sys.exit(main())
