"""Einsum's common forms against the CPU EP; the unsupported ones are clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import TensorProto, helper

from vkep import runner


def _model(equation: str, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    graph = helper.make_graph([helper.make_node("Einsum", names, ["y"], equation=equation)], "einsum",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes, strict=True)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ji,jk->ik", [(4, 3), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(7,), (7,)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("bsh,hd->bsd", [(2, 6, 8), (8, 4)]),
    # other output orders and unfoldable batches (survey 7: HF Mamba2's chunked scan): gathered, multiplied, gathered
    ("bclhn,bcshn->bclsh", [(2, 2, 4, 8, 8), (2, 2, 4, 8, 8)]),
    ("bclsh,bcshp->bclhp", [(2, 2, 4, 4, 8), (2, 2, 4, 8, 16)]),
    ("bzch,bzhpn->bchpn", [(2, 3, 2, 8), (2, 3, 8, 16, 8)]),
    ("bijh,bjkh->bikh", [(2, 3, 4, 5), (2, 4, 6, 5)]),
    ("ij,jk->ki", [(3, 0), (0, 5)]),
    # one operand (survey 7: torch.einsum's sums and transposes): a strided gather, then a ReduceSum
    ("bij->bj", [(2, 7, 10)]),
    ("bij->bji", [(2, 7, 10)]),
    ("bij->b", [(2, 7, 10)]),
    ("ii->i", [(4, 4)]),
    ("ii->", [(5, 5)]),
    ("bii->bi", [(3, 4, 4)]),
    ("iij->j", [(3, 3, 6)]),
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("ji", [(3, 4)]),
    ("ij->", [(300, 70)]),
    ("ijk->kj", [(0, 3, 4)]),
])
def test_einsum_forms(ep_devices, equation, shapes):
    model = _model(equation, shapes)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [op for _, op, _ in runner.placement(session)] == ["Einsum"]
    rng = np.random.default_rng(1)
    feeds = {f"x{i}": rng.uniform(-1, 1, s).astype(np.float32) for i, s in enumerate(shapes)}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **tolerance(np.float32))


@pytest.mark.parametrize("equation,shapes", [("ii,ij->i", [(3, 3), (3, 4)]), ("ij,jk->i", [(3, 4), (4, 5)])])
def test_unsupported_forms_stay_on_the_cpu_ep(ep_devices, equation, shapes):
    """vkep declines them while ORT partitions the graph, so the node runs on the CPU EP, correctly."""
    model = _model(equation, shapes)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    feeds = {f"x{i}": np.full(s, 0.5, np.float32) for i, s in enumerate(shapes)}
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])


@pytest.mark.parametrize("shapes_known", [True, False])
def test_a_long_contraction_over_unfoldable_batches(ep_devices, shapes_known):
    """K of 130,000 with two batch indices that do not fold into one (A's and B's outer strides non-zero): no
    dispatch of matmul.comp sums it within lavapipe's loop count, so split-K takes it a dispatch a slice (its
    one-dispatch slices use the batch's outer index). Its shapes seen at run time only, this failed the run; the
    decisive product is the last of K."""
    k = 130_000
    shapes = [(2, 3, 2, k), (2, 2, k, 3)]
    model = _model("aibk,bakj->abij", shapes if shapes_known else [["p", "q", "r", "s"], ["t", "u", "v", "w"]])
    rng = np.random.default_rng(4)
    feeds = {f"x{i}": rng.uniform(-1, 1, s).astype(np.float32) for i, s in enumerate(shapes)}
    feeds["x0"][..., -1] = 1000.0
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [op for _, op, _ in runner.placement(session)] == ["Einsum"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    # (float32 sums of 130,000 terms in another order: within 1e-6 of the sum of magnitudes; one term lost is 1,000)
    bound = np.einsum("aibk,bakj->abij", np.abs(feeds["x0"]).astype(np.float64), np.abs(feeds["x1"]))
    assert np.all(np.abs(session.run(None, feeds)[0] - want) <= 1e-6 * bound)
