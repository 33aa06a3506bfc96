"""Spectral ops of audio front ends (opset 17+): DFT and STFT (shaders/fft.comp), HannWindow / HammingWindow /
BlackmanWindow and MelWeightMatrix.

DFT and STFT follow ORT's CPU EP operation for operation so that the results agree bit for bit: its radix-2 FFT
(bit-reversed load, its butterfly order, twiddles cos/sin of float angle i * (+-2 pi / N)) where the length is a
power of two, else its Bluestein chirp-z transform over the next power of two >= 2N - 1, whose chirp angles
(+-pi n^2 / N in float) and b-sequence FFT are tables computed here as the CPU EP computes them.

The windows and the mel matrix depend only on CPU inputs: their values are computed here in double with the C
library's cos / log10 / pow, as the CPU EP computes them (a shader's cos is not that precise), and copied into the
output from a table the kernel keeps.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

from vkep.kernels.base import Kernel, UnsupportedError, axis_in, grid_1d
from vkep.kernels.movement import host_values, optional_input

WG = 64  # (fft.comp)
# fft.comp's shared buffer (its CAPACITY) holds 2048 points (16 KiB, every Vulkan device's minimum) or, where the
# device has 32 KiB, 4096: power-of-two lengths up to it, Bluestein's (>= 2N - 1 points) up to half of it
CAPACITIES = (2048, 4096)
PI32 = np.float32(math.pi)  # (the CPU EP: static_cast<float>(M_PI))


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _f32(values) -> np.ndarray:
    return np.asarray(values, np.float32)


@functools.cache
def _libm():
    """The C library's float cosf / sinf, which the CPU EP's tables call (glibc's are not always correctly
    rounded: cos in double rounded to float differed from them in ~1 of 4 bins of a 512-point FFT), or None."""
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    for f in (lib.cosf, lib.sinf):
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
    return lib


def cos_sin(angles: np.ndarray) -> np.ndarray:
    """complex64 (cosf(a), sinf(a)) of float32 angles, as C's float functions give them."""
    lib = _libm()
    if lib is None:  # (no C library to ask: cos in double, rounded)
        return _complex(np.cos(angles.astype(np.float64)).astype(np.float32),
                        np.sin(angles.astype(np.float64)).astype(np.float32))
    return _complex(np.array([lib.cosf(a) for a in angles.tolist()], np.float32),
                    np.array([lib.sinf(a) for a in angles.tolist()], np.float32))


@functools.lru_cache(maxsize=32)
def twiddles(points: int, inverse: bool) -> np.ndarray:
    """(cos, sin) of float(i) * (+-2 pi / points) in float, i < points: the CPU EP's table (complex64)."""
    velocity = np.float32(np.float32(1.0 if inverse else -1.0) * (PI32 * np.float32(2))) / np.float32(points)
    return cos_sin(np.arange(points, dtype=np.float32) * velocity)


