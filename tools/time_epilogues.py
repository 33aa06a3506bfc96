"""Fused epilogues measured on a model (default: onnx's light_resnet50): per-run time with fuse=1 against fuse=0,
the sessions alternated in one process, and cold session creation + first run in fresh processes (empty
VKEP_CACHE_DIR, Mesa's shader cache off) for fuse=0, fuse=1 without epilogues (elementwise groups only: what vkep
fused before them) and fuse=1. Prints same-run ratios; asserts nothing (docs/design.md, "Fused elementwise groups").

    .venv/bin/python tools/time_epilogues.py [--model PATH] [--rounds N] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _default_model() -> str:
    import onnx

    return str(Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx")


def _feeds(session) -> dict:
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            for i in session.get_inputs()}


def warm(model: str, rounds: int) -> None:
    import vkep
    from vkep import runner

    sessions = {fuse: runner.vkep_session(model, ep_options={"fuse": fuse}) for fuse in ("0", "1")}
    feeds = _feeds(sessions["0"])
    times: dict[str, list[float]] = {"0": [], "1": []}
    executions = {}
    for fuse, session in sessions.items():  # (first runs: pipelines, plans)
        session.run(None, feeds)
        vkep.reset_stats()
        session.run(None, feeds)
        stats = vkep.stats()["process"]
        executions[fuse] = stats["nodes_replayed_natively"] + stats["nodes_python_path"]
    for _ in range(rounds):
        for fuse, session in sessions.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[fuse].append(time.perf_counter() - start)
    unfused, fused = (statistics.median(times[f]) * 1e3 for f in ("0", "1"))
    print(f"kernel executions a run: fuse=0 {executions['0']}, fuse=1 {executions['1']}")
    print(f"per run, median of {rounds} alternated: fuse=0 {unfused:.1f} ms, fuse=1 {fused:.1f} ms "
          f"(fused/unfused {fused / unfused:.3f})")


def cold_child(model: str, fuse: str, epilogues: bool) -> None:
    import vkep
    from vkep import runner

    start = time.perf_counter()
    vkep.register()  # (loads the plugin, whose modules import only then)
    if not epilogues:
        from vkep.ort import epilogues as module

        module.is_producer = lambda node, ep: False
    session = runner.vkep_session(model, ep_options={"fuse": fuse})
    created = time.perf_counter()
    session.run(None, _feeds(session))
    print(json.dumps({"create": created - start, "first_run": time.perf_counter() - created}))


def cold(model: str, repeats: int) -> None:
    for label, fuse, epilogues in (("fuse=0", "0", True), ("fuse=1, no epilogues", "1", False),
                                   ("fuse=1", "1", True)):
        results = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "VKEP_CACHE_DIR": cache, "MESA_SHADER_CACHE_DISABLE": "true"}
                done = subprocess.run([sys.executable, __file__, "--model", model, "--cold-child", fuse,
                                       "--epilogues", str(int(epilogues))], env=env, capture_output=True, text=True,
                                      check=True)
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        create = statistics.median(r["create"] for r in results)
        first = statistics.median(r["first_run"] for r in results)
        print(f"cold ({label}): session {create:.2f} s + first run {first:.2f} s = {create + first:.2f} s "
              f"(median of {repeats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--cold", type=int, default=0, help="cold starts of each kind (0: none)")
    parser.add_argument("--cold-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--epilogues", default="1", help=argparse.SUPPRESS)
    args = parser.parse_args()
    model = args.model or _default_model()
    if args.cold_child is not None:
        return cold_child(model, args.cold_child, args.epilogues == "1")
    if args.rounds:
        warm(model, args.rounds)
    if args.cold:
        cold(model, args.cold)


if __name__ == "__main__":
    main()
