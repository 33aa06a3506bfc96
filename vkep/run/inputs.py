"""Inputs for `vkep run`: arrays from .npz/.npy files, and generated values that fit each input's meaning.

Random floats are fine for most tensors, but integer inputs usually index something (token ids into an
embedding, lengths, positions) and masks select: uniform noise there makes a model fail on the CPU EP
as on vkep, or compute nothing meaningful. So integer and mask inputs get values from their name and
from how the graph uses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from vkep.run.dims import Choice

# ops that pass index values through unchanged, between a graph input and the Gather that uses them
_PASS_THROUGH = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand", "Transpose"}
_GATHERS = {"Gather": 0, "GatherElements": 0}  # op → input whose axis the indices address
_FALLBACK_IDS = 10  # token ids when no Gather shows the vocabulary size


def load(specs: Sequence[str], input_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Arrays from `--inputs` arguments: FILE.npz (arrays by input name), NAME=FILE.npy, or FILE.npy for
    a model with one input."""
    given: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if not Path(path).is_file():
            raise ValueError(f"--inputs {spec}: {path} not found")
        if path.endswith(".npz") and not name:
            with np.load(path) as data:
                given.update({k: data[k] for k in data.files})
        elif path.endswith(".npy"):
            if not name:
                if len(input_names) != 1:
                    raise ValueError(f"--inputs {spec}: the model has {len(input_names)} inputs "
                                     f"({', '.join(input_names)}); name one: --inputs NAME={path}")
                name = input_names[0]
            given[name] = np.load(path, allow_pickle=False)
        else:
            raise ValueError(f"--inputs {spec}: expected FILE.npz or NAME=FILE.npy")
    unknown = sorted(set(given) - set(input_names))
    if unknown:
        raise ValueError(f"--inputs: the model has no input {', '.join(map(repr, unknown))} "
                         f"(inputs: {', '.join(input_names)})")
    return given


def make(model: onnx.ModelProto, choice: Choice, given: Mapping[str, np.ndarray],
         seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Feeds for every graph input, and how each was made: the given arrays (cast to the input's element
    type where that loses nothing) and generated values for the others."""
    rng = np.random.default_rng(seed)
    shapes = choice.shapes()
    types = {vi.name: np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
             for vi in model.graph.input if vi.name in shapes}
    feeds: dict[str, np.ndarray] = {}
    how: dict[str, str] = {}
    for name, shape in shapes.items():
        dtype = types[name]
        if name in given:
            feeds[name], how[name] = _fit(name, given[name], dtype)
        else:
            feeds[name], how[name] = _generate(model, name, shape, dtype, choice, rng)
    return feeds, how


def _fit(name: str, array: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, str]:
    if array.dtype == dtype:
        return array, "given"
    if array.dtype.kind == dtype.kind or (array.dtype.kind in "iu" and dtype.kind in "iuf"):
        return array.astype(dtype), f"given, cast from {array.dtype}"
    raise ValueError(f"input {name!r} takes {dtype}; the array given is {array.dtype}")


def _generate(model: onnx.ModelProto, name: str, shape: tuple[int, ...], dtype: np.dtype, choice: Choice,
              rng: np.random.Generator) -> tuple[np.ndarray, str]:
    lower = name.lower()
    if "mask" in lower:
        return np.ones(shape, dtype), "ones (a mask: every position valid)"
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype), "uniform in [-1, 1]"
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool), "random booleans"
    if dtype.kind not in "iu":
        raise ValueError(f"input {name!r}: cannot make {dtype} values; give them with --inputs {name}=FILE.npy")
    if re.search(r"sample_?rate|sampling_rate|^sr$", lower):
        return np.full(shape, 16000, dtype), "16000 (a sample rate)"
    if "position" in lower:
        positions = np.broadcast_to(np.arange(shape[-1]), shape) if shape else np.zeros(shape)
        return positions.astype(dtype), "0, 1, 2, ... (positions)"
    if re.search(r"token_?type|segment", lower):
        return np.zeros(shape, dtype), "zeros (one segment)"
    if re.search(r"len(gth)?s?$|_lens?\b", lower):
        value = _longest(choice, name)
        return np.full(shape, value, dtype), f"{value} (a length: the longest free dimension of the other inputs)"
    bound = _index_bound(model, name)
    if bound is not None:
        return rng.integers(0, bound, size=shape).astype(dtype), f"ids in [0, {bound}) (indices of a Gather)"
    if re.search(r"ids?$|token|index|indices|label", lower):
        return (rng.integers(0, _FALLBACK_IDS, size=shape).astype(dtype),
                f"ids in [0, {_FALLBACK_IDS}) (no Gather shows the vocabulary size)")
    if not shape or int(np.prod(shape)) == 1:
        return np.ones(shape, dtype), "1 (a count or a flag)"
    if dtype == np.uint8:
        return rng.integers(0, 256, size=shape).astype(dtype), "uniform in [0, 255] (pixels)"
    if dtype == np.int8:
        return rng.integers(-128, 128, size=shape).astype(dtype), "uniform in [-128, 127]"
    return rng.integers(0, 10, size=shape).astype(dtype), "uniform in [0, 9]"


def _longest(choice: Choice, name: str) -> int:
    """The length a `lengths` input most likely counts: the largest non-batch free dimension elsewhere."""
    values = [d.value for d in choice.dims if d.role != "batch" and any(n != name for n, _ in d.places)]
    return max(values, default=1)


def _index_bound(model: onnx.ModelProto, name: str) -> int | None:
    """The size of the axis that a Gather indexes with this input (through shape-only ops), if the graph
    shows it (a constant data tensor or a known shape)."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    shapes = _known_shapes(model)
    bounds: list[int] = []
    seen, todo = {name}, [name]
    while todo:
        value = todo.pop()
        for node in consumers.get(value, ()):
            if node.op_type in _PASS_THROUGH and node.input[0] == value:
                todo.extend(o for o in node.output if o not in seen)
                seen.update(node.output)
            elif node.op_type in _GATHERS and len(node.input) > 1 and node.input[1] == value:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                data_shape = shapes.get(node.input[0])
                if data_shape and -len(data_shape) <= axis < len(data_shape) and data_shape[axis] > 0:
                    bounds.append(data_shape[axis])
    return min(bounds) if bounds else None


def _known_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            value = next((a for a in node.attribute if a.name == "value"), None)
            if value is not None:
                shapes[node.output[0]] = list(numpy_helper.to_array(value.t).shape)
    for vi in [*model.graph.value_info, *model.graph.input]:
        dims = vi.type.tensor_type.shape.dim
        if vi.name not in shapes and dims and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    return shapes
