"""The wheel's build step: vkep's native modules and every SPIR-V variant are compiled here, at build time,
never on a user's machine. Everything else about the package is in pyproject.toml.

The wheel is a platform wheel for one CPython (cp3XY): the native modules are cffi modules built for that
interpreter (see docs/design.md, "The wheel"). An editable install (`./dev`) builds nothing here: `./dev`
runs `python -m vkep.build` in place, and shaders compile into the user cache as they are used.
"""

import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithNative(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        sys.path.insert(0, str(ROOT))
        from vkep import build, cli

        package = Path(self.build_lib) / "vkep"
        build.build(package / "_native", only_changed=False, verbose=True)
        if cli.main(["shaders", "build", "--out", str(package / "spirv")]) != 0:
            raise SystemExit("vkep: a shader variant the manifest needs failed to compile (see above)")


class PlatformDistribution(Distribution):
    def has_ext_modules(self) -> bool:  # native modules inside: a platform wheel, not py3-none-any
        return True


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=PlatformDistribution)
