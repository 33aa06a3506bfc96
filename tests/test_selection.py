"""Device selection: ORT's automatic policies never put a model on a CPU-implemented Vulkan device (lavapipe)
over the CPU EP; an application that asks for such a device gets it; each OrtEpDevice says what it is."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from conftest import tolerance

import vkep
from vkep import models, options, runner
from vkep.gpu.device import usable_devices

POLICIES = list(ort.OrtExecutionProviderDevicePolicy.__members__)  # DEFAULT, PREFER_CPU, ... MIN_OVERALL_POWER
MODEL = models.add_chain(4)
FEEDS = models.random_inputs(MODEL)


def _cpu_only_machine() -> bool:
    return all(d.cpu_implemented for d in usable_devices())


def _placement(session: ort.InferenceSession) -> set[str]:
    return {ep for _, _, ep in runner.placement(session)}


def _check(session: ort.InferenceSession) -> None:
    want = runner.cpu_session(MODEL).run(None, FEEDS)[0]
    np.testing.assert_allclose(session.run(None, FEEDS)[0], want, **tolerance(np.float32))


@pytest.mark.parametrize("policy", POLICIES)
def test_no_policy_puts_a_model_on_a_cpu_implemented_device(ep_devices, policy, capfd):
    if not _cpu_only_machine():
        pytest.skip("a GPU is present: PREFER_GPU/MAX_PERFORMANCE rightly choose it")
    so = ort.SessionOptions()
    so.set_provider_selection_policy(ort.OrtExecutionProviderDevicePolicy.__members__[policy])
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    session = ort.InferenceSession(MODEL.SerializeToString(), sess_options=so, enable_fallback=0)
    assert _placement(session) == {"CPUExecutionProvider"}
    _check(session)
    # the EP says why, at ORT's WARNING (the default level), with what to do about it
    err = capfd.readouterr().err
    assert "vkep: claims no node" in err and "allow_cpu_device=1" in err, err


def test_a_policy_session_that_names_the_device_gets_it(ep_devices):
    """An EP option given as a session config entry is an explicit ask, policy or not."""
    index = dict(ep_devices[0].ep_metadata)["vulkan.device_index"]
    so = ort.SessionOptions()
    so.set_provider_selection_policy(ort.OrtExecutionProviderDevicePolicy.PREFER_CPU)
    so.add_session_config_entry("ep.vulkanexecutionprovider.device", index)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    session = ort.InferenceSession(MODEL.SerializeToString(), sess_options=so, enable_fallback=0)
    assert _placement(session) == {vkep.EP_NAME}
    _check(session)


def _explicit(devices, ep_options: dict[str, str]) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, ep_options)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return ort.InferenceSession(MODEL.SerializeToString(), sess_options=so, enable_fallback=0)


def _asks(device) -> list[dict[str, str]]:
    meta = dict(device.ep_metadata)
    uuid = meta["vulkan.device_uuid"]
    dashed = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}".upper()
    return [{"device": meta["vulkan.device_index"]}, {"device": meta["vulkan.device_name"].split()[0].upper()},
            {"device": uuid}, {"device": dashed}, {"allow_cpu_device": "1"}]


def test_explicit_devices_run_on_vkep_when_asked(ep_devices):
    for ask in _asks(ep_devices[0]):
        session = _explicit(ep_devices, ask)
        assert _placement(session) == {vkep.EP_NAME}, ask
        _check(session)


def test_add_provider_for_devices_alone_on_a_cpu_implemented_device(ep_devices, capfd):
    """ORT gives the EP nothing to tell this from a policy's choice: the CPU EP runs the model, and the log
    says how to ask for the device."""
    if not _cpu_only_machine():
        pytest.skip("with a GPU, device=auto takes the GPU")
    session = _explicit(ep_devices, {})
    assert _placement(session) == {"CPUExecutionProvider"}
    _check(session)
    index = dict(ep_devices[0].ep_metadata)["vulkan.device_index"]
    assert f"EP option device={index}" in capfd.readouterr().err


def test_ep_devices_say_what_each_device_is(ep_devices):
    infos = {d.index: d for d in usable_devices()}
    for ep_device in ep_devices:
        meta = dict(ep_device.ep_metadata)
        info = infos[int(meta["vulkan.device_index"])]
        hw = ep_device.device
        want = ort.OrtHardwareDeviceType.CPU if info.cpu_implemented else ort.OrtHardwareDeviceType.GPU
        assert hw.type == want
        assert (hw.vendor_id, hw.device_id) == (info.vendor_id, info.device_id)
        if info.cpu_implemented:  # its driver's vendor (Mesa for lavapipe), not the host CPU's
            assert hw.vendor == info.vendor and dict(hw.metadata)["Description"] == info.name
        assert meta["vulkan.device_uuid"] == info.uuid and meta["vulkan.vendor"] == info.vendor
        assert meta["os_driver_version"] == info.driver_version_text
        assert meta["vulkan.driver"].startswith(info.driver_name)
        assert dict(ep_device.ep_options) == options.ep_option_defaults()
    cpu_ep = next(d for d in ort.get_ep_devices() if d.ep_name == "CPUExecutionProvider")
    for ep_device in ep_devices:  # never attached to the host CPU's OrtHardwareDevice
        assert (ep_device.device.vendor_id, ep_device.device.vendor) != (cpu_ep.device.vendor_id, cpu_ep.device.vendor)
