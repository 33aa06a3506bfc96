"""RandomUniform, RandomNormal, their Like forms and Bernoulli (ORT: RandomUniformLike, Greater, Cast) on vkep
against ORT's CPU EP: with a seed the same values run after run (the engine's position kept on the device), uniform
ones to the bit, normal ones within two float32 ulps (the CPU EP's log is glibc's logf); without one, values of the
right distribution."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import vkep
from vkep import runner

PROTO = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64, "float16": TensorProto.FLOAT16,
         "float64": TensorProto.DOUBLE}


def _model(op: str, shape: list[int], input_type: str = "float32", opset: int = 17, **attrs):
    like = op.endswith("Like") or op == "Bernoulli"
    if not like:
        attrs["shape"] = shape
    inputs = [helper.make_tensor_value_info("x", PROTO[input_type], shape)] if like else []
    node = helper.make_node(op, ["x"] if like else [], ["y"], **attrs)
    out_type = attrs.get("dtype", PROTO[input_type] if like else TensorProto.FLOAT)
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("y", out_type, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _runs(model, feeds: dict, runs: int = 3):
    """Each run's output on vkep (every node there) and on the CPU EP, each session made once."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    return [(session.run(None, feeds)[0], cpu.run(None, feeds)[0]) for _ in range(runs)]


def _feeds(shape, input_type="float32") -> dict:
    return {"x": np.full(shape, 0.3, input_type)}


@pytest.mark.parametrize("op,shape,attrs", [
    ("RandomUniform", [10], {"seed": 3.0}),
    ("RandomUniform", [3, 200, 167], {"seed": 7.0, "low": -2.0, "high": 5.0}),
    ("RandomUniform", [4, 5], {"seed": -5.5, "low": 1.0, "high": 1.0}),
    ("RandomUniformLike", [64, 31], {"seed": 1e10}),
    ("RandomUniformLike", [7], {"seed": 2147483647.0, "high": 0.5}),  # (seeds of 0 mod 2^31 - 1: state 1)
])
def test_seeded_uniform_equals_the_cpu_ep(ep_devices, op, shape, attrs):
    for got, want in _runs(_model(op, shape, **attrs), _feeds(shape) if op.endswith("Like") else {}):
        np.testing.assert_array_equal(got, want)


def test_uniform_like_of_another_type_and_opset_22(ep_devices):
    """The Like input is read for its shape only: an int64 one with dtype float, at RandomUniformLike-22 (which ORT
    1.32's CPU EP has no kernel for: compared with its RandomUniformLike-1, the same op but for bfloat16)."""
    model = _model("RandomUniformLike", [5, 9], "int64", opset=22, seed=11.0, dtype=TensorProto.FLOAT)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(_model("RandomUniformLike", [5, 9], "int64", seed=11.0, dtype=TensorProto.FLOAT))
    for _ in range(3):
        np.testing.assert_array_equal(session.run(None, _feeds([5, 9], "int64"))[0],
                                      cpu.run(None, _feeds([5, 9], "int64"))[0])


