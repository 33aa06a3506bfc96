"""`vkep dev --model MODEL.onnx`: one ORT session kept alive across saves (the swap reaches it), rerun each time."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import onnx

from vkep import runner
from vkep.dev.cases import QUIET, largest_error
from vkep.run import dims, inputs


@dataclass
class ModelResult:
    vs_cpu: float  # max |vkep - CPU EP| over the outputs
    vs_previous: float | None  # max |this save's outputs - the previous save's|
    latency_ms: float  # median host time of a session run
    nodes_on_vkep: int
    nodes: int


class LiveModel:
    def __init__(self, path: str, seed: int = 0, runs: int = 5):
        self.path = path
        self.runs = runs
        model = onnx.load(path)
        choice = dims.choose(model)
        self.feeds, _ = inputs.make(model, choice, {}, seed)
        self.session = runner.vkep_session(model, free_dims=choice.overrides, log_severity=QUIET)
        self.want = runner.cpu_session(model, free_dims=choice.overrides, log_severity=QUIET).run(None, self.feeds)
        placed = runner.placement(self.session)
        self.nodes = len(placed)
        self.nodes_on_vkep = sum(ep == "VulkanExecutionProvider" for _, _, ep in placed)
        self.previous: list[np.ndarray] | None = None

    def run(self) -> ModelResult:
        got = self.session.run(None, self.feeds)  # the first run after a swap rebuilds the swapped pipelines
        times = []
        for _ in range(self.runs):
            start = time.perf_counter()
            self.session.run(None, self.feeds)
            times.append(time.perf_counter() - start)
        vs_cpu = max((largest_error(g, w) for g, w in zip(got, self.want, strict=True)), default=0.0)
        vs_previous = None if self.previous is None else max(
            (largest_error(g, p) for g, p in zip(got, self.previous, strict=True)), default=0.0)
        self.previous = got
        return ModelResult(vs_cpu, vs_previous, statistics.median(times) * 1e3, self.nodes_on_vkep, self.nodes)
