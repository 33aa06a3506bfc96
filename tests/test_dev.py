"""`vkep dev`: one cycle checks and times a kernel; a broken save keeps the last good pipelines; a good one is
swapped into a live session. Shaders are edited in a temporary copy of the shader directory, never in the package."""

from __future__ import annotations

import io
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import resources
from vkep.gpu import shaders

RELU_LINE = "    case OP_RELU: return v < 0.0 ? 0.0 : v;  // not max(): keeps NaN\n"  # unary_ops.glsl (float)
RELU_FILE = "unary_ops.glsl"  # (unary.comp and fused.comp include it)
TIMING = re.compile(r"\[(gpu timestamps|host timing)")


@pytest.fixture
def shader_copy(tmp_path, ep_devices):
    """A copy of the package's shaders that vkep compiles from for the test; afterwards the package's again,
    with the pipelines the copy made swapped out of every live session."""
    copy = tmp_path / "shaders"
    shutil.copytree(resources.SHADER_DIR, copy)
    assert RELU_LINE in (copy / RELU_FILE).read_text()
    before = shaders.SHADER_DIR
    shaders.set_shader_dir(copy)
    yield copy
    shaders.set_shader_dir(before)
    from vkep.ort.swap import swap_shader

    swap_shader("unary.comp")
    swap_shader("fused.comp")


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _loop(kernel: str, model: str | None = None):
    from vkep.dev.loop import DevLoop

    out = io.StringIO()
    return DevLoop(kernel, model=model, out=out), out


def test_once_prints_the_largest_error_and_a_labelled_timing():
    env = {**os.environ, "VKEP_VALIDATION": "1"}
    res = subprocess.run([sys.executable, "-m", "vkep.cli", "dev", "Relu", "--once"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"reference case\(s\) vs the CPU EP: max error 0 in Relu-", res.stdout), res.stdout
    assert TIMING.search(res.stdout), res.stdout
    assert re.search(r"result +\d+\.\d\d s after the start", res.stdout), res.stdout


def test_a_shader_file_names_every_entry_it_serves(shader_copy, tmp_path):
    """KERNEL may be a shader file: by name (in the shader directory) or by path (its directory becomes the shader
    directory); the loop then checks every manifest entry that uses it. An include alone is refused, naming why."""
    from vkep.dev.loop import DevLoop
    from vkep.dev.target import resolve

    by_name = resolve("cumsum.comp")
    assert sorted(s.op for s in by_name.specs) == ["CumProd", "CumSum"] and by_name.shaders == ["cumsum.comp"]
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(shader_copy, elsewhere)
    by_path = resolve(str(elsewhere / "cumsum.comp"))
    assert Path(shaders.SHADER_DIR).resolve() == elsewhere.resolve()
    assert [s.name for s in by_path.specs] == [s.name for s in by_name.specs]
    with pytest.raises(ValueError, match="no manifest entry uses the shader common.glsl"):
        resolve("common.glsl")
    out = io.StringIO()
    loop = DevLoop(str(elsewhere / "cumsum.comp"), out=out)
    try:
        outcome = loop.cycle()
        assert outcome.results and all(r.ok for r in outcome.results)  # (float16 sums: within tolerance)
        names = {r.name.split("-")[0] for r in outcome.results}
        assert names == {"CumSum", "CumProd"}, names
        assert TIMING.search(out.getvalue()), out.getvalue()
    finally:
        loop.close()
        shaders.set_shader_dir(shader_copy)


def test_compile_error_shows_file_line_and_keeps_the_last_good_pipelines(shader_copy):
    loop, out = _loop("Relu")
    try:
        good = loop.cycle()
        assert good.max_error == 0 and good.micros and all(r.ok for r in good.results)
        _edit(shader_copy / RELU_FILE, RELU_LINE, RELU_LINE.replace("v;", "v +;"))
        broken = loop.cycle([shader_copy / RELU_FILE])
        text = out.getvalue()
        line = 1 + (shader_copy / RELU_FILE).read_text().splitlines().index(RELU_LINE.rstrip("\n").replace(
            "v;", "v +;"))
        assert broken.kept_last_good
        assert f"{shader_copy / RELU_FILE}:{line}:" in text, text
        assert "kept      the last good pipelines: max error 0" in text, text
        # the live sessions still run the last good shader
        assert all(case.check().ok for case in loop.cases)
        # the fixed save: compiled, checked and timed again, each figure beside the last good save's
        _edit(shader_copy / RELU_FILE, RELU_LINE.replace("v;", "v +;"), RELU_LINE)
        fixed = loop.cycle([shader_copy / RELU_FILE])
        assert not fixed.kept_last_good and fixed.max_error == 0 and fixed.micros > 0
        text = out.getvalue()[len(text):]
        assert "compile   FAILED" not in text and "validated by spirv-val" in text, text
        assert re.search(r"check +\d+ reference case\(s\) vs the CPU EP: max error 0 \(was 0\)", text), text
        assert re.search(r"time +Relu-\S+: [\d.]+ .s \(was [\d.]+ .s.*\) \[(gpu timestamps|host timing)", text), text
        assert re.search(r"result +\d+\.\d\d s after the start", text), text
    finally:
        loop.close()


def _relu_model(path: Path) -> str:
    """y = Relu(x * w): Relu's input has both signs; the session fuses the two (fused.comp includes the formula
    that the edits change)."""
    w = numpy_helper.from_array(np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16), "w")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_a_save_is_swapped_into_the_live_model_session(shader_copy, tmp_path):
    loop, out = _loop("Relu", model=_relu_model(tmp_path / "relu.onnx"))
    unary = shader_copy / RELU_FILE
    try:
        first = loop.cycle()
        session = loop.model.session
        assert first.model.vs_cpu == 0 and first.model.nodes_on_vkep == 2
        _edit(unary, RELU_LINE, RELU_LINE.replace(": v;", ": v + 1.0;"))  # Relu adds 1 to positive values
        edited = loop.cycle([unary])
        assert loop.model.session is session  # the same session, not a new one
        assert edited.model.vs_cpu == pytest.approx(1.0) and edited.model.vs_previous == pytest.approx(1.0)
        assert not any(r.ok for r in edited.results if r.name.endswith("float32"))  # the reference cases see it too
        _edit(unary, RELU_LINE.replace(": v;", ": v + 1.0;"), RELU_LINE)
        restored = loop.cycle([unary])
        assert loop.model.session is session
        assert restored.model.vs_cpu == 0 and restored.max_error == 0
        text = out.getvalue()
        assert "max |vkep - CPU EP| 1 (was 0)" in text, text
        assert "live node(s) rebuild their pipelines (sessions kept)" in text
    finally:
        loop.close()


