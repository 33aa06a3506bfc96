"""NonMaxSuppression on vkep against ORT's CPU EP, bit for bit: both box formats (corners in either order),
with and without a score threshold, every max_output_boxes_per_class case (absent, 0, negative, past the
boxes), IoU thresholds 0 and 1, boxes of no area, more boxes than a workgroup has lanes, many batches and
classes, scores that tie, a session whose inputs change from run to run, and an IoU threshold out of range
(both EPs fail the run)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from vkep import runner

NAMES = ["max_output_boxes_per_class", "iou_threshold", "score_threshold"]


def _model(scalars: dict, opset: int = 11, center: int = 0, shapes=((None, None, 4), (None, None, None))):
    """The node with `scalars` (name -> value, None: left out) as initializers (CPU inputs)."""
    names = ["boxes", "scores"] + [n if scalars.get(n) is not None else "" for n in NAMES]
    while names[-1] == "":
        names.pop()
    inits = [numpy_helper.from_array(np.array([v], np.int64 if n == NAMES[0] else np.float32), n)
             for n, v in scalars.items() if v is not None]
    node = helper.make_node("NonMaxSuppression", names, ["y"], center_point_box=center)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("boxes", 1, shapes[0]),
                                            helper.make_tensor_value_info("scores", 1, shapes[1])],
                              [helper.make_tensor_value_info("y", 7, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _inputs(batches: int, classes: int, n: int, seed: int = 0, center: int = 0, ties: bool = False):
    rng = np.random.default_rng(seed)
    xy, wh = rng.uniform(0, 80, (batches, n, 2)), rng.uniform(2, 30, (batches, n, 2))
    if center:
        boxes = np.concatenate([xy, wh], -1)
    else:  # [y1, x1, y2, x2], the corners of some boxes swapped
        boxes = np.concatenate([xy, xy + wh], -1)[..., [1, 0, 3, 2]]
        swap = rng.random((batches, n)) < 0.3
        boxes[swap] = boxes[swap][:, [2, 3, 0, 1]]
    scores = rng.integers(0, 6, (batches, classes, n)) / 6 if ties else rng.random((batches, classes, n))
    return {"boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32)}


def _check(model, feeds) -> np.ndarray:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        got = session.run(None, feeds)[0]
        assert got.dtype == np.int64 and got.shape == want.shape and np.array_equal(got, want), (got, want)
    return got


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("score_threshold", [None, 0.35])
@pytest.mark.parametrize("opset", [10, 11])
def test_formats_and_thresholds(ep_devices, center, score_threshold, opset):
    model = _model({NAMES[0]: 15, NAMES[1]: 0.4, NAMES[2]: score_threshold}, opset, center)
    assert len(_check(model, _inputs(2, 3, 150, center=center)))


@pytest.mark.parametrize("max_out", [None, 0, -4, 1, 7, 10 ** 12])
def test_max_output_boxes_per_class(ep_devices, max_out):
    _check(_model({NAMES[0]: max_out, NAMES[1]: 0.5}), _inputs(1, 2, 60, seed=3))


@pytest.mark.parametrize("iou", [0.0, 1.0])
def test_iou_thresholds_at_the_ends(ep_devices, iou):
    _check(_model({NAMES[0]: 1000, NAMES[1]: iou}), _inputs(1, 2, 90, seed=4))


def test_many_boxes_batches_and_classes_with_ties_and_boxes_of_no_area(ep_devices):
    feeds = _inputs(3, 5, 700, seed=5, ties=True)
    feeds["boxes"][:, ::17, 2] = feeds["boxes"][:, ::17, 0]  # (y2 = y1: no area, never suppressed)
    _check(_model({NAMES[0]: 40, NAMES[1]: 0.45, NAMES[2]: 0.1}), feeds)


def test_each_run_chooses_from_its_own_scores(ep_devices):
    model = _model({NAMES[0]: 60, NAMES[1]: 0.5, NAMES[2]: 0.5}, shapes=((1, 200, 4), (1, 4, 200)))
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    lengths = set()
    for seed in range(5):
        feeds = _inputs(1, 4, 200, seed=seed)
        feeds["scores"] *= 0.4 + 0.2 * seed  # (more boxes pass the threshold, up to the first few runs)
        got, want = session.run(None, feeds)[0], cpu.run(None, feeds)[0]
        assert got.shape == want.shape and np.array_equal(got, want), seed
        lengths.add(len(got))
    assert len(lengths) >= 3


def test_an_iou_threshold_out_of_range_fails_the_run(ep_devices):
    model = _model({NAMES[0]: 5, NAMES[1]: 1.5})
    feeds = _inputs(1, 1, 10)
    with pytest.raises(Exception, match="iou_threshold must be in range"):
        runner.cpu_session(model).run(None, feeds)
    with pytest.raises(Exception, match="iou_threshold 1.5 must be in range"):
        runner.vkep_session(model, disable_cpu_fallback=True).run(None, feeds)


@pytest.mark.parametrize("step", [-1, 0, 1])
def test_an_iou_at_the_threshold_and_an_ulp_either_side(ep_devices, step):
    """Two boxes overlapping by IoU 50 / 150 in float32: at the threshold the second stays (suppressed only
    above it), an ulp below it goes: vkep computes the IoU in ORT's order of float operations."""
    boxes = np.array([[[0, 0, 10, 10], [0, 5, 10, 15], [3, 40, 4, 41]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    iou = np.float32(50) / np.float32(150)
    threshold = float(np.nextafter(iou, np.float32(step * np.inf)) if step else iou)
    got = _check(_model({NAMES[0]: 3, NAMES[1]: threshold}), {"boxes": boxes, "scores": scores})
    assert got[:, 2].tolist() == ([0, 2] if step < 0 else [0, 1, 2])


def test_more_rounds_than_one_dispatch_takes(ep_devices):
    """Choosing a box is a round of nms.comp's loops (nms.round_loops: two passes over the boxes, the winner's
    tree): in one dispatch 3,000 disjoint boxes chose only 1,821 of 3,000 (and YOLOv8's 8,400 boxes 840 of 1,000),
    lavapipe ending its loops there. The rounds are split among dispatches: class 0 chooses all 3,000 through two,
    class 1 runs out of boxes (those above the score threshold) in the first, and the second keeps its count."""
    from vkep.kernels.base import LOOP_BUDGET
    from vkep.kernels.nms import round_loops

    n = 3000
    assert n > LOOP_BUDGET // round_loops(n)  # (more rounds than one dispatch takes)
    rng = np.random.default_rng(6)
    x = np.arange(n, dtype=np.float32) * 2
    boxes = np.stack([np.zeros(n), x, np.ones(n), x + 1], -1)  # [y1, x1, y2, x2], disjoint: none suppressed
    scores = np.stack([rng.permutation(n) / n + 0.6, np.where(rng.random(n) < 0.2, 0.9, 0.1)])
    feeds = {"boxes": np.stack([boxes, boxes[::-1]]).astype(np.float32),
             "scores": np.stack([scores, scores[::-1]]).astype(np.float32)}
    got = _check(_model({NAMES[0]: n, NAMES[1]: 0.5, NAMES[2]: 0.5}, shapes=((2, n, 4), (2, 2, n))), feeds)
    assert len(got) == 2 * n + 2 * (scores[1] > 0.5).sum()
