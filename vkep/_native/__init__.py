"""vkep's compiled modules, built with the wheel (or by `./dev` in a checkout: `python -m vkep.build`).

Only looked up here, never built: a missing module is an installation problem, and says so.
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

DIR = Path(__file__).resolve().parent
# the library ORT loads: vkep/ort/native/loader.c, which loads the plugin module _vkep_plugin beside it
LOADER_FILE = {"darwin": "libvkep_ep.dylib", "win32": "vkep_ep.dll"}.get(sys.platform, "libvkep_ep.so")


def filename(name: str) -> str:
    return f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"


class NotBuilt(ImportError):
    pass


def _not_built(name: str) -> NotBuilt:
    return NotBuilt(f"vkep: its native module {name} is not in {DIR}: vkep is not built for this Python "
                    f"({sysconfig.get_config_var('EXT_SUFFIX')}). Install a vkep wheel for it (pip install vkep), "
                    "or in a source checkout run ./dev (or python -m vkep.build).")


def loader_path() -> Path:
    """The plugin library ORT loads (only looked up)."""
    found = DIR / LOADER_FILE
    if not found.exists():
        raise _not_built(LOADER_FILE)
    return found


def load(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"vkep._native.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"vkep._native.{name}":
            raise _not_built(name) from exc
        raise
