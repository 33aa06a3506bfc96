"""NonMaxSuppression (opsets 10, 11) as ORT's CPU EP selects: shaders/nms.comp chooses each (batch, class)'s
boxes in one workgroup; their counts come back to the host (the output's length is their sum: a stall, never
replayed) and a second pass writes the (batch, class, box) triples in ORT's order. The three optional scalar
inputs are CPU inputs.

Ties: where two candidates score the same, vkep takes the lower box index first. ORT's CPU EP takes them in the
order of its std::priority_queue, which promises no order for equal scores; it gave the same choices as vkep in
every tie tried (tests/test_nms.py: scores on a grid of sixths, 700 boxes, 15 (batch, class) pairs)."""

from __future__ import annotations

import numpy as np

from vkep.kernels.base import LOOP_BUDGET, Kernel, UnsupportedError
from vkep.kernels.movement import host_values, optional_input

SHADER = "nms.comp"
CHOOSE, PLACE = 0, 1
WG = 256  # nms.comp's workgroup


def round_loops(n: int) -> int:
    """Loop steps one of nms.comp's rounds (a box chosen) spends, as lavapipe counts them: its two passes over the
    boxes (a lane's share of n), the winner's tree and the leaving passes. Measured 2 ceil(n / 256) + 12 (in one
    dispatch 8,400 boxes ran 840 rounds, 3,000 ran 1,821: the rest of max_output_boxes_per_class silently not
    chosen, a wrong answer); the rounds are split among dispatches within the loop budget."""
    return 2 * -(-n // WG) + 12


def _scalar(call, index: int) -> float | int | None:
    """An optional scalar CPU input's value (None: absent or empty)."""
    values = host_values(call, optional_input(call, index))
    return values[0] if values else None


class NonMaxSuppression(Kernel):
    def __init__(self, *args):
        super().__init__(*args)
        if self.attrs.get("center_point_box", 0) not in (0, 1):
            raise UnsupportedError("NonMaxSuppression: center_point_box must be 0 or 1")

    def compute(self, call) -> None:
        boxes, scores = call.inputs[:2]
        if len(boxes.shape) != 3 or len(scores.shape) != 3:
            raise UnsupportedError("NonMaxSuppression: boxes and scores must be 3-D tensors")
        batches, n, four = boxes.shape
        if four != 4 or scores.shape[0] != batches or scores.shape[2] != n:
            raise UnsupportedError(f"NonMaxSuppression: boxes {list(boxes.shape)} and scores {list(scores.shape)} "
                                   "do not match ([batches, boxes, 4] and [batches, classes, boxes])")
        max_per_class = max(_scalar(call, 2) or 0, 0)
        iou = _scalar(call, 3)
        if iou is not None and not 0 <= iou <= 1:
            raise UnsupportedError(f"NonMaxSuppression: iou_threshold {iou} must be in range [0, 1]")
        score_threshold = _scalar(call, 4)
        pairs = batches * scores.shape[1]
        take = min(max_per_class, n)  # (more than the boxes cannot be chosen)
        if not take or not pairs:
            call.output(0, (0, 3), "int64")
            return
        alive = call.scratch((pairs * n,), "int32")
        chosen = call.scratch((pairs * take,), "int32")
        counts = call.scratch((pairs,), "int32")
        push = {"boxes": boxes, "scores": scores, "alive": alive, "chosen": chosen, "counts": counts, "y": None,
                "boxes_n": n, "classes": scores.shape[1], "max_per_class": take,
                "iou_threshold": 0.0 if iou is None else iou,
                "score_threshold": 0.0 if score_threshold is None else score_threshold, "first_round": 0,
                "end_round": take}
        constants = {"center_point_box": self.attrs.get("center_point_box", 0),
                     "has_score_threshold": int(score_threshold is not None)}
        rounds = (LOOP_BUDGET - -(-n // WG) - 8) // round_loops(n)  # (the first dispatch marks the boxes alive)
        if rounds < 1:
            raise UnsupportedError(f"NonMaxSuppression: {n} boxes a class are past one invocation's loop budget")
        for first in range(0, take, rounds):
            state = [alive, chosen, counts] if first else []  # (the dispatch before left them)
            call.dispatch(SHADER, "float32", {**constants, "mode": CHOOSE},
                          {**push, "first_round": first, "end_round": min(take, first + rounds)}, (pairs, 1, 1),
                          [boxes, scores, *state], [alive, chosen, counts])
        total = int(np.frombuffer(call.read_device(counts), np.uint32).sum())
        y = call.output(0, (total, 3), "int64")
        if total:
            call.dispatch(SHADER, "float32", {**constants, "mode": PLACE}, {**push, "y": y}, (pairs, 1, 1),
                          [chosen, counts], [y])
