"""Whole models on vkep against the CPU EP, with placement proved from ORT's own record."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest
from conftest import tolerance

from vkep import models, runner

OPS = {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "MatMul", "Gemm", "Softmax", "Reshape", "Flatten",
       "Squeeze", "Unsqueeze", "Identity"}


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_every_op_runs_on_vkep(ep_devices, dtype):
    model = models.all_ops(dtype)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {op for _, op, _ in placed} == OPS
    assert {ep for _, _, ep in placed} == {"VulkanExecutionProvider"}
    assert len(placed) == len(model.graph.node)
    feeds = models.random_inputs(model, seed=3)
    reference = runner.cpu_session(models.all_ops(np.float32)).run(
        None, {k: v.astype(np.float32) for k, v in feeds.items()})
    for _ in range(3):
        for got, want in zip(session.run(None, feeds), reference, strict=True):
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_allclose(got.astype(np.float32), want, **tolerance(dtype))


def test_unsupported_op_splits_between_vkep_and_cpu(ep_devices):
    model = models.with_unsupported_op(np.float32)
    session = runner.vkep_session(model)
    by_ep = Counter(ep for _, _, ep in runner.placement(session))
    assert by_ep["VulkanExecutionProvider"] >= 1 and by_ep["CPUExecutionProvider"] >= 1, by_ep
    feeds = models.random_inputs(model, seed=1)
    want = runner.cpu_session(model).run(None, feeds)
    for _ in range(2):
        for got, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(got, w, **tolerance(np.float32))


def test_two_sessions_four_threads(ep_devices):
    model_a, model_b = models.all_ops(np.float32), models.add_chain(64, shape=(4, 16))
    sessions = [runner.vkep_session(model_a), runner.vkep_session(model_b)]
    refs = [runner.cpu_session(model_a), runner.cpu_session(model_b)]
    failures: list[str] = []

    def work(worker: int) -> None:
        which = worker % 2
        model = (model_a, model_b)[which]
        for run in range(15):
            feeds = models.random_inputs(model, seed=100 * worker + run)
            want = refs[which].run(None, feeds)
            got = sessions[which].run(None, feeds)
            for g, w in zip(got, want, strict=True):
                if not np.allclose(g, w, **tolerance(np.float32)):
                    failures.append(f"worker {worker} run {run}: max diff {np.abs(g - w).max()}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not failures, failures


def test_add_chain_replays_natively(ep_devices):
    """After the first run, nodes whose shapes repeat are recorded by the C trampoline alone."""
    import vkep

    model = models.add_chain(32)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})  # (node by node)
    feeds = models.random_inputs(model)
    want = runner.cpu_session(model).run(None, feeds)[0]
    session.run(None, feeds)
    before = vkep.stats()["process"]["nodes_replayed_natively"]
    for _ in range(3):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **tolerance(np.float32))
    replayed = vkep.stats()["process"]["nodes_replayed_natively"] - before
    # on a unified device two nodes a run enter Python: the first reads the host's feed in place, the
    # last writes the output the host reads (after a wait, a command buffer is open for the next node)
    assert replayed >= 3 * (32 - 2), replayed


def test_full_batches_are_submitted_without_python(ep_devices):
    """A run of natively replayed nodes longer than a batch (gpu.stream.BATCH_COMMANDS) submits each full
    batch from C and goes on in a spare command buffer (recorder.c vkep_roll): only the two edge nodes
    enter Python, not one node per batch as before (which made a 640-node chain enter Python 11 times)."""
    import vkep
    from vkep.gpu.stream import BATCH_COMMANDS

    nodes = 640
    model = models.add_chain(nodes)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})  # (node by node)
    feeds = models.random_inputs(model)
    want = runner.cpu_session(model).run(None, feeds)[0]
    session.run(None, feeds)
    for _ in range(2):
        vkep.reset_stats()
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **tolerance(np.float32))
        stats = vkep.stats()
        device = next(v for k, v in stats.items() if k != "process")
        batches = nodes // BATCH_COMMANDS
        # (one more is allowed: a roll that finds no spare and the oldest batch still running hands its node
        # to Python, which submits and tops the spares up)
        assert stats["process"]["nodes_python_path"] <= 3, stats["process"]
        assert device["submits_native"] >= batches - 2, device


def test_cpu_input_values_key_the_plan(ep_devices):
    """A node that reads a CPU input's values (Slice's starts and ends) replays while those values are the
    same and runs its kernel again when they change: the values are part of the plan's key."""
    import onnx
    from onnx import TensorProto, helper

    import vkep

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Add", ["starts", "one"], ["s1"]),  # computed on the device, read on the host
             helper.make_node("Slice", ["r", "s1", "ends", "axes"], ["y0"]),
             helper.make_node("Neg", ["y0"], ["y"])]
    graph = helper.make_graph(
        nodes, "slice", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16]),
                         helper.make_tensor_value_info("starts", TensorProto.INT64, [1]),
                         helper.make_tensor_value_info("ends", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("one", 1), ("axes", 1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = runner.vkep_session(model.SerializeToString(), disable_cpu_fallback=True)
    cpu = runner.cpu_session(model.SerializeToString())
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    counts = []
    for start, end in ((2, 10), (2, 10), (5, 13), (5, 13)):  # same shape of y each time, other values
        feeds = {"x": x, "starts": np.array([start], np.int64), "ends": np.array([end], np.int64)}
        vkep.reset_stats()
        np.testing.assert_array_equal(session.run(None, feeds)[0], cpu.run(None, feeds)[0])
        counts.append(vkep.stats()["process"]["nodes_replayed_natively"])
    assert onnx.checker.check_model(model) is None
    # the Slice replays only when its values repeat (runs 2 and 4), not when they change (run 3)
    assert counts[1] > counts[2] and counts[3] > counts[2], counts
