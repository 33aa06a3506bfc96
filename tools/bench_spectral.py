#!/usr/bin/env python3
"""Spectral ops of audio front ends on vkep beside ORT's CPU EP, in one run: STFT of 16 kHz audio with a Hann window
(n_fft 400 / 512 / 1024), and a batch of DFT frames; medians of warm runs and their ratio.

    .venv/bin/python tools/bench_spectral.py [--runs 15] [--seconds 3]

A benchmark, not a test: it asserts nothing. On a loaded machine every time grows: compare within one run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from vkep import runner


def _model(op: str, x_shape, inits: dict, names: list[str], **attrs):
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def _median_ms(session, feeds, runs: int) -> float:
    session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--seconds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = []
    for n_fft, hop, batch in ((400, 160, 1), (512, 160, 2), (1024, 256, 1)):
        x = rng.standard_normal((batch, args.seconds * 16000, 1)).astype(np.float32)
        window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)
        model = _model("STFT", x.shape, {"step": np.array(hop, np.int64), "w": window}, ["x", "step", "w"])
        cases.append((f"STFT n_fft {n_fft} hop {hop}, {args.seconds} s x {batch}", model, x))
    frames = rng.standard_normal((300, 400, 1)).astype(np.float32)
    cases.append(("DFT 300 frames x 400, onesided", _model("DFT", frames.shape, {}, ["x"], onesided=1), frames))
    print(f"{'case':<36} {'vkep ms':>9} {'CPU EP ms':>10} {'ratio':>7}")
    for name, model, x in cases:
        vkep = _median_ms(runner.vkep_session(model, disable_cpu_fallback=True), {"x": x}, args.runs)
        cpu = _median_ms(runner.cpu_session(model), {"x": x}, args.runs)
        print(f"{name:<36} {vkep:9.2f} {cpu:10.2f} {vkep / cpu:7.2f}")


if __name__ == "__main__":
    main()
