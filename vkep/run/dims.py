"""Free dimensions of a model's inputs: which value `vkep run` gives each one, and why.

A free dimension is a `dim_param` (e.g. `batch`, `height`) or an unknown dimension of a graph input.
Values come, in this order, from `--shape INPUT=…`, `--dim NAME=VALUE`, the arrays given with `--inputs`,
the model's metadata (an exporter's image size), the dimension's name (batch, sequence, …) or place
(the spatial axes of an image input), and otherwise the documented default, `DEFAULT`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx

DEFAULT = 1  # a free dimension nothing in the model explains (README: Command line)
DEFAULT_HOW = "default"

# metadata keys under which exporters write the image size (ultralytics: imgsz="[640, 640]")
_IMAGE_SIZE_KEYS = ("imgsz", "image_size", "img_size", "imagesize", "input_size", "image_shape", "input_shape")
_AUDIO_INPUT = re.compile(r"audio|wav|speech|waveform|input_values|signal|pcm")


@dataclass
class Dim:
    key: str  # the dim_param, or "INPUT[axis]" for an unnamed free dimension
    places: list[tuple[str, int]]  # (input, axis) where it occurs
    value: int = DEFAULT
    how: str = DEFAULT_HOW  # why it has this value, in words
    role: str = "other"  # batch, sequence, past, total, frames, audio, height, width, other

    @property
    def named(self) -> bool:
        """ORT can override it by name (SessionOptions.add_free_dimension_override_by_name)."""
        return not self.key.endswith("]")

    @property
    def defaulted(self) -> bool:
        return self.how == DEFAULT_HOW


@dataclass
class Choice:
    """The value of every free dimension, and the resulting shape of every graph input."""

    inputs: dict[str, list[int | str | None]]  # declared dims: int, dim_param or None (unknown)
    dims: list[Dim] = field(default_factory=list)

    @property
    def overrides(self) -> dict[str, int]:
        return {d.key: d.value for d in self.dims if d.named}

    def shapes(self) -> dict[str, tuple[int, ...]]:
        values = {place: d.value for d in self.dims for place in d.places}
        return {name: tuple(v if isinstance(v, int) else values[(name, axis)] for axis, v in enumerate(decl))
                for name, decl in self.inputs.items()}

    def with_values(self, values: Mapping[str, int], how: str) -> Choice:
        """A copy with some dimensions (by key) set to other values."""
        dims = [Dim(d.key, d.places, values[d.key], how, d.role) if d.key in values else d for d in self.dims]
        return Choice(self.inputs, dims)


_NAME = re.compile(r"[A-Za-z0-9]")


def graph_inputs(model: onnx.ModelProto) -> dict[str, list[int | str | None] | None]:
    """Declared dims of every graph input that is not an initializer (None: not even the rank)."""
    inits = {t.name for t in model.graph.initializer}
    out: dict[str, list[int | str | None] | None] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input {vi.name!r}: only tensor inputs are supported")
        tt = vi.type.tensor_type
        # (some exporters write an unknown dimension as dim_value -1: free too; Paddle2ONNX names every unknown
        # dimension "?": a name without a letter or digit is no name, each such dimension free on its own)
        out[vi.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                        else (d.dim_param if _NAME.search(d.dim_param) else None)
                        for d in tt.shape.dim] if tt.HasField("shape") else None
    return out


def choose(model: onnx.ModelProto, dim_args: Mapping[str, int] | None = None,
           shape_args: Mapping[str, list[int]] | None = None,
           given: Mapping[str, np.ndarray] | None = None) -> Choice:
    """Values for every free dimension of `model`'s inputs (see the module docstring for the order)."""
    inputs = graph_inputs(model)
    for name, decl in inputs.items():
        if decl is None:  # no declared rank: the shape must come from an argument
            shape = (shape_args or {}).get(name, getattr((given or {}).get(name), "shape", None))
            if shape is None:
                raise ValueError(f"input {name!r} declares no shape: give one with --shape {name}=D0,D1,... "
                                 f"or an array with --inputs {name}=FILE.npy")
            inputs[name] = [None] * len(shape)
    dims: dict[str, Dim] = {}
    for name, decl in inputs.items():
        for axis, v in enumerate(decl):
            if not isinstance(v, int):
                key = v if v is not None else f"{name}[{axis}]"
                dims.setdefault(key, Dim(key, [])).places.append((name, axis))
    for d in dims.values():
        d.role = _role(d, inputs, model)
    fixed: dict[str, tuple[int, str]] = {}

    def bind(key: str, value: int, how: str) -> None:
        if key in fixed and fixed[key][0] != value:
            raise ValueError(f"free dimension {key!r} is {fixed[key][0]} ({fixed[key][1]}) and {value} ({how})")
        fixed.setdefault(key, (value, how))

    def bind_shape(name: str, shape, how: str) -> None:
        if name not in inputs:
            raise ValueError(f"the model has no input {name!r} (inputs: {', '.join(inputs)})")
        decl = inputs[name]
        if len(shape) != len(decl):
            raise ValueError(f"input {name!r} has rank {len(decl)} {_show(decl)}; {how} gives {list(shape)}")
        for axis, (want, got) in enumerate(zip(decl, shape, strict=True)):
            if isinstance(want, int) and want != got:
                raise ValueError(f"input {name!r} is {_show(decl)}: axis {axis} is {want}, {how} gives {got}")
            if not isinstance(want, int):
                bind(want if want is not None else f"{name}[{axis}]", int(got), how)

    for name, shape in (shape_args or {}).items():
        bind_shape(name, shape, f"--shape {name}")
    for key, value in (dim_args or {}).items():
        if key not in dims:
            free = ", ".join(k for k in dims if not k.endswith("]")) or "none"
            raise ValueError(f"--dim {key}: the model has no free dimension named {key!r} (named ones: {free})")
        bind(key, value, "--dim")
    for name, array in (given or {}).items():
        if name in inputs:
            bind_shape(name, array.shape, f"the array given for {name}")
    for key, (value, how) in fixed.items():
        dims[key].value, dims[key].how = value, how
    _from_model(model, list(dims.values()), set(fixed))
    return Choice(inputs, list(dims.values()))


