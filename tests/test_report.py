"""`vkep report`: the one markdown file a user sends back, written here on lavapipe by the real command in a
subprocess (`--quick`: the conformance sample and few timed runs), and read back section by section."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import vkep
from vkep.conformance import expectations

VKEP = [sys.executable, "-m", "vkep.cli"]


def _vkep(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*VKEP, *argv], capture_output=True, text=True, timeout=timeout)


def _section(text: str, heading: str) -> str:
    """The text of the `## heading...` section (up to the next `## `)."""
    match = re.search(rf"^## {re.escape(heading)}.*?(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no section '## {heading}' in the report:\n{text}"
    return match.group(0)


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text, re.M)
    assert match, f"no match for {pattern!r} in:\n{text}"
    return float(match.group(1))


def test_quick_report_has_every_section_with_real_figures(tmp_path):
    listed = json.loads(_vkep("devices", "--json", timeout=120).stdout)
    device = expectations.default_device(listed)  # what the report takes without --device
    out = tmp_path / "report.md"
    done = _vkep("report", "--quick", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text()
    assert "Failed sections" not in text and "**Failed**" not in text, text

    assert f"| {device['name']} |" in _section(text, "Vulkan devices")
    facts = _section(text, f"Device reported on: #{device['index']} {device['name']}")
    assert f"| name | {device['name']} |" in facts and f"| uuid | {device['uuid']} |" in facts
    assert _number(r"\| maxComputeWorkGroupInvocations \| (\d+) \|", facts) > 0
    assert re.search(r"\| `bufferDeviceAddress` \| yes \|", facts)

    speed = _section(text, "Speed")
    ceiling = _number(r"fp32 FMA ceiling: \*\*([\d.]+) GFLOPS\*\*", speed)
    assert ceiling > 0
    rows = re.findall(r"^\| (GEMM [^|]+|Conv [^|]+) \| ([\d.]+) \| ([\d.]+) \|", speed, re.M)
    assert len(rows) == 3 and all(float(vk) > 0 and float(cpu) > 0 for _, vk, cpu in rows), speed
    per_node = _number(r"^\| vkep, node by node \(fuse=0\) \| [\d.]+ \| ([\d.]+) \| VulkanExecutionProvider: 512 \|",
                       speed)
    fused = _number(r"^\| vkep, fused \(default\) \| [\d.]+ \| ([\d.]+) \| VulkanExecutionProvider: 512 \|", speed)
    assert per_node > 0 and fused > 0
    assert _number(r"^\| CPU EP \| [\d.]+ \| ([\d.]+) \|", speed) > 0
    assert "Vulkan validation messages in this process: 0." in speed  # (the tests run with the layer on)

    conformance = _section(text, "Conformance")
    expected_file = expectations.path_for(expectations.key_of(device)).name
    match = re.search(rf"Against `vkep/expected/{re.escape(expected_file)}`: (\d+) of the (\d+) cases it expects "
                      r"all on vkep still are; (\d+) regressions", conformance)
    assert match, conformance
    kept, expected, regressions = map(int, match.groups())
    assert expected > 0 and kept == expected and regressions == 0, conformance

    summary = done.stdout  # the same figures, one line each, on the terminal
    assert f"FMA ceiling: {ceiling:.1f} GFLOPS" in summary and f"vkep {per_node:.2f} µs" in summary, summary
    assert f"{kept}/{expected} expected cases kept" in summary, summary


def test_a_failing_section_is_written_and_the_report_goes_on(tmp_path):
    """No case matches the filter: the conformance section holds its error, the speed sections their figures,
    and the exit status is 0 (something was measured)."""
    out = tmp_path / "report.md"
    done = _vkep("report", "--quick", "--filter", "^no_such_case$", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text()
    assert "no ONNX backend node test case matches '^no_such_case$'" in _section(text, "Conformance")
    assert "Failed sections: Conformance." in text
    assert _number(r"fp32 FMA ceiling: \*\*([\d.]+) GFLOPS\*\*", _section(text, "Speed")) > 0


def test_nothing_measured_exits_1_and_the_package_is_never_written_to(tmp_path):
    out = tmp_path / "report.md"
    done = _vkep("report", "--device", "99", "--out", str(out), timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    text = out.read_text()
    assert "no Vulkan device #99" in _section(text, "Device reported on")
    assert "nothing could be measured" in done.stdout
    inside = f"{vkep.__path__[0]}/report.md"
    done = _vkep("report", "--quick", "--out", inside, timeout=120)
    assert done.returncode == 1 and "inside the installed package" in done.stderr, done.stderr


def test_lane_load_probe_measures_a_rate():
    """tools/roofline.py sets kernels against the device's lane-load rate (vkep/gpu/ceiling.py's second probe): it
    compiles, runs and gives a rate, as the multiply-add probe does."""
    from vkep.gpu import ceiling

    rate, why = ceiling.lane_load_rate()
    assert rate is not None and rate > 0, why
