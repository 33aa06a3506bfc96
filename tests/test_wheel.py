"""vkep as a user installs it: the wheel built from a clean clone, installed into a fresh virtualenv outside the
checkout, run by a user who cannot write site-packages, with no compiler and no shader tool on PATH.

One test, in steps, because each step needs the one before (the build alone takes about a minute).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What the user runs: ORT's own API, the two lines of the README, then a model with every node on vkep.
USER_SCRIPT = textwrap.dedent("""
    import json, shutil, sys
    import numpy as np
    import onnxruntime as ort
    import vkep
    from vkep import models

    hidden = {tool: shutil.which(tool) for tool in ("gcc", "cc", "glslangValidator", "spirv-val")}
    ort.register_execution_provider_library("vkep", vkep.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name in vkep.get_ep_names()]
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {"allow_cpu_device": "1"})  # lavapipe: a CPU device is asked for
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    model = models.all_ops().SerializeToString()
    session = ort.InferenceSession(model, sess_options=so)
    feeds = {i.name: np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
             .astype(np.float32) for i in session.get_inputs()}
    got = session.run(None, feeds)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    placed = [sub.ep_name for sub in session.get_provider_graph_assignment_info() for _ in sub.get_nodes()]
    print(json.dumps({"hidden": hidden, "devices": [d.ep_name for d in devices], "placed": placed,
                      "max_diff": max(float(np.abs(g - w).max()) for g, w in zip(got, want)),
                      "vkep": vkep.__file__, "ort": ort.__version__, "executable": sys.executable}))
""")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _python_for_users() -> str:
    """An interpreter of this Python's version that another user can run (pyenv's lives under /root)."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{name}", f"/usr/local/bin/{name}", shutil.which(name)):
        if candidate and os.access(candidate, os.X_OK):
            probe = subprocess.run(["runuser", "-u", "nobody", "--", candidate, "-c", "import venv"],
                                   capture_output=True)
            if probe.returncode == 0:
                return candidate
    pytest.skip(f"no {name} that the user nobody can run")


def _tree(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in path.rglob("*")}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root to run as another user")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="builds from a git clone of the checkout")
def test_wheel_installs_and_runs_as_a_user():
    work = Path(tempfile.mkdtemp(prefix="vkep-wheel-"))
    try:
        work.chmod(0o755)
        # 1. the wheel, built from a clean clone (what is committed), by the project's own build
        clone = work / "clone"
        _run(["git", "clone", "-q", str(ROOT), str(clone)])
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(clone)])
        (wheel,) = (work / "dist").glob("vkep-*.whl")
        tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
        assert f"-{tag}-{tag}-linux_" in wheel.name, wheel.name  # a platform wheel, not py3-none-any
        names = zipfile.ZipFile(wheel).namelist()
        assert "vkep/kernels.yaml" in names and "vkep/spirv/index.json" in names
        assert any(n.startswith("vkep/_native/_vkep_plugin.") and n.endswith(".so") for n in names)
        assert sum(n.endswith(".spv") for n in names) >= 94
        with zipfile.ZipFile(wheel) as z:
            for n in names:
                if n.endswith(".so"):  # no path of the build machine in a binary
                    data = z.read(n)
                    for path in (str(ROOT), str(clone), str(Path(sys.base_prefix)), "/root/"):
                        assert path.encode() not in data, (n, path)

        # 2. a fresh virtualenv outside the checkout, the wheel and its dependencies from PyPI
        venv = work / "venv"
        _run([_python_for_users(), "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
        site = Path(_run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                          ]).stdout.strip())
        before = _tree(venv)

        # 3. run as a user who cannot write site-packages, with nothing on PATH but the venv
        home, cache = work / "home", work / "xdg-cache"
        for d in (home, cache):
            d.mkdir()
            shutil.chown(d, "nobody")
        script = work / "user.py"
        script.write_text(USER_SCRIPT)
        env = {"PATH": str(venv / "bin"), "HOME": str(home), "XDG_CACHE_HOME": str(cache), "LANG": "C.UTF-8"}
        done = _run(["runuser", "-u", "nobody", "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                     str(venv / "bin" / "python"), str(script)], cwd=str(home))
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["hidden"] == dict.fromkeys(("gcc", "cc", "glslangValidator", "spirv-val")), report
        assert report["vkep"].startswith(str(site)), report  # the installed package, not the checkout
        assert report["devices"] and set(report["placed"]) == {"VulkanExecutionProvider"}, report
        assert report["max_diff"] < 1e-3, report

        # nothing written beside the package; vkep's files only below its cache directory
        assert _tree(venv) == before
        # (ORT keeps its own files in the cache directory, under Microsoft/, and Mesa its shader cache)
        others = {"Microsoft", "mesa_shader_cache"}
        written = [p for root in (cache, home) for p in root.rglob("*") if p.is_file() and not others & set(p.parts)]
        assert written and all(p.is_relative_to(cache / "vkep") for p in written), written
        assert not (cache / "vkep" / "spirv").exists(), "SPIR-V compiled at run time: the wheel should ship it"

        # 4. a C host (no Python in it) loads the installed plugin through ORT's C API: vkep's loader brings the
        # Python runtime; session.disable_cpu_ep_fallback makes creation fail unless every node is on vkep
        if shutil.which("gcc"):
            host = work / "run_model"
            _run(["gcc", "-O1", "-o", str(host), str(ROOT / "tests" / "c_host" / "run_model.c"), "-ldl"])
            model = work / "chain.onnx"
            _run([str(venv / "bin" / "python"), "-c", "import sys; from vkep import models; "
                  "open(sys.argv[1], 'wb').write(models.add_chain(3).SerializeToString())", str(model)])
            (libort,) = (site / "onnxruntime" / "capi").glob("libonnxruntime.so.*")
            library = site / "vkep" / "_native" / "libvkep_ep.so"
            done = _run(["runuser", "-u", "nobody", "--", "env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}",
                         f"XDG_CACHE_HOME={cache}", str(host), str(libort), str(library), str(model)], cwd=str(home))
            assert "vkep devices: 1" in done.stdout, done.stdout + done.stderr
            y = [float(v) for v in done.stdout.split("y:")[1].split()]
            assert len(y) == 16 and all(abs(v - (i - 8)) < 0.01 for i, v in enumerate(y)), y  # x + three tiny Adds

        # 5. uninstall leaves nothing of vkep behind
        _run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "vkep"])
        left = [p for p in site.iterdir() if p.name.startswith("vkep")] + list(venv.glob("bin/vkep*"))
        assert not left, left
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_onnxruntime_range_is_declared_once():
    """pyproject's requirement is the range the plugin checks at registration (vkep.ort.api.SUPPORTED_ORT), from
    the ORT API version the plugin implements."""
    import tomllib

    from vkep.ort import abi, api

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert api.SUPPORTED_ORT in deps
    assert api.SUPPORTED_ORT == f"onnxruntime>=1.{abi.ORT_API_VERSION},<2"
    assert api.unsupported_ort("1.31.1", 24) is None and api.unsupported_ort("1.24.0", 24) is None
    for old_or_new in ("1.23.2", "2.0.0"):
        message = api.unsupported_ort(old_or_new, 24)
        assert f"this is onnxruntime {old_or_new}" in message and "onnxruntime>=1.24,<2" in message