def _role(d: Dim, inputs: dict, model: onnx.ModelProto) -> str:
    """What a free dimension most likely is, from its name, else from its place in its input."""
    name = d.key.lower() if d.named else ""
    words = set(re.split(r"[^a-z0-9]+", name))
    if "batch" in name or words & {"n", "b", "bs", "num_images"}:
        # (not the samples of an audio input, whatever their name: onnx-asr's waveforms are [batch_size, N])
        if "batch" in name or not _audio_samples(model, inputs, *d.places[0]):
            return "batch"
    if "past" in name:
        return "past"
    if "total" in name:
        return "total"
    if "height" in name or words & {"h", "img_h"}:
        return "height"
    if "width" in name or words & {"w", "img_w"}:
        return "width"
    input_name, axis = d.places[0]
    decl = inputs[input_name]
    if "frame" in name or words & {"t", "time"}:
        return "frames"
    if "sample" in name or _audio_samples(model, inputs, input_name, axis):
        return "audio"
    if "seq" in name or "token" in name or words & {"length", "len", "text", "words"}:
        return "sequence"
    # the spatial axes of an image input: NCHW or NHWC with a static channel count of 1, 3 or 4
    if len(decl) == 4 and _elem_kind(model, input_name) in "fu":
        if decl[1] in (1, 3, 4) and axis in (2, 3):
            return "height" if axis == 2 else "width"
        if decl[3] in (1, 3, 4) and axis in (1, 2):
            return "height" if axis == 1 else "width"
    return "other"


_BY_ROLE = {"batch": (1, "by its name: a batch dimension"),
            "past": (0, "by its name: past (cache) length, 0 for a first step"),
            "sequence": (16, "by its name: a sequence"),
            "frames": (100, "by its name: frames, 1 s of 10 ms frames"),
            "audio": (16000, "audio samples: 1 s at 16 kHz")}


