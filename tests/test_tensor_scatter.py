"""TensorScatter (opset 24: a KV cache updated in place) against ORT's CPU EP: linear and circular writes, the
sequence axis where exporters put it, no write_indices, the cache aliased to the output as ORT plans it for a
cache nothing else reads, a decoding loop that keeps the cache on the device through IOBinding, and the CPU EP's
index errors (a negative index, or linear rows past the end, fail the run; the session goes on)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from vkep import runner

VKEP = "VulkanExecutionProvider"


def _model(cache: list, update: list, axis: int = -2, mode: str = "linear", indices: bool = True,
           elem: int = TensorProto.FLOAT, add_after: bool = False) -> bytes:
    """One TensorScatter node (and, with add_after, an Add reading its output, as attention reads a cache)."""
    inputs = [helper.make_tensor_value_info("cache", elem, cache), helper.make_tensor_value_info("update", elem, update)]
    names = ["cache", "update"]
    if indices:
        inputs.append(helper.make_tensor_value_info("write", TensorProto.INT64, [cache[0]]))
        names.append("write")
    nodes = [helper.make_node("TensorScatter", names, ["present"], axis=axis, mode=mode)]
    outputs = [helper.make_tensor_value_info("present", elem, cache)]
    if add_after:
        nodes.append(helper.make_node("Add", ["present", "present"], ["twice"]))
        outputs.append(helper.make_tensor_value_info("twice", elem, cache))
    graph = helper.make_graph(nodes, "tensor_scatter", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)], ir_version=10).SerializeToString()


def _feeds(rng, cache: list, update: list, write: list | None, dtype=np.float32) -> dict:
    feeds = {"cache": rng.standard_normal(cache).astype(dtype), "update": rng.standard_normal(update).astype(dtype)}
    if write is not None:
        feeds["write"] = np.array(write, np.int64)
    return feeds


def _check(model: bytes, *all_feeds: dict) -> None:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    cpu = runner.cpu_session(model)
    for feeds in all_feeds:  # (later feeds: the same shapes, a replayed plan)
        for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cache,update,axis,mode,writes", [
    ([2, 4, 16, 8], [2, 4, 1, 8], -2, "linear", [[5, 0], [15, 9]]),  # [B, heads, max_seq, head]: one token
    ([2, 4, 16, 8], [2, 4, 5, 8], -2, "linear", [[0, 11], [3, 3]]),  # a prompt of 5
    ([2, 16, 4, 8], [2, 3, 4, 8], 1, "linear", [[13, 2], [0, 0]]),  # [B, max_seq, heads, head]
    ([3, 10, 6], [3, 4, 6], 1, "circular", [[8, 9, 23], [0, 10, 5]]),  # rows wrapping past the end
    ([1, 2, 6, 4], [1, 2, 6, 4], 2, "circular", [[4], [0]]),  # the whole window replaced, rotated
])
def test_matches_the_cpu_ep(ep_devices, cache, update, axis, mode, writes):
    rng = np.random.default_rng(len(cache) + update[axis])
    model = _model(cache, update, axis, mode)
    _check(model, *(_feeds(rng, cache, update, w) for w in writes))


def test_without_write_indices_and_other_types(ep_devices):
    """No write_indices: rows from 0; integer and float16 caches are moved as they are."""
    rng = np.random.default_rng(3)
    _check(_model([2, 3, 7, 4], [2, 3, 2, 4], indices=False), _feeds(rng, [2, 3, 7, 4], [2, 3, 2, 4], None))
    for elem, dtype in ((TensorProto.FLOAT16, np.float16), (TensorProto.INT64, np.int64), (TensorProto.UINT8, np.uint8)):
        feeds = _feeds(rng, [2, 9, 3], [2, 4, 3], [5, 1], np.float32)
        feeds = {k: v.astype(dtype) if k != "write" else v for k, v in feeds.items()}
        _check(_model([2, 9, 3], [2, 4, 3], axis=1, elem=elem), feeds)


def test_index_errors_fail_the_run_and_the_session_goes_on(ep_devices):
    rng = np.random.default_rng(4)
    for mode, bad in (("linear", [-1, 0]), ("linear", [14, 0]), ("circular", [0, -3])):
        model = _model([2, 2, 16, 4], [2, 2, 3, 4], mode=mode)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        feeds = _feeds(rng, [2, 2, 16, 4], [2, 2, 3, 4], bad)
        with pytest.raises(Exception, match="write_indices"):  # (the CPU EP's message)
            runner.cpu_session(model).run(None, feeds)
        with pytest.raises(Exception, match="out of range|index"):
            session.run(None, feeds)
        good = _feeds(rng, [2, 2, 16, 4], [2, 2, 3, 4], [13, 0])
        np.testing.assert_array_equal(session.run(None, good)[0], runner.cpu_session(model).run(None, good)[0])


def test_a_decoding_loop_keeps_the_cache_on_the_device(ep_devices):
    """Each step writes one row of keys at its position into a cache that is both the node's input and its output
    (one buffer of vkep memory bound to both through IOBinding, as ORT GenAI binds its KV cache) and reads the
    cache (an Add): every step equals the CPU EP's, and the cache ends as the CPU EP's."""
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    cache, update = [1, 2, 8, 4], [1, 2, 1, 4]
    model = _model(cache, update, add_after=True)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    cpu = runner.cpu_session(model)
    kind = "HOST_ACCESSIBLE" if shares_host_memory(physical_devices()[0]) else "DEFAULT"
    memory = ep_devices[0].memory_info(getattr(ort.OrtDeviceMemoryType, kind))
    shared = ort.OrtValue.ortvalue_from_shape_and_type(cache, np.float32, memory_info=memory)
    shared.update_inplace(np.zeros(cache, np.float32))
    want = np.zeros(cache, np.float32)
    rng = np.random.default_rng(5)
    binding = session.io_binding()
    for step in range(8):
        row = rng.standard_normal(update).astype(np.float32)
        write = np.array([step], np.int64)
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()
        binding.bind_ortvalue_input("cache", shared)
        binding.bind_cpu_input("update", row)
        binding.bind_cpu_input("write", write)
        binding.bind_ortvalue_output("present", shared)
        binding.bind_output("twice", "cpu")
        session.run_with_iobinding(binding)
        want, want_twice = cpu.run(None, {"cache": want, "update": row, "write": write})
        np.testing.assert_array_equal(binding.get_outputs()[1].numpy(), want_twice)
    np.testing.assert_array_equal(shared.numpy(), want)
