"""Test set-up: real ORT sessions with vkep loaded as a plugin, on a real Vulkan device, with the Khronos
validation layer on; any validation message fails the test that caused it."""

from __future__ import annotations

import os

os.environ.setdefault("VKEP_VALIDATION", "1")  # before vkep creates its VkInstance

import pytest  # noqa: E402

import vkep  # noqa: E402
from vkep.conformance.generated import FP16_TOL, FP32_TOL, tolerance  # noqa: E402, F401 (the tests import them from here)
from vkep.gpu.device import validation_messages  # noqa: E402


@pytest.fixture(scope="session")
def ep_devices():
    devices = vkep.register()
    assert devices, "vkep registered no device: is a Vulkan driver (lavapipe) installed?"
    return devices


@pytest.fixture(autouse=True)
def no_validation_messages():
    validation_messages()  # drop anything from before this test
    yield
    count, text = validation_messages()
    assert count == 0, f"{count} Vulkan validation message(s):\n{text}"


def quantize_static_model(model, batches: list[dict], directory, **options):
    """`model` (an onnx.ModelProto) quantized by ORT's quantize_static over the calibration feeds `batches`, with
    quantize_static's keyword `options` (its defaults where none: QDQ, int8 activations and weights), through
    files in `directory`."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter(batches)

        def get_next(self):
            return next(self.batches, None)

    source, target = directory / "float.onnx", directory / "quantized.onnx"
    onnx.save(model, source)
    quantize_static(str(source), str(target), Reader(), **options)
    return onnx.load(target)


def cpu_ops(model, directory) -> list[str]:
    """The op types of the graph ORT's CPU EP runs at the default optimisation level (its optimized model, written
    into `directory`): which nodes it fuses."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(directory / "cpu.onnx")
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]


def kernel_executions(session, feeds: dict) -> tuple[list, int]:
    """(outputs, vkep's kernel executions in the second run: nodes, or fused groups)."""
    session.run(None, feeds)
    vkep.reset_stats()
    out = session.run(None, feeds)
    stats = vkep.stats()["process"]
    return out, stats["nodes_replayed_natively"] + stats["nodes_python_path"]


@pytest.fixture
def float_products(monkeypatch):
    """The products the float path records (integer_float.product's calls)."""
    calls = []
    from vkep.kernels import integer_float

    real = integer_float.product

    def counted(*args, **kwargs):
        calls.append(args[5]["K"])  # (kernel, call, a, b, y, members, batches)
        return real(*args, **kwargs)

    monkeypatch.setattr(integer_float, "product", counted)
    return calls
