"""Test cases generated from the manifest: every entry × element type × opset range as a one-node model, with
inputs drawn from the entry's test hints, checked against ORT's CPU EP. tests/test_manifest_ops.py runs them all;
`vkep dev` runs those of the kernel being edited. (One generator: a new manifest entry is tested the moment it
exists, by both.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from vkep.kernels import manifest

# how close vkep's results must be to the CPU EP's, by element type
FP32_TOL = {"rtol": 1e-4, "atol": 1e-5}
FP16_TOL = {"rtol": 1e-2, "atol": 1e-3}


def tolerance(dtype) -> dict:
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return FP16_TOL
    if dtype.kind == "f":
        return FP32_TOL
    return {"rtol": 0, "atol": 0}


DEFAULT_SHAPES = {1: [[2, 3, 4]], 2: [[2, 3, 4], [3, 1]], 3: [[2, 3, 4], [2, 3, 4], [2, 3, 4]]}


def _schema(spec, opset: int):
    """ONNX's schema of the op at that opset, or ORT's own (its contrib ops, SimplifiedLayerNormalization)."""
    try:
        return onnx.defs.get_schema(spec.op, opset, spec.domain)
    except onnx.defs.SchemaError:
        from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

        return max((s for s in get_all_operator_schema() if s.name == spec.op and s.domain == spec.domain
                    and s.since_version <= opset), key=lambda s: s.since_version)


def _schema_allows(spec, opset: int, constraint: str, dtype: str) -> bool:
    """Whether the op's schema of that opset admits the type (older opsets admit fewer)."""
    schema = _schema(spec, opset)
    onnx_type = f"tensor({ {'float32': 'float', 'float64': 'double'}.get(dtype, dtype) })"
    return any(c.type_param_str == constraint and onnx_type in c.allowed_type_strs for c in schema.type_constraints)


class Case(NamedTuple):
    """One generated case: a manifest entry at the first opset of one of its version ranges, for one element
    type of one of its type constraints."""

    spec: manifest.KernelSpec
    opset: int
    dtype: str
    constraint: str

    @property
    def name(self) -> str:
        """The test id: Op-opset-type, with the constraint named when it is not the entry's first."""
        kind = self.dtype if self.constraint == next(iter(self.spec.types)) else f"{self.constraint}={self.dtype}"
        return f"{self.spec.op}-{self.opset}-{kind}"


def cases(specs: list[manifest.KernelSpec] | None = None) -> Iterator[Case]:
    """Every case of the manifest's entries (or of `specs`) that its test hints and ONNX's schemas allow."""
    for spec in manifest.load() if specs is None else specs:
        if spec.test.get("generated") is False:
            continue  # ORT-internal (Memcpy*) or control flow: tested by test_models / test_control_flow
        for start, _end in spec.version_ranges():
            for constraint, dtypes in spec.types.items():
                for dtype in dtypes:
                    if dtype not in spec.test.get("generated_types", [dtype]):
                        continue  # (the entry's test attributes do not fit this type: tested elsewhere)
                    if _schema_allows(spec, start, constraint, dtype):
                        yield Case(spec, start, dtype, constraint)


def _type_of(spec, name: str | None, constraint: str | None, dtype: str) -> str:
    """The element type of an input or output whose `constraints` hint is `name` (a type constraint of
    the entry, or a fixed element type), in the case that tests `dtype` for `constraint`."""
    if name is None or name == constraint:
        return dtype
    if name in spec.types:
        return spec.types[name][0]
    return name


def io_types(spec, dtype: str, constraint: str | None = None) -> tuple[list[str], str]:
    """Element types of the node's inputs and outputs. Without a `constraints` hint, every input takes the
    case's type (CPU inputs: int64); `output_type` names the outputs' constraint or type."""
    names = spec.test.get("constraints")
    ins = []
    for i in range(spec.inputs):
        if names is None:
            ins.append("int64" if i in spec.cpu_inputs else dtype)
        else:
            ins.append(_type_of(spec, names[i], constraint, dtype))
    out_name = spec.test.get("output_type", names[0] if names else None)
    if isinstance(out_name, list):  # one per output, e.g. [T, int64] for TopK's values and indices
        return ins, [_type_of(spec, n, constraint, dtype) for n in out_name]
    return ins, [_type_of(spec, out_name, constraint, dtype)] * spec.outputs


