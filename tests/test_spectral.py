"""DFT, STFT, the window functions and MelWeightMatrix on vkep against ORT's CPU EP, over the shapes audio front ends
use (n_fft 400 / 512 / 1024, hop 160 / 256, 1-3 s of 16 kHz audio), and a spectrogram as torch.stft exports it.

vkep follows the CPU EP's algorithms operation for operation (vkep/kernels/spectral.py): the outputs must agree
bit for bit (exact comparison), which the tests ask for."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

RATE = 16000


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _same(model, feeds, exact: bool = True) -> np.ndarray:
    """Run on vkep (every node placed there, twice: the second may replay) and on the CPU EP; compare."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        got = session.run(None, feeds)[0]
        assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return got


def _audio(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(shape[1]) / RATE
    tone = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.25 * np.sin(2 * np.pi * 3100 * t)
    return (tone[None, :, None] + 0.1 * rng.standard_normal(shape)).astype(np.float32)


def _dft_model(shape, opset=17, length=None, axis=None, fed_length=False, **attrs):
    names = ["x", "n" if length is not None or fed_length else ""]
    inits = [("n", np.array(length, np.int64))] if length is not None and not fed_length else []
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    if fed_length:
        inputs.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    if opset >= 20 and axis is not None:
        names.append("axis")
        inits.append(("axis", np.array(axis, np.int64)))
    elif axis is not None:
        attrs["axis"] = axis
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("DFT", names, ["y"], **attrs)
    return _model([node], inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, opset)


@pytest.mark.parametrize("length", [400, 512, 1024, 6, 1, 2, 4096, 1500])
@pytest.mark.parametrize("onesided", [0, 1])
def test_dft_real_frames(ep_devices, length, onesided):
    """Batched real frames: power-of-two lengths (radix-2) and others (Bluestein) as the CPU EP runs them; 4096 and
    1500 (Bluestein's 4096 points) take fft.comp's 32 KiB buffer (lavapipe has 32 KiB)."""
    x = _audio((3, length, 1), seed=length)
    _same(_dft_model(x.shape, onesided=onesided), {"x": x})


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_complex_and_inverse(ep_devices, opset, inverse):
    x = np.random.default_rng(1).standard_normal((2, 400, 2)).astype(np.float32)
    _same(_dft_model(x.shape, opset=opset, inverse=inverse), {"x": x})
    y = np.random.default_rng(2).standard_normal((2, 256, 2)).astype(np.float32)
    _same(_dft_model(y.shape, opset=opset, inverse=inverse), {"x": y})


@pytest.mark.parametrize("opset,axis", [(17, 1), (17, 2), (17, -3), (20, 1), (20, -2), (20, 0)])
def test_dft_other_axes(ep_devices, opset, axis):
    """An axis other than the last-but-one: the transforms' samples are strided."""
    x = np.random.default_rng(3).standard_normal((6, 10, 12, 2)).astype(np.float32)
    _same(_dft_model(x.shape, opset=opset, axis=axis), {"x": x})
    real = np.random.default_rng(5).standard_normal((6, 10, 12, 1)).astype(np.float32)
    _same(_dft_model(real.shape, opset=opset, axis=axis, onesided=1), {"x": real})


@pytest.mark.parametrize("length", [300, 512, 700, 1024])
def test_dft_length_pads_or_truncates(ep_devices, length):
    x = _audio((2, 512, 1))
    _same(_dft_model(x.shape, length=length, onesided=1), {"x": x})


def test_dft_length_fed_at_run_time_and_refused(ep_devices):
    x = _audio((2, 256, 1))
    model = _dft_model(x.shape, fed_length=True)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    for n in (256, 200, 128, 300):
        feeds = {"x": x, "n": np.array(n, np.int64)}
        np.testing.assert_array_equal(session.run(None, feeds)[0], cpu.run(None, feeds)[0])
    # (a Bluestein length whose FFT is shorter than the signal: the CPU EP writes past its buffer; vkep refuses)
    with pytest.raises(Exception, match="256 samples for a length-3 transform"):
        session.run(None, {"x": x, "n": np.array(3, np.int64)})
    feeds = {"x": x, "n": np.array(0, np.int64)}
    for s in (cpu, session):
        with pytest.raises(Exception, match="dft_length must be greater than zero"):
            s.run(None, feeds)


def test_dft_declines_what_it_cannot_hold(ep_devices):
    """An 8192-point FFT (and Bluestein's 8192 points for 2100 samples) is past fft.comp's shared buffer, and an
    inverse real FFT of a bin count other than n / 2 + 1 is one whose CPU EP result vkep does not follow: declined at
    GetCapability (the node stays on the CPU EP)."""
    for model in (_dft_model((1, 8192, 1)), _dft_model((1, 2100, 1)),
                  _dft_model((2, 5, 2), length=16, inverse=1, onesided=1),
                  _dft_model((2, 12, 2), length=16, inverse=1, onesided=1)):
        session = runner.vkep_session(model)
        assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


def _spectrum(shape, length: int, axis: int, seed: int) -> np.ndarray:
    """The one-sided spectrum of a real signal (bins along `axis`), with imaginary parts at bin 0 and n / 2 that a
    real signal's spectrum has not (the CPU EP keeps them, and they round its sums: so must vkep)."""
    rng = np.random.default_rng(seed)
    signal = rng.standard_normal([*shape[:axis], length, *shape[axis + 1:]])
    spectrum = np.fft.rfft(signal, axis=axis)
    bins = np.arange(spectrum.shape[axis])
    spectrum += 0.25j * ((bins == 0) | (2 * bins == length)).reshape([-1 if a == axis else 1 for a in range(len(shape))])
    return np.stack([spectrum.real, spectrum.imag], -1).astype(np.float32)


@pytest.mark.parametrize("length", [2, 8, 32, 400, 512, 9, 1000, 2048])
@pytest.mark.parametrize("given", [True, False])
def test_inverse_real_fft(ep_devices, length, given):
    """DFT with inverse and onesided (torch.fft.irfft's export): bins 0 .. n / 2 and their mirror through the CPU
    EP's radix-2 or Bluestein inverse, the real part written; n from dft_length or 2 (bins - 1)."""
    if not given and length % 2:
        length += 1  # (without dft_length n is even)
    x = _spectrum((3, 0), length, 1, seed=length)
    got = _same(_dft_model(x.shape, length=length if given else None, inverse=1, onesided=1), {"x": x})
    assert got.shape == (3, length, 1)
    reference = np.fft.irfft(x[1, :, 0] + 1j * x[1, :, 1], length)  # (numpy drops those imaginary parts: no term)
    np.testing.assert_allclose(got[1, :, 0], reference, atol=1e-4 * max(1, length / 64))


@pytest.mark.parametrize("opset,axis", [(17, 2), (17, -3), (20, 1), (20, 0)])
def test_inverse_real_fft_other_axes(ep_devices, opset, axis):
    rank_axis = axis % 4  # (of the rank-4 input: signal dims and the components)
    x = _spectrum((6, 10, 7), 12, rank_axis, seed=7)
    got = _same(_dft_model(x.shape, opset=opset, length=12, axis=axis, inverse=1, onesided=1), {"x": x})
    assert got.shape[rank_axis] == 12 and got.shape[-1] == 1


def _stft_model(signal_shape, step, frame_length=None, window=None, onesided=1, window_input=False):
    names = ["x", "step", "w" if window is not None or window_input else "", "len" if frame_length else ""]
    inits = [("step", np.array(step, np.int64))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, signal_shape)]
    if window is not None:
        inits.append(("w", window))
    elif window_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [None]))
    if frame_length:
        inits.append(("len", np.array(frame_length, np.int64)))
    while not names[-1]:
        names.pop()
    node = helper.make_node("STFT", names, ["y"], onesided=onesided)
    return _model([node], inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


def _hann(n: int) -> np.ndarray:
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)


