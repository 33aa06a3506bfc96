"""The floors of vkep (docs/design.md): `gpu` <- `kernels` <- `ort`, over the package's base (options,
resources, the native modules). A module may import its own floor and the ones below, never one above, in
any import statement (a lazy one inside a function too); and importing a floor builds nothing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vkep"
BASE = {"vkep", "vkep.options", "vkep.resources", "vkep._native"}  # (`vkep` itself: __version__)
FLOORS = {"gpu": 1, "kernels": 2, "ort": 3}


def _floor(module: str) -> int | None:
    parts = module.split(".")
    if module in BASE or parts[:2] == ["vkep", "_native"]:
        return 0
    return FLOORS.get(parts[1]) if len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every vkep module the file imports; `from vkep import x` names vkep.x when x is
    a module of the package, else vkep."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("vkep")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("vkep"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*name.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*name.split("."))).is_dir()
                found.append((node.lineno, name if is_module else node.module))
    return found


def test_no_floor_imports_one_above_it():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_native" in path.parts:
            continue
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        mine = _floor(module)
        if mine is None or mine == 0:
            continue  # the package's top (cli, run, runner, conformance, ...) may import every floor
        for line, target in _imports(path):
            theirs = _floor(target)
            if theirs is None or theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not upward, upward
    assert len(list((PACKAGE / "gpu").glob("*.py"))) > 5  # (the walk saw the floors)


def test_importing_the_floors_builds_nothing():
    """vkep.gpu, vkep.kernels and vkep.ort import without the build (no compiler, no lock at import)."""
    code = ("import sys, vkep.gpu.vk, vkep.kernels.base, vkep.kernels.manifest, vkep.ort.api; "
            "print(sorted(m for m in sys.modules if m in ('vkep.build', 'cffi.recompiler', 'setuptools')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