@pytest.mark.parametrize("op,shape,attrs", [
    ("RandomNormal", [11], {"seed": 3.0}),
    ("RandomNormal", [2, 50001], {"seed": 1.0, "mean": 0.5, "scale": 2.0}),
    ("RandomNormalLike", [5000], {"seed": 4.0}),
    ("RandomNormalLike", [1, 192, 331], {"seed": 0.0, "scale": 0.667}),  # (VITS's noise, as piper's voices draw it)
])
def test_seeded_normal_within_two_ulps_of_the_cpu_ep(ep_devices, op, shape, attrs):
    """The polar method's pairs, kept and dropped as the CPU EP keeps them (an odd count drops a value), so that
    later runs stay in step; the values within two ulps (the log's last bit), the sign and position of each the
    CPU EP's."""
    mean, scale = attrs.get("mean", 0.0), attrs.get("scale", 1.0)
    for got, want in _runs(_model(op, shape, **attrs), _feeds(shape) if op.endswith("Like") else {}):
        standard, reference = (got - np.float32(mean)) / np.float32(scale), (want - np.float32(mean)) / np.float32(scale)
        np.testing.assert_allclose(standard, reference, rtol=2.5e-7, atol=1e-6)
        assert np.mean(got == want) > 0.99


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bernoulli_equals_the_cpu_ep(ep_devices, dtype):
    """Bernoulli-15, which ORT expands into RandomUniformLike (the seed kept; float64 probabilities draw doubles),
    Greater and Cast."""
    shape = [40, 25]
    probabilities = np.random.default_rng(0).uniform(0, 1, shape).astype(dtype)
    model = _model("Bernoulli", shape, dtype, opset=15, seed=2.0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert "RandomUniformLike" in {op for _, op, ep in runner.placement(session) if ep == "VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for _ in range(3):
        np.testing.assert_array_equal(session.run(None, {"x": probabilities})[0],
                                      cpu.run(None, {"x": probabilities})[0])


def test_unseeded_values_have_the_distribution(ep_devices):
    """Without a seed (torch's exports) the CPU EP's values cannot be followed: vkep's are uniform in [low, high)
    and normal with the mean and scale, and differ from run to run."""
    uniform = runner.vkep_session(_model("RandomUniform", [200000], low=-1.0, high=3.0), disable_cpu_fallback=True)
    first, second = uniform.run(None, {})[0], uniform.run(None, {})[0]
    assert first.min() >= -1.0 and first.max() < 3.0 and not np.array_equal(first, second)
    assert abs(first.mean() - 1.0) < 0.02 and abs(first.var() - 16 / 12) < 0.02
    normal = runner.vkep_session(_model("RandomNormal", [200001], mean=2.0, scale=0.5), disable_cpu_fallback=True)
    values = normal.run(None, {})[0]
    assert abs(values.mean() - 2.0) < 0.01 and abs(values.std() - 0.5) < 0.01
    assert np.isfinite(values).all() and not np.array_equal(values, normal.run(None, {})[0])


def test_later_runs_replay_natively(ep_devices):
    """The engine's position lives on the device: the second and later runs of a seeded node replay its plan without
    Python, and still follow the CPU EP."""
    model = _model("RandomNormal", [1000], seed=5.0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    session.run(None, {})
    cpu.run(None, {})
    before = vkep.stats()["process"]["nodes_replayed_natively"]
    for _ in range(3):
        np.testing.assert_allclose(session.run(None, {})[0], cpu.run(None, {})[0], rtol=2.5e-7, atol=1e-6)
    assert vkep.stats()["process"]["nodes_replayed_natively"] - before == 3


@pytest.mark.parametrize("op,shape,input_type,attrs", [
    ("RandomUniform", [10], "float32", {"seed": 3.0, "dtype": TensorProto.DOUBLE}),
    ("RandomUniform", [3, 200, 167], "float32", {"seed": 7.0, "low": -2.1, "high": 5.3, "dtype": TensorProto.DOUBLE}),
    ("RandomUniformLike", [64, 31], "float64", {"seed": 1e10}),
    ("RandomUniformLike", [7], "int64", {"seed": 2147483647.0, "high": 0.5, "dtype": TensorProto.DOUBLE}),
    ("RandomNormal", [11], "float32", {"seed": 3.0, "dtype": TensorProto.DOUBLE}),
    ("RandomNormal", [2, 50001], "float32", {"seed": 1.0, "mean": 0.5, "scale": 2.1, "dtype": TensorProto.DOUBLE}),
    ("RandomNormalLike", [5000], "float64", {"seed": 4.0}),
])
def test_seeded_float64_equals_the_cpu_ep(ep_devices, op, shape, input_type, attrs):
    """float64 draws (random.comp's y64 in its FLOAT64 variant) as the CPU EP's uniform_real_distribution<double> and
    normal_distribution<double>: each value a generate_canonical<double, 53> of two engine draws (a normal pair four),
    high - low and the polar method in double, glibc's log (float64.glsl's log_double), run after run; the low, high,
    mean and scale attributes floats widened. Uniform values bit for bit; normal ones where log_double and glibc's log
    agree (glibc's is not correctly rounded: 27 of 100,002 values here came out apart, within 4 ulps of the larger of
    the value and the scale), all in place."""
    model = _model(op, shape, input_type, **attrs)
    feeds = _feeds(shape, input_type) if op.endswith("Like") else {}
    for got, want in _runs(model, feeds):
        assert got.dtype == want.dtype == np.float64
        if op.startswith("RandomUniform"):
            np.testing.assert_array_equal(got, want)
            continue
        ulps = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), attrs.get("scale", 1.0)))
        assert ulps.max() <= 4 and np.mean(got == want) > 0.999, (ulps.max(), np.mean(got == want))