def _complex(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    out = np.empty(re.shape, np.complex64)
    out.real, out.imag = re, im
    return out


def _cmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b as C computes a complex<float> product (each float operation rounded, no fma)."""
    return _complex(_f32(a.real * b.real) - _f32(a.imag * b.imag), _f32(a.real * b.imag) + _f32(a.imag * b.real))


def _reversed(points: int) -> np.ndarray:
    bits = points.bit_length() - 1
    return np.array([int(f"{i:0{bits}b}"[::-1], 2) if bits else 0 for i in range(points)])


def radix2(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The CPU EP's radix-2 FFT of complex64 `values` (a power-of-two length) with twiddle `table` (fft.comp's
    radix2, on the host: Bluestein's b-sequence)."""
    points = len(values)
    bits = points.bit_length() - 1
    buf = values[_reversed(points)].copy()
    for s in range(1, bits + 1):
        half, shift = 1 << (s - 1), bits - s
        b = np.arange(points // 2)
        k = b & (half - 1)
        even = ((b >> (s - 1)) << s) + k
        odd = even + half
        e, o = buf[even], buf[odd]
        first, second = _cmul(table[k << shift], o), _cmul(table[(half + k) << shift], o)
        buf[even] = _complex(e.real + first.real, e.imag + first.imag)
        buf[odd] = _complex(e.real + second.real, e.imag + second.imag)
    return buf


@functools.lru_cache(maxsize=32)
def bluestein_tables(length: int, inverse: bool) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(points, forward twiddles, chirp, FFT of b) of the CPU EP's Bluestein transform of `length` samples (cached:
    ~8K libm calls at 2048 samples; never written to)."""
    points = 1 << (2 * length - 2).bit_length()  # (the next power of two >= 2 length - 1)
    n = np.arange(length, dtype=np.float32)
    angle = _f32(_f32(_f32(np.float32(1.0 if inverse else -1.0) * PI32) * n) * n) / np.float32(length)
    chirp = np.zeros(points, np.complex64)
    chirp[:length] = cos_sin(angle)
    b = np.zeros(points, np.complex64)
    b[:length] = np.conj(chirp[:length])
    mirrored = np.arange(points - length + 1, points)
    b[mirrored] = b[points - mirrored]
    table = twiddles(points, False)
    return points, table, chirp, radix2(b, table)


class FFT(Kernel):
    """DFT (17, 20) and STFT (17): transforms of one workgroup each, described by strides over x and y."""

    def transform(self, call, x, window, transforms: int, inner: int, x_strides: tuple[int, int, int],
                  samples: int, length: int, bins: int, inverse: bool, y, y_strides: tuple[int, int, int],
                  c2r: bool = False) -> None:
        """`c2r`: x holds the `samples` bins of a one-sided spectrum, y the real parts (fft.comp's C2R)."""
        components = x.shape[-1] if len(x.shape) > 2 else 1
        if length <= 0:  # (an empty axis without dft_length: the CPU EP's Bluestein sizes its buffer from 2N - 1)
            raise UnsupportedError(f"{self.spec.op}: a transform of length {length}")
        bluestein = not _is_power_of_two(length)
        if bluestein:
            points, table, chirp, b_fft = bluestein_tables(length, inverse)
            if samples > points:  # (the CPU EP writes past its buffer there)
                raise UnsupportedError(f"{self.spec.op}: {samples} samples for a length-{length} transform")
        else:
            points, table, chirp, b_fft = length, twiddles(length, inverse), None, None
        shared = self.device_info.max_shared_memory if self.device_info is not None else 16384
        capacity = next((c for c in CAPACITIES if c >= points and c * 8 <= shared), None)
        if capacity is None:
            raise UnsupportedError(f"{self.spec.op}: a length-{length} transform takes a {points}-point FFT (fft.comp "
                                   f"holds {max(c for c in CAPACITIES if c * 8 <= shared)} on this device)")
        if not transforms or not bins:
            return
        # as many transforms a workgroup as its buffer holds (an STFT of 20-sample frames: 32 a workgroup, 7,921
        # frames 325 -> 144 ms on lavapipe, which pays per workgroup)
        per_group = min(capacity // points, transforms)
        tables = [call.persistent(t.tobytes()) if t is not None else None for t in (table, chirp, b_fft)]
        push = {"x": x, "window": window, "twiddles": tables[0], "chirp": tables[1], "b_fft": tables[2], "y": y,
                "transforms": transforms, "inner": inner, "x_outer": x_strides[0], "x_inner": x_strides[1],
                "x_step": x_strides[2], "y_outer": y_strides[0], "y_inner": y_strides[1], "y_step": y_strides[2],
                "samples": samples, "dft_length": length, "points": points, "bits": points.bit_length() - 1,
                "bins": bins, "components": components, "inverse": int(inverse), "per_group": per_group}
        reads = [x] + [t for t in [window, *tables] if t is not None]
        constants = {"bluestein": int(bluestein), "capacity": capacity, "c2r": int(c2r)}
        call.dispatch("fft.comp", "float32", constants, push,
                      grid_1d(-(-transforms // per_group) * WG, WG), reads, [y])


class DFT(FFT):
    """DFT; with `inverse` and `onesided` ORT 1.32's inverse real FFT: a one-sided spectrum [.., n / 2 + 1, 2] to the
    real signal [.., n, 1], its other half the first's mirror (n: dft_length, else 2 (bins - 1))."""

    def compute(self, call) -> None:
        x = call.inputs[0]
        length_input, axis_input = optional_input(call, 1), optional_input(call, 2)
        rank = len(x.shape)
        if self.since_version >= 20:
            axis = int(host_values(call, axis_input)[0]) if axis_input is not None else -2
        else:
            axis = self.attrs.get("axis", 1)
        axis = axis_in(axis, rank, "DFT")
        components = x.shape[-1] if rank > 2 else 1
        if rank < 2 or components not in (1, 2):
            raise UnsupportedError(f"DFT: input shape {x.shape} ends in neither 1 (real) nor 2 (complex)")
        if axis == rank - 1 and rank > 2 or rank == 2 and axis != 1:  # (the CPU EP's result there is no DFT)
            raise UnsupportedError(f"DFT: axis {axis} of a rank-{rank} input")
        samples = x.shape[axis]
        c2r = bool(self.attrs.get("inverse", 0) and self.attrs.get("onesided", 0))
        if c2r and components != 2:
            raise UnsupportedError("DFT: Inverse one-sided DFT (IRFFT) requires complex-valued input (last dimension "
                                   "must be 2)")
        length = 2 * (samples - 1) if c2r else samples
        if length_input is not None:
            if length_input.size != 1 or len(length_input.shape) != 0:
                raise UnsupportedError("DFT: dft_length must be a scalar value.")
            length = int(host_values(call, length_input)[0])
            if length <= 0:
                raise UnsupportedError("DFT: dft_length must be greater than zero.")
        if c2r and samples != length // 2 + 1:
            # (the CPU EP's result for other bin counts is neither numpy's irfft of them nor of the spectrum cut or
            # padded to n / 2 + 1 bins: not followed)
            raise UnsupportedError(f"DFT: an inverse real FFT of {samples} bins to {length} points (takes "
                                   f"{length // 2 + 1})")
        bins = length // 2 + 1 if self.attrs.get("onesided", 0) and not c2r else length
        out_components = 1 if c2r else 2
        shape = list(x.shape) if rank > 2 else [*x.shape, 1]
        shape[axis], shape[-1] = bins, out_components
        y = call.output(0, tuple(shape), "float32")
        outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:-1])
        self.transform(call, x, None, outer * inner, inner, (samples * inner * components, components,
                                                             inner * components),
                       samples, length, bins, bool(self.attrs.get("inverse", 0)), y,
                       (bins * inner * out_components, out_components, inner * out_components), c2r)


class STFT(FFT):
    def compute(self, call) -> None:
        signal, step_input = call.inputs[:2]
        window, length_input = optional_input(call, 2), optional_input(call, 3)
        if len(signal.shape) not in (2, 3) or len(signal.shape) == 3 and signal.shape[2] not in (1, 2):
            raise UnsupportedError("STFT: signal shape must end in 1 (real) or 2 (real, imaginary).")
        batch, size = signal.shape[:2]
        components = signal.shape[2] if len(signal.shape) == 3 else 1
        step = int(host_values(call, step_input)[0])
        frame_length = int(host_values(call, length_input)[0]) if length_input is not None else None
        if window is not None and (len(window.shape) != 1 or components == 2):
            # (the CPU EP reads a complex signal's window as complex values: past its end)
            raise UnsupportedError(f"STFT: a window of shape {window.shape} for a {components}-component signal")
        if window is not None and frame_length is not None and frame_length != window.shape[0]:
            raise UnsupportedError("STFT: If both frame_length and window are set, then the size of the window "
                                   "must be equal to the frame_length.")
        length = window.shape[0] if window is not None else frame_length
        if length is None or length <= 0 or step <= 0:
            raise UnsupportedError(f"STFT: frame length {length}, frame step {step}")
        if length > size:
            raise UnsupportedError("STFT: Ensure that the dft size is smaller than the signal.")
        frames = int(np.floor(np.float32(size - length) / np.float32(step))) + 1  # (the CPU EP's float division)
        bins = length // 2 + 1 if self.attrs.get("onesided", 1) else length
        y = call.output(0, (batch, frames, bins, 2), "float32")
        self.transform(call, signal, window, batch * frames, frames, (size * components, step * components,
                                                                      components),
                       length, length, bins, False, y, (frames * bins * 2, bins * 2, 2))


# ---- windows and the mel matrix: tables computed on the host ------------------------------------------------

# ONNX element types of output_datatype that vkep has: their numpy types
OUTPUT_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64}
# a0, a1, a2 of w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), as the CPU EP's float constants
COSINE_SUMS = {"HannWindow": (0.5, 0.5, 0.0),
               "HammingWindow": (float(np.float32(25) / np.float32(46)), float(np.float32(1) - np.float32(25) / np.float32(46)),
                                 0.0),
               "BlackmanWindow": (float(np.float32(0.5) - np.float32(0.08)), 0.5, float(np.float32(0.08)))}


class HostTable(Kernel):
    """An op whose output is a function of its CPU inputs and attributes: the table made once per plan, copied."""

    @classmethod
    def declines(cls, spec, attrs, since_version, input_ranks, input_types) -> str | None:
        if attrs.get("output_datatype", 1) not in OUTPUT_TYPES:
            return f"{spec.op}: output_datatype {attrs.get('output_datatype')} (vkep has {sorted(OUTPUT_TYPES)})"
        return None

    def table(self, values: list) -> np.ndarray:
        raise NotImplementedError

    def compute(self, call) -> None:
        values = [host_values(call, t)[0] for t in call.inputs]
        dtype = OUTPUT_TYPES[self.attrs.get("output_datatype", 1)]
        table = self.planned(tuple(values), lambda: self.table(values).astype(dtype))
        y = call.output(0, table.shape, np.dtype(dtype).name)
        if table.size:
            call.copy(call.persistent(table.tobytes()), y)


class CosineWindow(HostTable):
    def table(self, values: list) -> np.ndarray:
        size = int(values[0])
        if size < 0:
            raise UnsupportedError(f"{self.spec.op}: size {size}")
        a0, a1, a2 = COSINE_SUMS[self.spec.op]
        denominator = size if self.attrs.get("periodic", 1) else size - 1
        step = 2 * math.pi / denominator if denominator else math.inf  # (in double, as the CPU EP)
        out = []
        for i in range(size):
            angle = step * i if i or denominator else math.nan  # (inf * 0)
            extra = 0.0 if a2 == 0 else a2 * math.cos(2 * step * i if i or denominator else math.nan)
            out.append(a0 - a1 * math.cos(angle) + extra)
        return _cast(np.array(out, np.float64), OUTPUT_TYPES[self.attrs.get("output_datatype", 1)])


def _cast(values: np.ndarray, dtype) -> np.ndarray:
    """static_cast<T>(double) as the CPU EP's x86-64 build does it: rounded to float; truncated toward zero to an
    integer, NaN giving cvttsd2si's 'integer indefinite' (the type's minimum, of 32 bits for the narrow types, whose
    low bits remain)."""
    if dtype is np.float32:
        return values.astype(np.float32)
    bad = ~np.isfinite(values)
    wide = np.int64 if dtype is np.int64 else np.int32
    whole = np.where(bad, np.iinfo(wide).min, np.trunc(np.where(bad, 0, values))).astype(wide)
    return whole.astype(dtype)


class MelWeightMatrix(HostTable):
    def table(self, values: list) -> np.ndarray:
        mel_bins, dft_length, rate = (int(v) for v in values[:3])
        low_hz, high_hz = (float(np.float32(v)) for v in values[3:5])
        spectrogram_bins = dft_length // 2 + 1
        for edge, hz in (("lower", low_hz), ("upper", high_hz)):  # (float arithmetic, as the CPU EP's check)
            index = np.floor(np.float32(np.float32(dft_length + 1) * np.float32(hz)) / np.float32(rate))
            if not 0 <= index < spectrogram_bins:
                raise UnsupportedError(f"MelWeightMatrix: {edge}_edge_hertz produces a mel triangle filter bank "
                                       "that is out of range given the dft_length and the sample_rate.")
        if mel_bins < 0:
            raise UnsupportedError(f"MelWeightMatrix: num_mel_bins {mel_bins}")
        low_mel, high_mel = (2595 * math.log10(1 + hz / 700) for hz in (low_hz, high_hz))
        mel_step = (high_mel - low_mel) / (mel_bins + 2)  # (the CPU EP's N + 2 points a step of 1 / (N + 2))
        points = [math.floor((dft_length + 1) * (700 * (math.pow(10, (low_mel + mel_step * i) / 2595) - 1)) / rate)
                  for i in range(mel_bins + 2)]
        dtype = OUTPUT_TYPES[self.attrs.get("output_datatype", 1)]
        out = np.zeros((spectrogram_bins, mel_bins), dtype)
        if any(p < 0 or p >= spectrogram_bins for p in points):
            raise UnsupportedError("MelWeightMatrix: a triangle outside the spectrogram")

        def ratio(a: int, b: int):  # (size_t / T: float division for float, integer division otherwise)
            return np.float32(a) / np.float32(b) if dtype is np.float32 else a // b

        for i in range(mel_bins):
            left, center, right = points[i:i + 3]
            if center == left:
                out[center, i] = 1
            else:
                for j in range(left, center + 1):
                    out[j, i] = ratio(j - left, center - left)
            for j in range(center, right):
                out[j, i] = ratio(right - j, right - center)
        return out