@pytest.mark.parametrize("n_fft,hop,seconds,batch", [(400, 160, 1, 2), (512, 160, 3, 1), (1024, 256, 2, 1),
                                                     (400, 160, 3, 1)])
def test_stft_audio_front_ends(ep_devices, n_fft, hop, seconds, batch):
    x = _audio((batch, seconds * RATE, 1), seed=n_fft)
    _same(_stft_model(x.shape, hop, window=_hann(n_fft)), {"x": x})


def test_stft_short_frames_many_a_workgroup(ep_devices):
    """Kokoro-82M's iSTFT front end: 20-sample Hann frames every 5 samples of 39,620 (7,921 frames, Bluestein over
    64 points): 32 transforms share a workgroup, the last one partly filled; equal to the CPU EP bit for bit."""
    x = _audio((1, 39620, 1), seed=20)
    _same(_stft_model(x.shape, 5, window=_hann(20)), {"x": x})


@pytest.mark.parametrize("onesided", [0, 1])
def test_stft_frame_length_without_window_and_complex_signals(ep_devices, onesided):
    x = _audio((2, 4000, 1))
    _same(_stft_model(x.shape, 256, frame_length=512, onesided=onesided), {"x": x})
    z = np.random.default_rng(4).standard_normal((1, 3000, 2)).astype(np.float32)
    _same(_stft_model(z.shape, 160, frame_length=400, onesided=onesided), {"x": z})


