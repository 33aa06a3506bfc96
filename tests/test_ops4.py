"""Ops of the fourth helper round on vkep against ORT's CPU EP, in real sessions with vkep loaded: AveragePool and
MaxPool whose window runs past the padded input (and auto_pad SAME with dilations), DeformConv, Det, MaxRoiPool and
com.microsoft CropAndResize. Every node a test claims for vkep is checked in ORT's own placement record."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner

F32 = TensorProto.FLOAT


def _model(nodes, inputs, opset: int = 19, ms_opset: bool = False, out_types: dict | None = None):
    """A model of `nodes` over `inputs` ((name, elem type, shape)); its outputs: the last node's (float32 but those
    `out_types` names)."""
    nodes = nodes if isinstance(nodes, list) else [nodes]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(o, (out_types or {}).get(o, F32), None)
                               for o in nodes[-1].output if o])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms_opset else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _on_vkep(model):
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    return session


def _compare(model, feeds, rtol=0.0, atol=0.0, equal_nan=True):
    """vkep's outputs (every node placed on vkep) against the CPU EP's: shapes equal, values within rtol/atol."""
    got = _on_vkep(model).run(None, feeds)
    want = runner.cpu_session(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return got, want


def _placed_on(model) -> set[str]:
    return {ep for _, _, ep in runner.placement(runner.vkep_session(model))}


# ---- 1. AveragePool / MaxPool whose window runs past the padded input -----------------------------------------

# (input spatial dims, attributes): windows longer than the padded input (the CPU EP's truncating division gives an
# output, or none), with pads, strides, ceil_mode, dilations, auto_pad SAME with dilations (pads from the undilated
# kernel) and SAME pads that come out negative
POOL_CASES = [
    ([2, 80], dict(kernel_shape=[3, 2], strides=[3, 2])),  # PP-OCRv4 rec's AveragePool fed 32-pixel lines
    ([2], dict(kernel_shape=[3], strides=[3])),
    ([2], dict(kernel_shape=[5], strides=[4])),
    ([2], dict(kernel_shape=[5], strides=[2])),  # (no output)
    ([2], dict(kernel_shape=[3], strides=[1])),  # (no output)
    ([3], dict(kernel_shape=[5], strides=[2], pads=[1, 0])),
    ([2], dict(kernel_shape=[4], strides=[2], pads=[1, 0])),
    ([2, 3], dict(kernel_shape=[4, 5], strides=[3, 4], pads=[1, 0, 0, 1])),
    ([2, 2, 7], dict(kernel_shape=[3, 4, 2], strides=[4, 3, 2], pads=[0, 1, 0, 0, 0, 1])),
    ([4], dict(kernel_shape=[2], strides=[2], pads=[0, 1])),  # (ceil_mode: the last window starts in the pad)
    ([5], dict(kernel_shape=[3], dilations=[2], auto_pad="SAME_UPPER")),
    ([6, 5], dict(kernel_shape=[3, 2], dilations=[2, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
    ([11], dict(kernel_shape=[1], strides=[4], auto_pad="SAME_UPPER")),  # (SAME pads -1 + 0)
    ([10, 11], dict(kernel_shape=[1, 2], strides=[4, 4], auto_pad="SAME_LOWER")),
    ([9, 10], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),  # (an ordinary window)
]


def _pool(op: str, dims, attrs: dict, outputs=("y",), opset: int = 19):
    return _model(helper.make_node(op, ["x"], list(outputs), **attrs), [("x", F32, [2, 3, *dims])], opset,
                  out_types={"i": TensorProto.INT64})


def _pool_feeds(dims):
    return {"x": np.random.default_rng(len(dims)).normal(0, 1, (2, 3, *dims)).astype(np.float32)}


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("dims,attrs", POOL_CASES)
def test_average_pool_past_the_input(ep_devices, dims, attrs, ceil_mode, count_include_pad):
    model = _pool("AveragePool", dims, {**attrs, "ceil_mode": ceil_mode, "count_include_pad": count_include_pad})
    _compare(model, _pool_feeds(dims), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("indices", [False, True])
@pytest.mark.parametrize("dims,attrs", POOL_CASES)
def test_max_pool_past_the_input(ep_devices, dims, attrs, ceil_mode, indices):
    model = _pool("MaxPool", dims, {**attrs, "ceil_mode": ceil_mode}, ("y", "i") if indices else ("y",))
    if not indices and attrs.get("strides", [1])[0] > attrs["kernel_shape"][0] and "dilations" not in attrs \
            and attrs.get("auto_pad", "").startswith("SAME"):
        # negative SAME pads: the CPU EP's MLAS MaxPool (no Indices, no dilation) fails the run; vkep declines
        assert _placed_on(model) == {"CPUExecutionProvider"}
        return
    _compare(model, _pool_feeds(dims))


def test_the_repro_shape(ep_devices):
    """PP-OCRv4 rec's p2o.AveragePool.0 at a 2-high input (opset 12): [1, 480, 1, 40], the mean of 2 x 2."""
    model = _pool("AveragePool", [2, 80], dict(kernel_shape=[3, 2], strides=[3, 2], pads=[0, 0, 0, 0]), opset=12)
    x = np.random.default_rng(0).normal(0, 1, (2, 3, 2, 80)).astype(np.float32)
    y = _on_vkep(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, x.reshape(2, 3, 2, 40, 2).mean(axis=(2, 4))[:, :, None, :], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_a_negative_output_size_is_declined(ep_devices, op):
    """(2 - 4) / 1 + 1 = -1: the CPU EP fails the run; vkep leaves the node to it."""
    assert _placed_on(_pool(op, [2], dict(kernel_shape=[4]))) == {"CPUExecutionProvider"}
