"""Registration, device discovery and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import onnxruntime as ort

import vkep
from vkep import cli
from vkep.gpu.device import physical_devices

METADATA_KEYS = {"vulkan.device_name", "vulkan.driver", "vulkan.api_version", "vulkan.vendor_id",
                 "vulkan.unified_memory"}


def test_one_ep_device_per_usable_vulkan_device(ep_devices):
    usable = [d for d in physical_devices() if d.usable]
    assert len(ep_devices) == len(usable)
    for ep_device, info in zip(ep_devices, usable, strict=True):
        assert ep_device.ep_name == "VulkanExecutionProvider"
        assert ep_device.ep_vendor == "vkep"
        meta = dict(ep_device.ep_metadata)
        assert METADATA_KEYS <= meta.keys()
        assert meta["vulkan.device_name"] == info.name
        assert meta["vulkan.unified_memory"] == ("1" if info.unified_memory else "0")
        assert meta["library_path"] == vkep.get_library_path()


def test_register_twice_returns_the_same_devices(ep_devices):
    assert [d.ep_name for d in vkep.register()] == [d.ep_name for d in ep_devices]


def test_memory_infos_for_default_and_host_accessible(ep_devices):
    for ep_device in ep_devices:
        default = ep_device.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
        host = ep_device.memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE)
        assert default is not None and host is not None


def test_unregister_is_clean_and_registration_can_repeat():
    code = textwrap.dedent("""
        import numpy as np, onnxruntime as ort, vkep
        from vkep import models, runner
        for round in range(2):
            devices = vkep.register()
            model = models.add_chain(3)
            session = runner.vkep_session(model, disable_cpu_fallback=True)
            feeds = models.random_inputs(model)
            ok = np.allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
            del session
            vkep.unregister()
            left = [d for d in ort.get_ep_devices() if d.ep_name == "VulkanExecutionProvider"]
            print(f"round {round}: {len(devices)} device(s), correct={ok}, left after unregister={len(left)}")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ})
    assert result.returncode == 0, result.stderr
    for round_ in range(2):
        assert f"round {round_}: 1 device(s), correct=True, left after unregister=0" in result.stdout, result.stdout


def test_cli_devices(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "usable by vkep" in out and physical_devices()[0].name in out
    assert cli.main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {"name", "driver", "api_version", "vendor_id", "unified_memory", "usable", "missing"} <= rows[0].keys()


def test_cli_run_default_model(ep_devices, capsys):
    assert cli.main(["run", "--runs", "2", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "placement: 22 / 22 nodes on vkep" in out
    assert "outputs (difference from the CPU EP):" in out and "verdict: vkep runs the model" in out
    assert '"uploads"' in out


def test_cli_shaders_build(capsys):
    assert cli.main(["shaders", "build"]) == 0
    out = capsys.readouterr().out
    assert "variants:" in out and "0 failed" in out