def _cpu_values(spec, in_types: list[str]) -> dict[int, np.ndarray]:
    values = list(spec.test.get("cpu_values", []))
    return {i: np.array(values.pop(0), dtype=in_types[i]) for i in range(spec.inputs) if i in spec.cpu_inputs}


def one_node_model(spec: manifest.KernelSpec, opset: int, dtype: str, constraint: str | None = None,
                   float16_as: str | None = None):
    """The node with its test hints from the manifest: shapes, CPU-input values, attributes, input types
    (`float16_as`: build the float32 twin of a float16 case). Hints that keep ORT from folding the node
    away: `symbolic_shapes` (inputs get named dims) and `fed_cpu_inputs` (CPU inputs are graph inputs,
    fed with `cpu_values`, instead of initializers)."""
    shapes = spec.test.get("shapes") or DEFAULT_SHAPES[spec.inputs]
    in_types, out_type = io_types(spec, dtype, constraint)
    if float16_as:
        in_types = [float16_as if t == "float16" else t for t in in_types]
        out_type = [float16_as if t == "float16" else t for t in out_type]
    cpu_values = _cpu_values(spec, in_types)
    inputs, names, inits = [], [], []
    for i in range(spec.inputs):
        name = f"in{i}"
        names.append(name)
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(in_types[i]))
        if i in spec.cpu_inputs and spec.test.get("fed_cpu_inputs"):
            inputs.append(helper.make_tensor_value_info(name, elem, cpu_values[i].shape))
        elif i in spec.cpu_inputs:
            inits.append(numpy_helper.from_array(cpu_values[i], name))
        else:
            shape = shapes[min(i, len(shapes) - 1)]
            if spec.test.get("symbolic_shapes"):
                shape = [f"d{i}_{d}" for d in range(len(shape))]
            inputs.append(helper.make_tensor_value_info(name, elem, shape))
    attrs = dict(spec.test.get("attributes", {}))
    if "type_attribute" in spec.test:  # an attribute naming the output's element type (Cast's `to`)
        attrs[spec.test["type_attribute"]] = helper.np_dtype_to_tensor_dtype(np.dtype(out_type[0]))
    outs = ["out"] if spec.outputs == 1 else [f"out{j}" for j in range(spec.outputs)]
    node = helper.make_node(spec.op, names, outs, domain=spec.domain, **attrs)
    out_values = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
                  for o, t in zip(outs, out_type, strict=True)]
    graph = helper.make_graph([node], f"{spec.op}_{opset}", inputs, out_values, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(spec.domain, opset)], ir_version=10)
    return model


def feeds_for(model, spec, dtype: str, seed: int = 0) -> dict:
    """Random inputs of the model's own input types (`dtype` is kept for callers; the model decides)."""
    rng = np.random.default_rng(seed)
    positive = set(spec.test.get("positive_inputs", []))
    int_range = {int(k): v for k, v in spec.test.get("int_range", {}).items()}
    shapes = spec.test.get("shapes") or DEFAULT_SHAPES[spec.inputs]
    feeds = {}
    for vi in model.graph.input:
        i = int(vi.name[2:])
        shape = shapes[min(i, len(shapes) - 1)]
        kind = np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        if i in spec.cpu_inputs:
            feeds[vi.name] = _cpu_values(spec, [kind] * spec.inputs)[i]
        elif kind.kind == "f":
            low = 0.5 if i in positive else -2.0
            feeds[vi.name] = rng.uniform(low, 2.0, size=shape).astype(kind)
        elif kind == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            lo, hi = int_range.get(i, (-50, 49))
            feeds[vi.name] = rng.integers(lo, hi + 1, size=shape).astype(kind)
    return feeds


def reference_model(case: Case):
    """The model the CPU EP runs as the case's reference: float16 cases run as their float32 twin."""
    return one_node_model(case.spec, case.opset, case.dtype, case.constraint, float16_as="float32")


def reference_feeds(feeds: dict) -> dict:
    return {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()}


def output_types(case: Case) -> list[np.dtype]:
    return [np.dtype(t) for t in io_types(case.spec, case.dtype, case.constraint)[1]]
