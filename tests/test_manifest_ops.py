"""Generated from kernels.yaml: every entry × element type × opset range runs as a one-node model on vkep
and matches ORT's CPU EP. A new manifest entry is tested the moment it exists."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import tolerance
from onnx import helper, numpy_helper

from vkep import runner
from vkep.kernels import manifest

SPECS = manifest.load()
DEFAULT_SHAPES = {1: [[2, 3, 4]], 2: [[2, 3, 4], [3, 1]], 3: [[2, 3, 4], [2, 3, 4], [2, 3, 4]]}


def _schema_allows(spec, opset: int, constraint: str, dtype: str) -> bool:
    """Whether ONNX's schema of that opset admits the type (older opsets admit fewer)."""
    schema = onnx.defs.get_schema(spec.op, opset, spec.domain)
    onnx_type = f"tensor({ {'float32': 'float', 'float64': 'double'}.get(dtype, dtype) })"
    return any(c.type_param_str == constraint and onnx_type in c.allowed_type_strs for c in schema.type_constraints)


def _cases():
    for spec in SPECS:
        if spec.test.get("generated") is False:
            continue  # ORT-internal (Memcpy*) or control flow: tested by test_models / test_control_flow
        for start, _end in spec.version_ranges():
            for constraint, dtypes in spec.types.items():
                for dtype in dtypes:
                    if _schema_allows(spec, start, constraint, dtype):
                        yield pytest.param(spec, start, dtype, id=f"{spec.op}-{start}-{dtype}")


def one_node_model(spec: manifest.KernelSpec, opset: int, dtype: str):
    """The node with its test hints from the manifest: shapes, CPU-input values, attributes."""
    shapes = spec.test.get("shapes") or DEFAULT_SHAPES[spec.inputs]
    cpu_values = list(spec.test.get("cpu_values", []))
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs, names, inits = [], [], []
    for i in range(spec.inputs):
        name = f"in{i}"
        names.append(name)
        if i in spec.cpu_inputs:
            inits.append(numpy_helper.from_array(np.array(cpu_values.pop(0), dtype=np.int64), name))
        else:
            inputs.append(helper.make_tensor_value_info(name, elem, shapes[min(i, len(shapes) - 1)]))
    attrs = dict(spec.test.get("attributes", {}))
    node = helper.make_node(spec.op, names, ["out"], domain=spec.domain, **attrs)
    graph = helper.make_graph([node], f"{spec.op}_{opset}", inputs, [helper.make_tensor_value_info("out", elem, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(spec.domain, opset)], ir_version=10)
    return model


def feeds_for(model, spec, dtype: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    positive = set(spec.test.get("positive_inputs", []))
    feeds = {}
    for i, vi in enumerate(model.graph.input):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if np.dtype(dtype).kind == "f":
            low = 0.5 if i in positive else -2.0
            feeds[vi.name] = rng.uniform(low, 2.0, size=shape).astype(dtype)
        elif dtype == "bool":
            feeds[vi.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            feeds[vi.name] = rng.integers(-50, 50, size=shape).astype(dtype)
    return feeds


@pytest.mark.parametrize("spec,opset,dtype", list(_cases()))
def test_op(ep_devices, spec, opset, dtype):
    model = one_node_model(spec, opset, dtype)
    feeds = feeds_for(model, spec, dtype)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert [(op, ep) for _, op, ep in placed] == [(spec.op, "VulkanExecutionProvider")]
    # float16 is checked against the float32 twin of the model on the CPU EP
    ref_model = one_node_model(spec, opset, "float32") if dtype == "float16" else model
    ref_feeds = {k: v.astype(np.float32) if dtype == "float16" else v for k, v in feeds.items()}
    want = runner.cpu_session(ref_model).run(None, ref_feeds)
    for _ in range(2):  # the second run replays the node's plan
        got = session.run(None, feeds)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            assert g.dtype == np.dtype(dtype)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **tolerance(dtype))
