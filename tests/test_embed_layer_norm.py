"""com.microsoft EmbedLayerNormalization on vkep against ORT's CPU EP, bit for bit: with and without segments,
position ids (per batch row and broadcast), a mask (mask_index) or none, the embedding sum output, BERT's sizes;
an id outside its table fails the run on both EPs and the session stays usable."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import helper, numpy_helper

from vkep import runner

B, S, H, V, P, G = 3, 11, 96, 50, 16, 2


def _model(segments: bool, mask: bool, position_ids: tuple | None, outputs: int, dtype=np.float32):
    rng = np.random.default_rng(0)
    tables = {"word": rng.standard_normal((V, H)), "position": rng.standard_normal((P, H)),
              "segment": rng.standard_normal((G, H)), "gamma": rng.uniform(0.5, 1.5, H), "beta": rng.standard_normal(H)}
    names = ["ids", "seg" if segments else "", "word", "position", "segment" if segments else "", "gamma", "beta",
             "mask" if mask else "", "pos" if position_ids else ""]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("EmbedLayerNormalization", names, ["y", "mask_index", "sum"][:outputs],
                            domain="com.microsoft", epsilon=1e-12)
    inputs = [helper.make_tensor_value_info("ids", 6, [B, S])]
    inputs += [helper.make_tensor_value_info("seg", 6, [B, S])] if segments else []
    inputs += [helper.make_tensor_value_info("mask", 6, [B, S])] if mask else []
    inputs += [helper.make_tensor_value_info("pos", 6, list(position_ids))] if position_ids else []
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(n, 6 if n == "mask_index" else
                                                             helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)
                               for n in ["y", "mask_index", "sum"][:outputs]],
                              [numpy_helper.from_array(v.astype(dtype), k) for k, v in tables.items()
                               if k != "segment" or segments])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def _feeds(segments: bool, mask: bool, position_ids: tuple | None, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {"ids": rng.integers(0, V, (B, S)).astype(np.int32)}
    if segments:
        feeds["seg"] = rng.integers(0, G, (B, S)).astype(np.int32)
    if mask:
        feeds["mask"] = rng.integers(0, 3, (B, S)).astype(np.int32)  # (a 2 is not counted)
    if position_ids:
        feeds["pos"] = rng.integers(0, P, position_ids).astype(np.int32)
    return feeds


@pytest.mark.parametrize("segments", [True, False])
@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("position_ids", [None, (B, S), (1, S)])
@pytest.mark.parametrize("outputs", [2, 3])
def test_against_the_cpu_ep(ep_devices, segments, mask, position_ids, outputs):
    model = _model(segments, mask, position_ids, outputs)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for seed in (1, 2):
        feeds = _feeds(segments, mask, position_ids, seed)
        for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("outputs", [2, 3])
def test_float16_against_the_cpu_ep(ep_devices, mask, outputs):
    """float16 tables (ORT's transformers optimizer with --float16; survey 7): on vkep, within float16 rounding of
    the CPU EP's float16 kernel (vkep sums the rows in float and keeps the sum in float16 before normalizing)."""
    model = _model(True, mask, (B, S), outputs, np.float16)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    feeds = _feeds(True, mask, (B, S))
    for got, want in zip(session.run(None, feeds), runner.cpu_session(model).run(None, feeds), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_an_id_outside_its_table_fails_the_run(ep_devices):
    model = _model(True, True, None, 2)
    feeds = _feeds(True, True, None)
    feeds["ids"][1, 3] = V
    with pytest.raises(Exception, match="out of range"):
        runner.cpu_session(model).run(None, feeds)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    with pytest.raises(Exception, match="EmbedLayerNormalization"):
        session.run(None, feeds)
    good = _feeds(True, True, None, 3)
    for got, want in zip(session.run(None, good), runner.cpu_session(model).run(None, good), strict=True):
        assert np.array_equal(got, want)


@pytest.mark.parametrize(("hidden", "where"), [(19_999, "VulkanExecutionProvider"), (20_000, "CPUExecutionProvider"),
                                             (22_000, "CPUExecutionProvider")])
def test_wide_rows_within_lavapipes_loop_count(ep_devices, monkeypatch, hidden, where):
    """An invocation a token walks its row three times (3 x (hidden + 1) loop steps): rows of 19,999 run on vkep,
    wider ones go to the CPU EP (nothing counted them: 22,000 came out 4.0 apart, lavapipe cut the last pass short).
    Equal to the CPU EP."""
    here = sys.modules[__name__]
    for name, value in (("H", hidden), ("B", 1), ("S", 2)):
        monkeypatch.setattr(here, name, value)
    model, feeds = _model(False, False, None, 2), _feeds(False, False, None)
    session = runner.vkep_session(model)
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
    assert {ep for _, _, ep in runner.placement(session)} == {where}
