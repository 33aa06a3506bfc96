"""Kernel choices that come from measurement, per device class (vkep/kernels/tuning.json).

`tools/tune_gemm.py` times the candidates on the device at hand, prints what it measured and the entry for that
device's class, and with `--write` puts the entry in tuning.json (a checkout's: commit it). A class is the device
type and the driver (`cpu:MESA_LLVMPIPE`, `discrete:NVIDIA_PROPRIETARY`...): what decides how kernels run. A class
the table lacks takes each kernel's default (written beside the kernel: what such devices are built for).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from vkep import resources


def device_class(info) -> str:
    """The table's key for a device (a gpu.device.PhysicalDeviceInfo)."""
    return f"{info.device_type}:{info.driver_id_name}"


@functools.cache
def table() -> dict[str, dict[str, Any]]:
    return json.loads(resources.TUNING.read_text(encoding="utf-8"))


def choice(info, kernel: str, default: dict[str, Any]) -> dict[str, Any]:
    """The measured choice of `kernel` (e.g. "coopmat") on this device's class, over `default` for what it omits."""
    entry = table().get(device_class(info), {}).get(kernel, {})
    return {**default, **{k: v for k, v in entry.items() if k in default}}


def use_for_this_process(info, kernel: str, entry: dict[str, Any]) -> None:
    """Take `entry` as this device class's choice of `kernel` in this process (tools/tune_gemm.py's candidates)."""
    table().setdefault(device_class(info), {})[kernel] = dict(entry)
