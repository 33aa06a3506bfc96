"""Test files run again on Mesa 26 lavapipe (LLVM 19), through tools/mesa_trixie.sh's root (`./dev test` sets it up).

That driver's compiler optimizes more than Debian 12's Mesa 22.3: it folded fused elementwise steps that the
float controls should have kept (a - a over an infinite a to 0, a float16 rounding between steps away), which the
files below, run there, caught (fused.comp now hides each step's operands from it); test_recurrent.py because
recurrent.comp still reads its bias and peepholes under a test of their addresses (the pattern that crashed
that driver elsewhere: common.glsl PRESENT_OR); test_profile.py because that root's validation layer (1.4) checks
that a timestamp query read back was reset, which Debian 12's does not (the profiler read the pairs a flush had
just begun in the next, unsubmitted command buffer); test_nms.py because nms.comp's box loads, hoisted above
the test of a winner's index, read before the boxes (a fault where a staged input starts a block). test_coopmat.py runs itself
there on its own (its cases need the driver's cooperative matrices).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / ".cache" / "trixie" / "run"
FILES = ["test_fusion.py", "test_epilogue.py", "test_recurrent.py", "test_profile.py", "test_nms.py"]


def run_pytest_on_mesa_26(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """pytest with `args` in tests/, under the Mesa 26 root's wrapper (skips this test where there is none)."""
    if not WRAPPER.exists():
        pytest.skip(f"no Mesa 26 root: run tools/mesa_trixie.sh (./dev test does) to create {WRAPPER}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "PYTEST_"))}
    env.update(VKEP_CACHE_DIR=str(ROOT / ".cache" / "trixie" / "vkep-cache"))
    return subprocess.run([str(WRAPPER), sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT / "tests", env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", FILES)
def test_file_on_mesa_26(name):
    if os.environ.get("VK_DRIVER_FILES", "").startswith(str(WRAPPER.parent)):
        pytest.skip("this process runs on Mesa 26 already")
    res = run_pytest_on_mesa_26(name)
    summary = (res.stdout.strip().splitlines() or [""])[-1]
    assert res.returncode == 0 and "passed" in summary, (res.stdout + res.stderr)[-4000:]