def _from_model(model: onnx.ModelProto, dims: list[Dim], fixed: set[str]) -> None:
    """Values for the dimensions no argument set (the keys in `fixed` are set): metadata, name and place,
    expressions, default."""
    size = image_size(model)
    free = [d for d in dims if d.key not in fixed]
    for d in free:
        if _expression_names(d.key) is not None:
            continue  # e.g. "past_sequence_length + 1": evaluated below, from the names it uses
        if d.role in _BY_ROLE:
            d.value, d.how = _BY_ROLE[d.role]
        elif d.role in ("height", "width") and size is not None:
            d.value, d.how = size[0 if d.role == "height" else 1], f"the model's metadata: {size[2]}"
    for d in free:
        if d.role == "total" and _expression_names(d.key) is None:
            parts = [x.value for x in dims if x.role == "past"] + [x.value for x in dims if x.role == "sequence"][:1]
            d.value, d.how = (sum(parts), "past + sequence") if parts else _BY_ROLE["sequence"]
    known = {d.key: d.value for d in dims if _expression_names(d.key) is None}
    for d in free:
        names = _expression_names(d.key)
        if names is not None and names <= known.keys():
            d.value, d.how = int(_evaluate(d.key, known)), f"= {d.key}"


def image_size(model: onnx.ModelProto) -> tuple[int, int, str] | None:
    """(height, width, where it was found) from an exporter's metadata, e.g. ultralytics' imgsz."""
    for prop in model.metadata_props:
        if prop.key.lower() in _IMAGE_SIZE_KEYS:
            numbers = [int(n) for n in re.findall(r"\d+", prop.value)]
            if numbers and all(n > 0 for n in numbers):
                h, w = (numbers[0], numbers[0]) if len(numbers) == 1 else numbers[-2:]
                return h, w, f"{prop.key}={prop.value}"
    return None


def _expression_names(key: str) -> set[str] | None:
    """The names in a dim_param that is an arithmetic expression (as exporters write "past + 1"), else None."""
    if not re.search(r"[-+*/()]", key):
        return None
    try:
        tree = ast.parse(key, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)):
        return None
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _evaluate(key: str, values: Mapping[str, int]) -> int:
    return int(eval(compile(ast.parse(key, mode="eval"), "<dim>", "eval"), {"__builtins__": {}}, dict(values)))


def _audio_samples(model: onnx.ModelProto, inputs: dict, input_name: str, axis: int) -> bool:
    """The last axis of a [batch, samples] float input whose name says audio."""
    decl = inputs[input_name]
    return (axis == len(decl) - 1 and len(decl) == 2 and _AUDIO_INPUT.search(input_name.lower()) is not None
            and _elem_kind(model, input_name) == "f")


def _elem_kind(model: onnx.ModelProto, input_name: str) -> str:
    vi = next(v for v in model.graph.input if v.name == input_name)
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).kind


def _show(decl: list) -> str:
    return "[" + ", ".join("?" if v is None else str(v) for v in decl) + "]"


def parse_dim(text: str) -> tuple[str, int]:
    """`NAME=VALUE` of `--dim`."""
    name, sep, value = text.rpartition("=")
    if not sep or not name or not value.strip().isdigit():
        raise ValueError(f"--dim {text}: expected NAME=VALUE with a whole number, e.g. --dim height=640")
    return name, int(value)


def parse_shape(text: str) -> tuple[str, list[int]]:
    """`INPUT=D0,D1,…` of `--shape`."""
    name, sep, dims = text.rpartition("=")
    values = [v.strip() for v in dims.split(",")] if dims.strip() else []
    if not sep or not name or not all(v.isdigit() for v in values):
        raise ValueError(f"--shape {text}: expected INPUT=D0,D1,... e.g. --shape images=1,3,640,640")
    return name, [int(v) for v in values]