@pytest.mark.parametrize("op,attrs", [("RandomUniformLike", {"seed": 5.0, "low": -1.0, "high": 2.0}),
                                      ("RandomNormalLike", {"seed": 6.0, "mean": 0.5, "scale": 2.0})])
def test_float16_like_is_float32_drawn_and_rounded(ep_devices, op, attrs):
    """A float16 input's Like without dtype (the CPU EP has no float16 dtype otherwise): the CPU EP draws float32
    values and rounds them to float16, and so does vkep (drawn into float32 scratch, then Cast). Run after run; the
    normal values' rare float32 ulp (glibc's logf) rarely survives the rounding: none here."""
    shape = [40, 501]
    for got, want in _runs(_model(op, shape, "float16", **attrs), _feeds(shape, "float16")):
        assert got.dtype == want.dtype == np.float16
        np.testing.assert_array_equal(got, want)


def test_unseeded_nodes_draw_apart(ep_devices):
    """Two unseeded nodes of one model draw different values (the CPU EP seeds its unseeded nodes with its process
    seed plus the node's index; vkep with one of its own plus a count): dropout masks of one shape must differ."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 40])
    nodes = [helper.make_node(op, ["x"], [f"y{i}"]) for i, op in enumerate(["RandomUniformLike", "RandomUniformLike",
                                                                               "RandomNormalLike", "RandomNormalLike"])]
    graph = helper.make_graph(nodes, "unseeded", [x], [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None)
                                                       for i in range(4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    u0, u1, n0, n1 = session.run(None, {"x": np.zeros((3, 40), np.float32)})
    assert not np.array_equal(u0, u1) and not np.array_equal(n0, n1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_normal_tensors_in_several_dispatches(ep_devices, dtype):
    """A normal tensor past one workgroup's loop budget (a dynamic shape: not declined at GetCapability) is drawn
    in several dispatches of whole pairs, each going on from the engine's state: the CPU EP's values, run after
    run (float64: 0.04% of them 1-2 ulps of max(1, |y|) apart, glibc's log against log_double)."""
    x = helper.make_tensor_value_info("x", PROTO[dtype], ["n"])
    graph = helper.make_graph([helper.make_node("RandomNormalLike", ["x"], ["y"], seed=3.0)], "large", [x],
                              [helper.make_tensor_value_info("y", PROTO[dtype], None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    feeds = {"x": np.zeros(2_200_001, dtype)}
    for got, want in _runs(model, feeds, runs=2):
        if dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=2.5e-7, atol=1e-6)
        else:
            assert (np.abs(got - want) / np.spacing(np.maximum(np.abs(want), 1.0))).max() <= 4


def test_graph_capture_continues_the_cpu_eps_sequence(ep_devices):
    """With enable_graph_capture ORT runs the graph twice in the application's first Run (a warm-up, then the one
    captured) and returns the last: the engine's draws go back before the second (capture._rewind_states), so that
    the first Run and every replay after it give the CPU EP's values, run for run."""
    from test_graph_capture import CAPTURE, _bound

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5])
    nodes = [helper.make_node("RandomUniformLike", ["x"], ["u"], seed=3.0),
             helper.make_node("RandomNormalLike", ["x"], ["r"], seed=4.0), helper.make_node("Add", ["u", "r"], ["y"])]
    graph = helper.make_graph(nodes, "captured", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    session, cpu = runner.vkep_session(model, ep_options=CAPTURE), runner.cpu_session(model)
    binding, values = _bound(session, ep_devices, {"x": (6, 5)}, {"y": (6, 5)})
    for _ in range(4):
        session.run_with_iobinding(binding)
        want = cpu.run(None, {"x": np.zeros((6, 5), np.float32)})[0]
        np.testing.assert_allclose(values["y"].numpy(), want, rtol=2.5e-7, atol=1e-6)


@pytest.mark.parametrize("shape,samples,dtype", [((2, 5), 7, TensorProto.INT32), ((3, 10), 50, TensorProto.INT64),
                                                 ((1, 1000), 300, TensorProto.INT64), ((4, 7), 3, TensorProto.INT32)])
def test_multinomial_equals_the_cpu_ep(ep_devices, shape, samples, dtype):
    """Multinomial as the CPU EP draws it, run after run: the cdf in double over the finite logits (Eigen's exp in
    packets of two, C's for an odd last class), two draws a sample, upper_bound; a row of -inf and NaN logits
    among them, and a row every logit of which is -inf (its total 0: every sample is the class count)."""
    logits = np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32) * 3
    if shape[0] > 1:
        logits[0, 3] = -np.inf
        logits[-1, 1] = np.nan
        logits[1] = -np.inf
    node = helper.make_node("Multinomial", ["x"], ["y"], sample_size=samples, seed=5.0, dtype=dtype)
    graph = helper.make_graph([node], "multinomial", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", dtype, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    for got, want in _runs(model, {"x": logits}):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _dropout(x_type: str, ratio, training, mask: bool = True, shape=(30, 7), **attrs):
    """A Dropout of -x_negated: ratio and training_mode constants (a value) or graph inputs (None), the mask an output
    where `mask`."""
    from onnx import numpy_helper

    inputs = [helper.make_tensor_value_info("x_negated", PROTO[x_type], list(shape))]
    inits = []
    for name, value, proto in (("ratio", ratio, TensorProto.FLOAT), ("training", training, TensorProto.BOOL)):
        if value is None:
            inputs.append(helper.make_tensor_value_info(name, proto, []))
        else:
            inits.append(numpy_helper.from_array(np.array(value, np.float32 if name == "ratio" else bool), name))
    outs = ["y", "mask"] if mask else ["y"]
    # (Dropout reads a device tensor, Neg's: its plan replays, where a host input is staged anew each run)
    nodes = [helper.make_node("Neg", ["x_negated"], ["x"]), helper.make_node("Dropout", ["x", "ratio", "training"],
                                                                            outs, **attrs)]
    graph = helper.make_graph(nodes, "dropout", inputs, [helper.make_tensor_value_info(n, PROTO[x_type]
                              if n == "y" else TensorProto.BOOL, None) for n in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _assert_same_values(got: np.ndarray, want: np.ndarray) -> None:
    """Equal to the bit but for NaN's sign and payload (NaN where the CPU EP has one), -0 included."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8))


def _special(shape, x_type):
    x = np.random.default_rng(4).standard_normal(shape).astype(x_type)
    x.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 1e-40 if x_type == "float32" else 0.0]
    return {"x_negated": x}


@pytest.mark.parametrize("x_type", ["float32", "float16"])
@pytest.mark.parametrize("seed", [7, -3, 0, 2**40 + 5])
@pytest.mark.parametrize("ratio", [0.3, 0.999])
def test_dropout_training_equals_the_cpu_ep(ep_devices, x_type, seed, ratio):
    """Dropout in training mode draws as the CPU EP: a new engine each run seeded with seed + the runs before
    (negative seeds as uint64), element i kept where draw i + 1 >= ratio, y = kept * x / (1 - ratio) in float
    (NaN and -0 as that product gives them; float16 rounded once): mask and y to the bit (NaN's sign aside) over 4
    runs, the last two replayed natively."""
    model = _dropout(x_type, ratio, True, seed=seed)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    feeds = _special((30, 7), x_type)
    before = vkep.stats()["process"]["nodes_replayed_natively"]
    for _ in range(4):
        (y, mask), (want_y, want_mask) = session.run(None, feeds), cpu.run(None, feeds)
        np.testing.assert_array_equal(mask, want_mask)
        _assert_same_values(y, want_y)
    assert vkep.stats()["process"]["nodes_replayed_natively"] - before == 2  # (runs 3 and 4: 2 records the plan)


def test_dropout_training_mode_from_the_application(ep_devices):
    """ratio and training_mode as graph inputs, read on the host each run: training runs draw (and count towards the
    next seed, as the CPU EP's NextSeed), inference runs copy X with an all-true mask, and a ratio of 0 drops
    nothing; each run equal to the CPU EP's. A ratio outside [0, 1) fails the run on both."""
    model = _dropout("float32", None, None, seed=11, shape=(50,))
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    x = _special((50,), "float32")["x_negated"]
    for ratio, training in ((0.5, True), (0.5, False), (0.25, True), (0.0, True), (0.5, True), (0.5, False)):
        feeds = {"x_negated": x, "ratio": np.array(ratio, np.float32), "training": np.array(training)}
        (y, mask), (want_y, want_mask) = session.run(None, feeds), cpu.run(None, feeds)
        np.testing.assert_array_equal(mask, want_mask)
        _assert_same_values(y, want_y)
    feeds = {"x_negated": x, "ratio": np.array(1.5, np.float32), "training": np.array(True)}
    for s in (session, cpu):
        with pytest.raises(Exception, match="ratio"):
            s.run(None, feeds)


def test_dropout_training_without_a_mask_and_unseeded(ep_devices):
    """A training Dropout whose mask is not an output (ORT's optimizer removes such a node: kept here with the
    optimizations off) draws into scratch; unseeded nodes draw apart and keep about 1 - ratio of the values."""
    import onnxruntime as ort

    model = _dropout("float32", 0.5, True, mask=False, seed=9, shape=(4000,))
    so = runner.session_options(True, 0, None, None, None)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), sess_options=so, enable_fallback=0)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu_so = ort.SessionOptions()
    cpu_so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    cpu = ort.InferenceSession(model.SerializeToString(), sess_options=cpu_so, providers=["CPUExecutionProvider"])
    x = {"x_negated": np.ones(4000, np.float32)}
    for _ in range(2):
        np.testing.assert_array_equal(session.run(None, x)[0], cpu.run(None, x)[0])
    kept = [(runner.vkep_session(_dropout("float32", 0.5, True, shape=(4000,))).run(None, x)[1]) for _ in range(2)]
    assert not np.array_equal(*kept) and all(0.45 < k.mean() < 0.55 for k in kept)


def test_dropout_training_under_graph_capture(ep_devices):
    """Under enable_graph_capture the first Run's warm-up draw is taken back (capture._rewind_states): every Run
    gives the CPU EP's run."""
    import onnxruntime as ort
    from test_graph_capture import CAPTURE, _bound, _memory_info

    model = _dropout("float32", 0.4, True, shape=(6, 5), seed=21)
    session, cpu = runner.vkep_session(model, ep_options=CAPTURE), runner.cpu_session(model)
    binding, values = _bound(session, ep_devices, {"x_negated": (6, 5)}, {"y": (6, 5)})
    mask = ort.OrtValue.ortvalue_from_shape_and_type([6, 5], np.bool_, memory_info=_memory_info(ep_devices))
    binding.bind_ortvalue_output("mask", mask)
    x = np.zeros((6, 5), np.float32)
    values["x_negated"].update_inplace(x)
    for _ in range(3):
        session.run_with_iobinding(binding)
        want_y, want_mask = cpu.run(None, {"x_negated": x})
        np.testing.assert_array_equal(mask.numpy(), want_mask)
        _assert_same_values(values["y"].numpy(), want_y)


@pytest.mark.parametrize("classes,samples,on_vkep", [(2, 14_000, True), (2, 25_000, False), (3, 19_000, False),
                                                     (1000, 4_700, True)])
def test_multinomial_within_lavapipes_loop_count(ep_devices, classes, samples, on_vkep):
    """Multinomial's samples a row run in one invocation: within lavapipe's 65,535 loop steps (a sample costs its
    loop's step, its binary search and the search's leaving pass: 2 classes ran right up to 16,382 samples and were
    cut short past them, a wrong answer before) vkep runs it, past them it leaves the node to the CPU EP; equal to
    the CPU EP either way."""
    graph = helper.make_graph(
        [helper.make_node("Multinomial", ["x"], ["y"], sample_size=samples, seed=3.0, dtype=TensorProto.INT64)],
        "multinomial", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, classes])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    session, cpu = runner.vkep_session(model), runner.cpu_session(model)
    placed = {ep for _, _, ep in runner.placement(session)}
    assert placed == {"VulkanExecutionProvider" if on_vkep else "CPUExecutionProvider"}
    feeds = {"x": np.zeros((1, classes), np.float32)}
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu.run(None, feeds)[0])