def test_stft_window_fed_at_run_time(ep_devices):
    x = _audio((1, 8000, 1))
    model = _stft_model(x.shape, 128, window_input=True)
    for n in (400, 256):
        _same(model, {"x": x, "w": _hann(n)})


def _window_model(op, size, periodic, output_datatype):
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic, output_datatype=output_datatype)
    return _model([node], [helper.make_tensor_value_info("size", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("y", output_datatype, None)])


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(ep_devices, op, periodic):
    """Sizes fed at run time (as Shape arithmetic gives them), float and integer outputs, bit for bit."""
    for output_datatype in (TensorProto.FLOAT, TensorProto.INT32):
        model = _window_model(op, None, periodic, output_datatype)
        for size in (400, 512, 1, 0, 7):
            _same(model, {"size": np.array(size, np.int64)})


@pytest.mark.parametrize("bins,n_fft,rate,low,high", [(80, 400, 16000, 0.0, 8000.0), (128, 1024, 22050, 30.0, 11000.0),
                                                      (40, 512, 16000, 20.0, 7600.0)])
def test_mel_weight_matrix(ep_devices, bins, n_fft, rate, low, high):
    node = helper.make_node("MelWeightMatrix", ["bins", "n", "rate", "low", "high"], ["y"])
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, []) for n in ("bins", "n", "rate")]
    floats = [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in ("low", "high")]
    model = _model([node], ints + floats, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    feeds = {"bins": np.array(bins, np.int64), "n": np.array(n_fft, np.int64), "rate": np.array(rate, np.int64),
             "low": np.array(low, np.float32), "high": np.array(high, np.float32)}
    _same(model, feeds)
    feeds["high"] = np.array(rate, np.float32)  # (past the spectrogram: both EPs fail the run)
    for session in (runner.cpu_session(model), runner.vkep_session(model, disable_cpu_fallback=True)):
        with pytest.raises(Exception, match="upper_edge_hertz"):
            session.run(None, feeds)


def test_log_mel_spectrogram_as_torch_exports_it(ep_devices):
    """signal -> STFT with a Hann window (HannWindow of a size from Shape arithmetic) -> |.|^2 (Pow, ReduceSum)
    -> Sqrt -> MatMul by a MelWeightMatrix -> Log, every node on vkep."""
    n_fft, hop, bins = 400, 160, 80
    i64 = lambda n, v: (n, np.array(v, np.int64))  # noqa: E731
    inits = [i64("step", hop), i64("bins", bins), i64("rate", RATE), ("low", np.array(0.0, np.float32)),
             ("high", np.array(8000.0, np.float32)), ("two", np.array(2.0, np.float32)), i64("axes", [-1]),
             ("eps", np.array(1e-6, np.float32)), i64("half", 2), i64("start", [1]), i64("end", [2]),
             i64("n", n_fft)]
    nodes = [
        helper.make_node("HannWindow", ["n"], ["window"]),
        helper.make_node("STFT", ["x", "step", "window"], ["spec"]),
        helper.make_node("Pow", ["spec", "two"], ["sq"]),
        helper.make_node("ReduceSum", ["sq", "axes"], ["power"], keepdims=0),
        helper.make_node("Sqrt", ["power"], ["magnitude"]),
        helper.make_node("MelWeightMatrix", ["bins", "n", "rate", "low", "high"], ["mel"]),
        helper.make_node("MatMul", ["magnitude", "mel"], ["mels"]),
        helper.make_node("Add", ["mels", "eps"], ["floored"]),
        helper.make_node("Log", ["floored"], ["y"]),
    ]
    x = _audio((1, 2 * RATE, 1))
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None, 1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    got = _same(model, {"x": x}, exact=False)
    assert got.shape == (1, (2 * RATE - n_fft) // hop + 1, bins)
