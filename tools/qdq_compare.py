"""QDQ models on vkep against ORT's CPU EP, with and without vkep's QDQ groups (EP option `qdq`).

    .venv/bin/python tools/qdq_compare.py [all_ops] [squeezenet] [resnet50] [PATH.onnx[:1x3x320x320] ...]

Each float model (vkep's default model, ONNX's light models, a PATH without DequantizeLinear nodes) is quantized
here with ORT's quantize_static (random calibration data in [-1, 1]; the first input's shape after the colon where
the model's is symbolic) three ways: per-channel int8 weights and uint8 activations with reduce_range 0 and 1, and
quantize_static's defaults (QDQ, per-tensor int8 weights, int8 activations, reduce_range 0); a
PATH with DequantizeLinear nodes is a QDQ model taken as it is. For each model and `qdq=0` / `qdq=1` it prints
the nodes on vkep, the kernel executions a run, the largest difference from the CPU EP over three random inputs,
also in quantization steps of each output (the scale of the DequantizeLinear that makes it, where one does), and
the median time of a run (five, the two settings alternated). The CPU EP fuses Q/DQ groups into its QLinear
kernels; vkep without `qdq` computes the unfused nodes in float.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import vkep  # noqa: E402
from vkep import models, runner  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def float_models() -> dict:
    return {"all_ops": models.all_ops, "squeezenet": lambda: onnx.load(LIGHT / "light_squeezenet.onnx"),
            "resnet50": lambda: onnx.load(LIGHT / "light_resnet50.onnx")}


def random_feeds(model: onnx.ModelProto, seed: int, shape: tuple[int, ...] | None) -> dict:
    """vkep.models.random_inputs, with the first input of `shape` where one is given."""
    feeds = models.random_inputs(model, seed=seed)
    if shape is not None:
        first = model.graph.input[0].name
        feeds[first] = np.random.default_rng(seed).uniform(-1, 1, shape).astype(feeds[first].dtype)
    return feeds


# quantize_static's keyword arguments by variant ("defaults": none)
VARIANTS = {"reduce_range=0": {"per_channel": True, "activation_type": "QUInt8", "reduce_range": False},
            "reduce_range=1": {"per_channel": True, "activation_type": "QUInt8", "reduce_range": True},
            "defaults": {}}


def quantized(model: onnx.ModelProto, variant: str, where: Path, shape) -> onnx.ModelProto:
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize_static

    src, dst = where / "float.onnx", where / "qdq.onnx"
    onnx.save(model, src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([random_feeds(model, s, shape) for s in range(8)])

        def get_next(self):
            return next(self.batches, None)

    kwargs = {k: QuantType[v] if k == "activation_type" else v for k, v in VARIANTS[variant].items()}
    quantize_static(str(src), str(dst), Reader(), **kwargs)
    return onnx.load(dst)


def output_steps(model: onnx.ModelProto) -> dict[str, float]:
    """The quantization step of each graph output that a per-tensor DequantizeLinear makes."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    steps = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in {o.name for o in model.graph.output}:
            scale = inits.get(node.input[1])
            if scale is not None and scale.size == 1:
                steps[node.output[0]] = float(scale.reshape(()))
    return steps


def compare(name: str, model: onnx.ModelProto, shape, timed: int = 5) -> None:
    cpu = runner.cpu_session(model)
    steps = output_steps(model)
    names = [o.name for o in cpu.get_outputs()]
    sessions = {qdq: runner.vkep_session(model, ep_options={"qdq": qdq}) for qdq in ("0", "1")}
    times: dict[str, list[float]] = {qdq: [] for qdq in sessions}
    feeds = random_feeds(model, 100, shape)
    for _ in range(timed):  # (alternated: the machine's load moves both alike)
        for qdq, session in sessions.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[qdq].append(time.perf_counter() - start)
    for qdq, session in sessions.items():
        placed = runner.placement(session)
        on_vkep = sum(ep == "VulkanExecutionProvider" for *_, ep in placed)
        worst, worst_steps = 0.0, 0.0
        for seed in range(3):
            feeds = random_feeds(model, 100 + seed, shape)
            want = cpu.run(None, feeds)
            vkep.reset_stats()
            got = session.run(None, feeds)
            stats = vkep.stats()["process"]
            for out, a, b in zip(names, got, want, strict=True):
                d = float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0
                worst = max(worst, d)
                if out in steps:
                    worst_steps = max(worst_steps, d / steps[out])
        executions = stats["nodes_replayed_natively"] + stats["nodes_python_path"]
        print(f"{name:28s} qdq={qdq}: {on_vkep}/{len(placed)} nodes on vkep, {executions} kernel executions a run, "
              f"max |vkep - CPU EP| {worst:.4g} ({worst_steps:.3g} output steps), "
              f"median run {1000 * statistics.median(times[qdq]):.1f} ms", flush=True)


def main(argv: list[str]) -> None:
    wanted = argv or ["all_ops", "squeezenet", "resnet50"]
    makers = float_models()
    with tempfile.TemporaryDirectory() as tmp:
        for arg in wanted:
            name, _, dims = arg.partition(":")
            shape = tuple(int(d) for d in dims.split("x")) if dims else None
            model = makers[name]() if name in makers else onnx.load(name)
            label = Path(name).stem
            if any(n.op_type == "DequantizeLinear" for n in model.graph.node):
                compare(label, model, shape)
                continue
            for variant in VARIANTS:
                where = Path(tmp) / f"{label}_{variant}"
                where.mkdir()
                compare(f"{label} {variant}", quantized(model, variant, where, shape), shape)


if __name__ == "__main__":
    main(sys.argv[1:])
