"""float16 arithmetic (binary.comp computes Add, Sub, Mul, Min, Max, PRelu and comparisons of float16 operands in
float16): bit for bit the CPU EP's results over special values: signed zeros, subnormals (the smallest, the largest,
halfway cases that round to even), the largest finite 65504 and sums and products past it (overflow to inf,
65504 + 16 rounding up to inf), infinities and NaN. Div, which stays in float, is checked alongside."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner

SPECIAL = np.array([0.0, -0.0, 2.0 ** -24, -(2.0 ** -24), 3 * 2.0 ** -24, 1023 * 2.0 ** -24, 2.0 ** -14, 0.5, 1.0,
                    -1.0, 1.5, 3.0, 0.1, -0.3, 255.9, 2048.0, 2049.0, 32768.0, 65504.0, -65504.0, 16.0, 60000.0,
                    np.inf, -np.inf, np.nan], np.float16)
# the operand b: SPECIAL's values and a few more (x 0.5 of the smallest subnormal, and of 3 of them, are ties to
# even; 65504 + 16 = 65520 is halfway to 65536 and rounds to inf)
B = np.concatenate([SPECIAL, np.array([-0.5, 0.75, 2.0 ** -10], np.float16)])
# every pair, as two inputs of one shape: where one input broadcasts, the CPU EP's Min and Max of +0 and -0 give
# the other input's zero (its scalar-input paths swap the operands), vkep's always the first's
PAIRS = {"a": np.repeat(SPECIAL, len(B)), "b": np.tile(B, len(SPECIAL))}


def _model(op: str, out_type: int):
    node = helper.make_node(op, ["a", "b"], ["y"])
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, TensorProto.FLOAT16, v.shape)
                                           for n, v in PAIRS.items()],
                              [helper.make_tensor_value_info("y", out_type, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=10)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Min", "Max", "PRelu"])
def test_arithmetic_matches_the_cpu_ep_bit_for_bit(op):
    model = _model(op, TensorProto.FLOAT16)
    feeds = PAIRS
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    got = session.run(None, feeds)[0]
    assert got.dtype == want.dtype == np.float16 and got.shape == want.shape
    # NaN is NaN (IEEE leaves the sign and payload of an invalid operation's NaN open); every other bit pattern equal
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bad = np.flatnonzero((got.view(np.uint16) != want.view(np.uint16)) & ~nan)
    a, b = feeds["a"], feeds["b"]
    assert not len(bad), "\n".join(f"{a[i]!r} {op} {b[i]!r}: vkep {got[i]!r}, CPU EP {want[i]!r}" for i in bad[:10])
    # the results reach past the normal range both ways, as the values were chosen to
    assert np.isinf(want).any() and ((want != 0) & (np.abs(want) < 2.0 ** -14)).any() or op in ("Min", "Max", "PRelu")


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_match_the_cpu_ep(op):
    model = _model(op, TensorProto.BOOL)
    feeds = PAIRS
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
