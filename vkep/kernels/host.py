"""What the host's processor offers: ORT's CPU EP picks its kernels (MLAS's) by it, and so its last bits, which
vkep's kernels follow where a model's answer hinges on them (quantize.cpu_ep_saturates, norm.layer_norm_order)."""

from __future__ import annotations

import functools
import platform
import re
from pathlib import Path


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The x86-64 feature flags of /proc/cpuinfo ("avx2", "fma", "avx512_vnni", ...); empty on other machines and
    where they cannot be read (then vkep follows the CPU EP's portable code)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    found = re.search(r"^flags\s*:(.*)$", text, re.M)
    return frozenset(found.group(1).split()) if found else frozenset()