def test_watching_reruns_on_a_save_and_prints_save_to_result(tmp_path):
    """The real watch loop (watchfiles), in its own process: a save in the watched copy triggers a cycle."""
    copy = tmp_path / "shaders"
    shutil.copytree(resources.SHADER_DIR, copy)
    proc = subprocess.Popen([sys.executable, "-u", "-m", "vkep.cli", "dev", "Relu", "--shader-dir", str(copy)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def read_until(pattern: str, seconds: float = 60) -> str:
        seen, deadline = [], time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                continue
            if re.search(pattern, seen[-1]):
                return "".join(seen)
        raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(seen)}")

    try:
        read_until(r"^ +watching .*unary\.comp")
        time.sleep(1)  # (the watcher starts just after the line)
        _edit(copy / RELU_FILE, RELU_LINE, RELU_LINE.replace(": v;", ": v + 1.0;"))
        text = read_until(r"result +\d+\.\d\d s after the save")
        assert f"-- vkep dev Relu: {RELU_FILE} at" in text, text
        assert re.search(r"max error 1 \(was 0\) in Relu-\d+-float", text), text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_manifest_save_remakes_the_cases_from_new_test_hints(tmp_path, monkeypatch, ep_devices):
    copy = tmp_path / "kernels.yaml"
    shutil.copy(resources.MANIFEST, copy)
    monkeypatch.setenv("VKEP_MANIFEST", str(copy))
    entry = "shader: unary.comp, constants: {op: 0}}"
    assert copy.read_text().count(entry) == 1
    loop, out = _loop("Relu")
    try:
        loop.cycle()
        assert {c.feeds["in0"].shape for c in loop.cases} == {(2, 3, 4)}
        _edit(copy, entry, entry[:-1] + ", test: {shapes: [[5, 7, 9]]}}")
        remade = loop.cycle([copy.resolve()])
        assert {c.feeds["in0"].shape for c in loop.cases} == {(5, 7, 9)}
        assert remade.max_error == 0 and "test hints reloaded" in out.getvalue()
        _edit(copy, "constants: {op: 0}", "constants: {op: 1}")
        loop.cycle([copy.resolve()])
        assert "the entry's constants changed: restart vkep dev" in out.getvalue()
    finally:
        loop.close()


def test_timing_labels_gpu_timestamps_and_falls_back_to_host_timing(ep_devices):
    """lavapipe's compute queue writes timestamps (64 valid bits, 1 ns a tick); without a timer the figure is a
    session run's host time, labelled so."""
    from vkep.gpu.timing import timestamp_support

    loop, _ = _loop("Relu")
    try:
        outcome = loop.cycle()
        case = next(c for c in loop.cases if c.case.dtype == "float32")
        bits, period = timestamp_support(case.kernels[0].gpu.info)
        assert bits > 0 and period > 0  # (on a device without timestamps this test would have nothing to check)
        assert outcome.timing.startswith("gpu timestamps") and outcome.micros > 0
        micros, how = case.time(None)
        assert how.startswith("host timing: session run") and micros > 0
    finally:
        loop.close()


def test_a_swap_is_refused_while_a_session_replays_a_captured_graph(ep_devices):
    """A captured graph's command buffers hold its pipelines: swapping them out from under it is refused."""
    import onnxruntime as ort

    from vkep import runner
    from vkep.gpu.device import physical_devices
    from vkep.models import add_chain
    from vkep.ort.factory import shares_host_memory
    from vkep.ort.swap import SwapRefused, swap_shader

    session = runner.vkep_session(add_chain(3, shape=(4, 16)), ep_options={"enable_graph_capture": "1"})
    kind = "HOST_ACCESSIBLE" if shares_host_memory(physical_devices()[0]) else "DEFAULT"
    info = ep_devices[0].memory_info(getattr(ort.OrtDeviceMemoryType, kind))
    x, y = (ort.OrtValue.ortvalue_from_shape_and_type([4, 16], np.float32, memory_info=info) for _ in range(2))
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    session.run_with_iobinding(binding)  # captures
    with pytest.raises(SwapRefused, match="captured graph"):
        swap_shader("binary.comp")
    del binding, session
    assert swap_shader("binary.comp") >= 0  # the session is gone: nothing refuses
