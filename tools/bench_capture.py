#!/usr/bin/env python3
"""Per-run host time with and without graph capture (EP option enable_graph_capture), at 10, 100 and 1,000
nodes: a chain of tiny Adds (vkep.models.add_chain), inputs and outputs bound with IOBinding in vkep memory.

Host time is the calling thread's CPU time per run (time.thread_time: what the host spends, not the
device's work, which on lavapipe runs on other threads); wall time is printed beside it. Medians over
--runs runs after the first (which holds the warm-up and the captured run).

    .venv/bin/python tools/bench_capture.py [--nodes 10 100 1000] [--runs 50]

A benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import vkep  # noqa: E402
from vkep import runner  # noqa: E402
from vkep.gpu.device import physical_devices  # noqa: E402
from vkep.models import add_chain  # noqa: E402

SHAPE = (1, 16)


def per_run(nodes: int, capture: bool, runs: int, devices) -> tuple[float, float]:
    """(median host seconds, median wall seconds) per run."""
    from vkep.ort.factory import shares_host_memory  # (vkep.ort is there once vkep.register() loaded it)

    session = runner.vkep_session(add_chain(nodes, SHAPE), ep_options={"enable_graph_capture": "1" if capture else "0"})
    kind = "HOST_ACCESSIBLE" if shares_host_memory(physical_devices()[0]) else "DEFAULT"
    info = devices[0].memory_info(getattr(ort.OrtDeviceMemoryType, kind))
    x, y = (ort.OrtValue.ortvalue_from_shape_and_type(list(SHAPE), np.float32, memory_info=info) for _ in range(2))
    x.update_inplace(np.ones(SHAPE, np.float32))
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    session.run_with_iobinding(binding)  # warm-up (and, with capture, the captured run)
    host, wall = [], []
    for _ in range(runs):
        t, w = time.thread_time(), time.perf_counter()
        session.run_with_iobinding(binding)
        host.append(time.thread_time() - t)
        wall.append(time.perf_counter() - w)
    return statistics.median(host), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    devices = vkep.register()
    print(f"device: {devices[0].ep_metadata.get('vulkan.device_name')}, "
          f"{devices[0].ep_metadata.get('vulkan.driver')}")
    print(f"{'nodes':>6} {'host/run, nodes run':>20} {'host/run, captured':>19} {'ratio':>7} "
          f"{'wall/run, nodes run':>20} {'wall/run, captured':>19}")
    for n in args.nodes:
        plain_host, plain_wall = per_run(n, False, args.runs, devices)
        cap_host, cap_wall = per_run(n, True, args.runs, devices)
        print(f"{n:>6} {plain_host * 1e3:>17.3f} ms {cap_host * 1e3:>16.3f} ms {plain_host / cap_host:>6.1f}x "
              f"{plain_wall * 1e3:>17.3f} ms {cap_wall * 1e3:>16.3f} ms")


if __name__ == "__main__":
    main()
