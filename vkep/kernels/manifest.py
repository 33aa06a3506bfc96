"""`kernels.yaml`: the single source of every kernel vkep registers with ORT.

Each entry names an ONNX op, the opset versions where its schema changed (one ORT KernelDef per
range), its type constraints, the implementation class and shader, specialization constants,
attributes with defaults, inputs that stay on the CPU, and in-place aliases. Loading validates
everything and reports `file: entry N (Op): field: problem`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vkep import options, resources


def manifest_paths() -> list[Path]:
    """kernels.yaml, or the files VKEP_MANIFEST lists (os.pathsep-separated; later files add kernels)."""
    return options.env("VKEP_MANIFEST") or [resources.MANIFEST]
MAX_VERSION = 2**31 - 1
DTYPES = {"float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "uint64", "bool", "bfloat16", "int4", "uint4"}
ATTR_KINDS = {"int", "float", "string", "ints", "floats", "strings", "tensor"}
FIELDS = {"op", "domain", "since", "until", "types", "impl", "shader", "constants", "attributes", "cpu_inputs",
          "cpu_outputs", "aliases",
          "inputs", "outputs", "test", "prepack", "constant_inputs"}


class ManifestError(ValueError):
    """A malformed manifest: the message names the file, the entry and the field."""


@dataclass(frozen=True)
class Attribute:
    name: str
    kind: str
    default: object  # None: required, unless optional
    optional: bool = False  # absent → None


@dataclass
class KernelSpec:
    op: str
    domain: str
    since: list[int]
    types: dict[str, list[str]]
    impl: str
    until: int = MAX_VERSION
    shader: str | None = None
    constants: dict[str, int] = field(default_factory=dict)
    attributes: list[Attribute] = field(default_factory=list)
    cpu_inputs: list[int] = field(default_factory=list)
    cpu_outputs: list[int] = field(default_factory=list)
    prepack: list[int] = field(default_factory=list)  # constant inputs packed once (Kernel.pack)
    # inputs the kernel runs only as constant initializers (it packs them together): a node where one is not
    # stays on another EP
    constant_inputs: list[int] = field(default_factory=list)
    aliases: list[tuple[int, int]] = field(default_factory=list)
    inputs: int = 1  # how many inputs a one-node test model feeds
    outputs: int = 1
    test: dict = field(default_factory=dict)  # hints for the generated one-node tests
    index: int = 0
    source: str = ""  # the manifest file

    def version_ranges(self) -> list[tuple[int, int]]:
        """[start, end] per KernelDef: ORT matches an open-ended def only at its exact start version."""
        ends = [v - 1 for v in self.since[1:]] + [self.until]
        return list(zip(self.since, ends, strict=True))

    @property
    def name(self) -> str:
        return f"{self.domain + '.' if self.domain else ''}{self.op}"


def registered() -> tuple[KernelSpec, ...]:
    """Every kernel of the manifest as this process first read it. ORT builds its kernel registry once per process,
    so the kernels that compose others or look up an entry's constants at run time read this, not the file: a session
    of a few hundred nodes looked entries up hundreds of times, and reading the file again took 0.1 s each time."""
    return _read_once(tuple(manifest_paths()))


def load(path: Path | str | None = None) -> list[KernelSpec]:
    """Every kernel of the manifest (or of `path`), validated, read from the files now."""
    return list(_read(tuple(manifest_paths()) if path is None else (Path(path),)))


def _read(paths: tuple[Path, ...]) -> tuple[KernelSpec, ...]:
    specs: list[KernelSpec] = []
    for p in paths:
        specs += _load_file(Path(p), first_index=len(specs))
    _check_unique(specs)
    return tuple(specs)


_read_once = functools.cache(_read)


def _load_file(path: Path, first_index: int = 0) -> list[KernelSpec]:
    try:
        # (libyaml's loader where PyYAML has it: the pure-Python one took 1.4 s of a cold session's creation)
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise ManifestError(f"{path}: cannot be read: {exc.strerror}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels"), list):
        raise ManifestError(f"{path}: top level must be a mapping with a 'kernels' list")
    specs = [_entry(path, i, raw) for i, raw in enumerate(doc["kernels"])]
    for spec in specs:
        spec.index += first_index
    return specs


def _check_unique(specs: list[KernelSpec]) -> None:
    """No opset version of an op in two entries (ORT refuses a second KernelDef over a version it has)."""
    seen: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for spec in specs:
        ranges = seen.setdefault((spec.domain, spec.op), [])
        for start, end in spec.version_ranges():
            clash = next((index for first, last, index in ranges if first <= end and start <= last), None)
            if clash is not None:
                raise ManifestError(f"{spec.source}: entry {spec.index} ({spec.op}): since/until: versions {start}-"
                                    f"{end} overlap those of entry {clash}")
            ranges.append((start, end, spec.index))


def _entry(path: Path, index: int, raw) -> KernelSpec:
    op = raw.get("op") if isinstance(raw, dict) else None

    def fail(fld: str, problem: str):
        raise ManifestError(f"{path}: entry {index} ({op or '?'}): {fld}: {problem}")

    if not isinstance(raw, dict):
        fail("-", "an entry must be a mapping")
    for key in raw:
        if key not in FIELDS:
            fail(key, f"unknown field (known: {', '.join(sorted(FIELDS))})")
    if not isinstance(op, str) or not op:
        fail("op", "required, a non-empty string")
    domain = raw.get("domain", "")
    if not isinstance(domain, str):
        fail("domain", "must be a string")
    since = raw.get("since")
    if isinstance(since, int):
        since = [since]
    if not isinstance(since, list) or not since or not all(isinstance(v, int) and v > 0 for v in since):
        fail("since", "required: a positive opset version or a list of them")
    if since != sorted(set(since)):
        fail("since", "versions must be increasing and distinct")
    until = raw.get("until", MAX_VERSION)
    if not isinstance(until, int) or until < since[-1]:
        fail("until", "must be an opset version not below the last of 'since'")
    types = raw.get("types")
    if not isinstance(types, dict):  # (empty for an op whose schema has no type constraint: NonMaxSuppression)
        fail("types", "required: a mapping of type-constraint name to a list of element types")
    for name, allowed in types.items():
        if not isinstance(allowed, list) or not allowed:
            fail(f"types.{name}", "must be a non-empty list")
        for t in allowed:
            if t not in DTYPES:
                fail(f"types.{name}", f"unknown element type {t!r}")
    impl = raw.get("impl")
    if not isinstance(impl, str) or "." not in impl:
        fail("impl", "required: 'module.Class' inside vkep.kernels")
    shader = raw.get("shader")
    if shader is not None:
        from vkep.gpu.shaders import SHADER_DIR

        if not isinstance(shader, str) or not (SHADER_DIR / shader).exists():
            fail("shader", f"no such shader {shader!r} in {SHADER_DIR}")
    constants = raw.get("constants", {})
    if not isinstance(constants, dict) or not all(isinstance(v, int) for v in constants.values()):
        fail("constants", "must map names to integers")
    attributes = []
    for name, decl in (raw.get("attributes") or {}).items():
        if not isinstance(decl, dict) or decl.get("kind") not in ATTR_KINDS:
            fail(f"attributes.{name}", f"needs kind: one of {', '.join(sorted(ATTR_KINDS))}")
        attributes.append(Attribute(name, decl["kind"], decl.get("default"), bool(decl.get("optional", False))))
    cpu_inputs = raw.get("cpu_inputs", [])
    cpu_outputs = raw.get("cpu_outputs", [])
    prepack = raw.get("prepack", [])
    constant_inputs = raw.get("constant_inputs", [])
    for fld, value in (("cpu_inputs", cpu_inputs), ("cpu_outputs", cpu_outputs), ("prepack", prepack),
                       ("constant_inputs", constant_inputs)):
        if not isinstance(value, list) or not all(isinstance(i, int) and i >= 0 for i in value):
            fail(fld, "must be a list of indices")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, list) and len(a) == 2 for a in aliases):
        fail("aliases", "must be a list of [input, output] pairs")
    for fld in ("inputs", "outputs"):
        if not isinstance(raw.get(fld, 1), int):
            fail(fld, "must be an integer")
    test = raw.get("test", {})
    if not isinstance(test, dict):
        fail("test", "must be a mapping")
    return KernelSpec(op=op, domain=domain, since=since, until=until, types=types, impl=impl, shader=shader, constants=constants,
                      attributes=attributes, cpu_inputs=cpu_inputs, cpu_outputs=cpu_outputs, prepack=prepack,
                      constant_inputs=constant_inputs, aliases=[tuple(a) for a in aliases],
                      inputs=raw.get("inputs", 1), outputs=raw.get("outputs", 1), test=test, index=index,
                      source=str(path))
