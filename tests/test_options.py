"""vkep's settings: one registry (vkep/options.py), the README's tables rendered from it, EP options validated
when a session is created, environment variables read through it only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from conftest import tolerance

import vkep
from vkep import models, options, runner
from vkep.gpu.device import open_device

ROOT = Path(__file__).resolve().parents[1]


def _readme_table(header: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(header)
    return text[start:text.index("\n\n", start)]


def test_readme_tables_are_the_registry():
    assert _readme_table("| Option | Meaning | Default |") == options.markdown_table(options.SESSION)
    assert _readme_table("| Variable | Meaning | Default |") == options.markdown_table(options.PROCESS)


def test_environment_is_read_only_through_the_registry():
    reads = re.compile(r"os\.environ\s*(\.get|\[)|os\.getenv|environ\.get")
    # diagnose.py quotes the Vulkan loader's own variables (VK_DRIVER_FILES) in its messages; build.py sets the
    # C compiler's LDSHARED for its link (a build step, not a setting of vkep's); conformance/matrix.py puts a
    # driver's library directory before the LD_LIBRARY_PATH its workers inherit (the dynamic linker's variable)
    others = {"options.py", "diagnose.py", "build.py", "matrix.py"}
    found = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "vkep").rglob("*.py") if path.name not in others
             for n, line in enumerate(path.read_text().splitlines(), 1) if reads.search(line)]
    assert not found, f"environment read outside vkep/options.py: {found}"
    # and every variable the registry declares is read somewhere (no dead entries)
    code = "".join(path.read_text() for path in (ROOT / "vkep").rglob("*.py") if path.name != "options.py")
    read = set(re.findall(r'options\.env\("(\w+)"\)', code))
    assert read == {s.name for s in options.ENV_VARS}


def _session(ep_options: dict[str, str], model=None):
    model = model or models.add_chain(3)
    return runner.vkep_session(model, disable_cpu_fallback=True, ep_options=ep_options)


@pytest.mark.parametrize("ep_options,expect", [
    ({"prepack_cahce": "ort"}, "unknown EP option 'prepack_cahce'; vkep's EP options are: device, allow_cpu_device, "
                               "prepack_cache, memory_budget_mb, fp16, int8, subgroups, coopmat, host_import, epilogues, wait_limit_s"),
    ({"prepack_cache": "disk"}, "EP option prepack_cache='disk' is not valid: expected 'vkep' or 'ort'"),
    ({"fp16_accumulation": "half"},
     "EP option fp16_accumulation='half' is not valid: expected 'float32' or 'float16'"),
    ({"fp16": "maybe"}, "EP option fp16='maybe' is not valid: expected 'auto', or 1, 0, true"),
    ({"allow_cpu_device": "2"}, "EP option allow_cpu_device='2' is not valid: expected 1, 0, true"),
    ({"memory_budget_mb": "-1"}, "EP option memory_budget_mb='-1' is not valid: expected a number of MiB >= 0"),
    ({"memory_budget_mb": "lots"}, "EP option memory_budget_mb='lots' is not valid"),
    ({"device": "no such gpu"}, "EP option device='no such gpu' matches no Vulkan device vkep can use; they are: #0"),
    ({"device": "99"}, "EP option device='99' matches no Vulkan device"),
])
def test_bad_ep_options_fail_session_creation_and_the_process_goes_on(ep_devices, ep_options, expect):
    with pytest.raises(Exception) as info:
        _session(ep_options)
    assert expect in str(info.value)
    assert "INVALID_ARGUMENT" in str(info.value)
    model = models.add_chain(3)
    feeds = models.random_inputs(model)
    got = _session({}).run(None, feeds)[0]
    np.testing.assert_allclose(got, runner.cpu_session(model).run(None, feeds)[0], **tolerance(np.float32))


def test_every_ep_option_accepts_its_default(ep_devices):
    defaults = {s.name: s.default for s in options.EP_OPTIONS}
    assert options.parse_session(defaults) == options.parse_session({})
    runner.vkep_session(models.add_chain(3), ep_options=defaults)  # (allow_cpu_device=0: maybe no node on vkep)


def _fp16_placement(fp16: str) -> set[str]:
    model = models.add_chain(3, dtype=np.float16)
    so = runner.session_options(ep_options={"fp16": fp16})
    session = ort.InferenceSession(model.SerializeToString(), sess_options=so, enable_fallback=0)
    feeds = models.random_inputs(model)
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0],
                               **tolerance(np.float16))
    return {ep for _, _, ep in runner.placement(session)}


def test_fp16_off_leaves_float16_nodes_to_other_eps(ep_devices):
    if not open_device(0).info.features["fp16"]:
        pytest.skip("no 16-bit storage on this device")
    assert _fp16_placement("auto") == {vkep.EP_NAME}
    assert _fp16_placement("1") == {vkep.EP_NAME}
    assert _fp16_placement("0") == {"CPUExecutionProvider"}
    # float32 nodes of an fp16=0 session still run on vkep
    assert {ep for _, _, ep in runner.placement(_session({"fp16": "0"}))} == {vkep.EP_NAME}


def test_memory_budget_is_the_smallest_of_the_live_sessions(ep_devices):
    memory = open_device(0).memory
    assert memory.budget == 0
    a = _session({"memory_budget_mb": "512"})
    assert memory.budget == 512 << 20
    b = _session({"memory_budget_mb": "256.5"})
    assert memory.budget == int(256.5 * (1 << 20))
    del b
    assert memory.budget == 512 << 20
    del a
    assert memory.budget == 0


def _child(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300, cwd=ROOT)


def test_a_bad_environment_variable_names_itself():
    result = _child("""
        import vkep
        try:
            vkep.register()
        except Exception as exc:
            print("ERROR:", exc)
    """, {"VKEP_VALIDATION": "maybe"})
    assert result.returncode == 0, result.stderr
    assert "ERROR: vkep: VKEP_VALIDATION='maybe' is not valid: expected 1, 0, true, false" in result.stdout


def test_flags_read_the_same_everywhere():
    flag = options.SETTINGS["VKEP_DEBUG_HAZARDS"]
    assert [flag.parse(v) for v in ("1", "true", "YES", "on", "0", "false", "No", "off")] == [True] * 4 + [False] * 4
    assert options.SETTINGS["allow_cpu_device"].parser is flag.parser
