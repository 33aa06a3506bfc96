"""The integer quantization ops: QuantizeLinear and DequantizeLinear (quantize.comp), per tensor or per axis,
4-, 8- and 16-bit integers; DynamicQuantizeLinear; MatMulInteger and QLinearMatMul (matmul_integer.comp); ConvInteger and
QLinearConv (conv_integer.comp); com.microsoft QLinearAdd and QLinearMul (qlinear_binary.comp), QLinearWhere.

The QLinear ops requantize as ORT's CPU EP does on x86-64 (shaders/requantize.glsl), bit for bit. Where its
integer products saturate (uint8 x int8 pairs in MLAS's AVX2 kernels without VNNI: cpu_ep_saturates), the integer
GEMMs (matmul_integer.comp: MatMulInteger, QLinearMatMul, QGemm and the dynamically quantized transformers' ops)
and QLinearConv (conv_integer.comp, but for depthwise convolutions) saturate as it does; elsewhere vkep keeps
the exact sum that ONNX defines (and that the CPU EP gives on VNNI machines)."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from vkep.kernels import conv, host, integer_float
from vkep.kernels.base import (
    LOOP_BUDGET,
    MAX_ELEMENTS,
    NIBBLE_TYPES,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    grid_1d,
    padded,
    shader_dtype,
)
from vkep.kernels.conv import ConvBase, window_geometry
from vkep.kernels.elementwise import (
    MAX_RANK,
    ONNX_TYPES,
    broadcast_plan,
    broadcast_shape,
    broadcast_strides,
    collapse,
    declines_rank,
    wide_grid,
)
from vkep.kernels.pool import window_loops

MODE_QUANTIZE, MODE_DEQUANTIZE = 0, 1
ONNX_QUANTIZED = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 21: "uint4", 22: "int4"}  # TensorProto codes of output_dtype
BINARY_RANK = 4  # qlinear_binary.comp's broadcast rank (past it, a dispatch per index of the outer dims)
WG = 64  # the workgroup of quantize.comp and the qlinear_*.comp shaders (their WG)
DQ_CHUNK = 256 * 1024  # elements a workgroup of dynamic_quantize.comp's first stage (1024 loop iterations)
# conv_integer.comp's register block: output channels (a specialization constant) by output pixels of a row.
# A 64-channel 3x3 conv over 56x56 on lavapipe: one output an invocation 4.2 s, 4 x 4 1.0 s, 16 x 8 0.17 s.
CONV_TN = 8
# matmul_integer.comp's register block, rows by columns (128x768 by 768x768 on lavapipe: one output an invocation
# 0.61 s, 4 x 8 0.40 s, 8 x 8 0.23 s, 8 x 16 0.12 s, 16 x 16 0.12 s)
MATMUL_TM, MATMUL_TN = 8, 16


class QuantizeLinear(Kernel):
    """x's type is the scale's on the float side; the zero point's (or output_dtype, or uint8) on the
    integer side. Per tensor, per axis, or blocked (block_size: the scale is x's shape with the axis
    divided into blocks)."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("block_size", 0) < 0:
            return f"block_size={attrs['block_size']}"
        if attrs.get("output_dtype", 0) not in (0, *ONNX_QUANTIZED):
            return f"output_dtype={attrs['output_dtype']}"
        return None

    def compute(self, call) -> None:
        x, scale = call.inputs[:2]
        zp = call.inputs[2] if len(call.inputs) > 2 else None
        if self.constants["mode"] == MODE_QUANTIZE:
            out = zp.dtype if zp is not None else ONNX_QUANTIZED.get(self.attrs.get("output_dtype", 0), "uint8")
            if scale.dtype != x.dtype:
                raise UnsupportedError(f"QuantizeLinear: x of {x.dtype} with scales of {scale.dtype}")
        else:
            out = scale.dtype
            wanted = self.attrs.get("output_dtype", 0)
            if wanted and ONNX_TYPES.get(wanted) != out:
                raise UnsupportedError(f"DequantizeLinear: output_dtype {wanted} with {out} scales")
        block = self.attrs.get("block_size", 0)
        blocks = 0
        if block:
            axis = axis_in(self.attrs.get("axis", 1), len(x.shape), self.spec.op)
            blocks = -(-x.shape[axis] // block)
            want = x.shape[:axis] + (blocks,) + x.shape[axis + 1:]
            if scale.shape != want or (zp is not None and zp.shape != scale.shape):
                raise UnsupportedError(f"{self.spec.op}: scale {scale.shape} for blocks of {block} along axis "
                                       f"{axis} of {x.shape}")
            div, mod = math.prod(x.shape[axis + 1:]), x.shape[axis]
        elif scale.size == 1:
            div = mod = 1
        else:
            axis = axis_in(self.attrs.get("axis", 1), len(x.shape), self.spec.op)
            if scale.shape != (x.shape[axis],) or (zp is not None and zp.shape != scale.shape):
                raise UnsupportedError(f"{self.spec.op}: scale {scale.shape} along axis {axis} of {x.shape}")
            div, mod = math.prod(x.shape[axis + 1:]), x.shape[axis]
        y = call.output(0, x.shape, out)
        if x.size:
            dispatch_quantize(call, self.constants["mode"], x, scale, zp, y, div, mod, block, blocks)


def dispatch_quantize(call, mode: int, x: Tensor, scale: Tensor, zp: Tensor | None, y: Tensor, div: int,
                      mod: int, block: int = 0, blocks: int = 0) -> None:
    """quantize.comp over x: scale and zero point of element g at (g / div) % mod, or of its block (block > 0).
    A 4-bit integer side (NIBBLES) holds two elements a byte; quantizing, an invocation writes one byte."""
    nibbles = NIBBLE_TYPES.get(y.dtype if mode == MODE_QUANTIZE else x.dtype, 0)
    work = -(-x.size // 2) if nibbles and mode == MODE_QUANTIZE else x.size
    wide, grid = wide_grid(work)
    call.dispatch("quantize.comp", (shader_dtype(x), shader_dtype(y)), {"mode": mode, "nibbles": nibbles,
                                                                        "wide": wide},
                  {"x": x, "scale": scale, "zp": zp, "y": y, "n": x.size, "div": div, "mod": mod, "block": block,
                   "blocks": blocks}, grid, [t for t in (x, scale, zp) if t is not None], [y])


class DynamicQuantizeLinear(Kernel):
    """y, y_scale, y_zero_point of x (float32 to uint8): the parameters in one workgroup of
    dynamic_quantize.comp (a larger x: each workgroup's min and max of DQ_CHUNK elements, then one workgroup
    over those), then quantize.comp with them."""

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape, "uint8")
        scale, zp = call.output(1, (), "float32"), call.output(2, (), "uint8")
        dispatch_dynamic_quantize(call, x, y, scale, zp)


# The most elements whose min and max ORT's CPU EP finds in one MlasFindMinMaxElement call (GetQuantizationParameter:
# more are split among its threads, the parts' NaNs then meeting by std::min / max; measured with 2 to 8 threads,
# one thread never splits): where x holds a NaN, dynamic_quantize.comp follows that call past it
MINMAX_ONE_CALL = 123_008


def dispatch_dynamic_quantize(call, x: Tensor, y: Tensor, scale: Tensor, zp: Tensor) -> None:
    """x (float32) quantized to uint8 y with the scale and zero point DynamicQuantizeLinear computes (as ORT's
    CPU EP, which DynamicQuantizeMatMul shares)."""
    if x.size <= 256 * LOOP_BUDGET:
        # MLAS's NaN order (32 invocations over all of x) where the CPU EP finds min and max in one MLAS call
        one_call = x.size <= MINMAX_ONE_CALL or host.cpu_ep_threads() == 1
        streams = int(one_call and x.size // 32 + x.size // 256 + 64 <= LOOP_BUDGET)  # (both passes: one budget)
        call.dispatch("dynamic_quantize.comp", "float32", {"stage": 0},
                      {"x": x, "scale": scale, "zp": zp, "partial": None, "n": x.size, "chunk": 0,
                       "streams": streams}, (1, 1, 1), [x], [scale, zp])
    else:  # (64 x 512 x 512 activations in imgly's quantized background-removal model)
        parts = -(-x.size // DQ_CHUNK)
        partial = call.scratch((2 * parts,), "float32")
        call.dispatch("dynamic_quantize.comp", "float32", {"stage": 1},
                      {"x": x, "scale": None, "zp": None, "partial": partial, "n": x.size, "chunk": DQ_CHUNK,
                       "streams": 0},
                      (parts, 1, 1), [x], [partial])
        call.dispatch("dynamic_quantize.comp", "float32", {"stage": 2},
                      {"x": None, "scale": scale, "zp": zp, "partial": partial, "n": parts, "chunk": 0, "streams": 0},
                      (1, 1, 1), [partial], [scale, zp])
    if x.size:
        dispatch_quantize(call, MODE_QUANTIZE, x, scale, zp, y, 1, 1)


@functools.cache
def cpu_ep_saturates() -> bool:
    """Whether ORT's CPU EP on this host multiplies uint8 by int8 with int16 pair sums that saturate: MLAS's AVX2
    and AVX-512BW kernels (vpmaddubsw) on x86-64 without VNNI or AMX. Its answers then differ from the exact sums
    where large products meet (docs/design.md, "QDQ groups": reduce_range 0), and vkep's integer kernels compute
    the same (the SATURATE of matmul_integer.comp, conv_integer.comp and recurrent.comp) so that a model gives the
    CPU EP's answer."""
    flags = host.cpu_flags()
    return "avx2" in flags and not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}


def cpu_ep_lstm_rows(batch: int, hidden: int) -> int:
    """The batch rows each of ORT's CPU EP LSTM GEMMs over h takes (uni_directional_lstm.cc, SetNumThreads and
    ComputeImpl): more than 4 rows, or 2 to 4 of at most 256 units, are split in ceil(batch / threads) rows a
    thread, else all rows are one GEMM. DynamicQuantizeLSTM quantizes h per GEMM, so its answer depends on it."""
    if batch > 4 or (batch >= 2 and hidden <= 256):
        return -(-batch // host.cpu_ep_threads())
    return max(batch, 1)


def saturating(a_dtype: str, b_dtype: str, as_uint8: bool = False) -> int:
    """matmul_integer.comp's and conv_integer.comp's SATURATE for operands of these types where the CPU EP
    saturates: 1 for uint8 A and int8 B; 2 for an int8 A that it computes as the uint8 A + 128 (as_uint8: a QDQ
    group whose int8 activations its QDQS8ToU8Transformer made uint8, vkep/ort/qdq.py); else 0 (uint8 x uint8 and
    int8 x int8 products are exact there)."""
    if b_dtype != "int8" or not cpu_ep_saturates():
        return 0
    return 1 if a_dtype == "uint8" else 2 if a_dtype == "int8" and as_uint8 else 0


def _scalar(t: Tensor | None, what: str, op: str) -> None:
    """ORT's CPU EP takes this quantization parameter per tensor only."""
    if t is not None and t.size != 1:
        raise UnsupportedError(f"{op}: {what} of shape {t.shape} (per tensor only)")


def _per_column(t: Tensor | None, b_shape: tuple[int, ...], what: str, op: str) -> tuple[int, int]:
    """(step per column, step per batch) of B's zero point or scale: per tensor, (N,) for a 2-D B, or B's
    shape with 1 for its rows (what ORT's CPU EP takes)."""
    if t is None or t.size == 1:
        return 0, 0
    n = b_shape[-1]
    if len(b_shape) == 2 and t.shape in ((n,), (1, n)):
        return 1, 0
    if len(t.shape) == len(b_shape) and t.shape[-2] == 1 and t.shape[:-2] + t.shape[-1:] == b_shape[:-2] + (n,):
        return 1, n
    raise UnsupportedError(f"{op}: {what} of shape {t.shape} with B of {b_shape}")


class MatMulInteger(Kernel):
    """MatMulInteger (int32 Y), com.microsoft MatMulInteger16 (int16 operands, int32 Y) and QLinearMatMul
    (requantized 8-bit Y, manifest constant `requant`):
    A [..., M, K] times B [K, N], or A [M, K] times B [..., K, N], or the same batches; 8-bit operands (MatMulInteger16:
    int16).
    MatMulInteger's zero points are scalar, per row of a 2-D A or per column of B; QLinearMatMul's A and
    Y parameters per tensor, B's per tensor or per column (per batch too), as ORT's CPU EP takes them."""

    as_uint8 = False  # int8 A computed as the uint8 ORT's CPU EP makes of it (QLinearBinary's): where it saturates
    b_largest: int | None = None  # the largest |B| of a constant 8-bit B (pack): whether the CPU EP's pairs saturate

    def pack(self, index: int, weight: np.ndarray) -> tuple[np.ndarray, str]:
        """A constant B stays as it is; its largest |value| tells whether the float path applies (integer_float)."""
        if index == 1 and weight.dtype in (np.int8, np.uint8) and weight.size:
            self.b_largest = int(np.abs(weight.astype(np.int32)).max())
        return weight, "raw"

    def compute(self, call) -> None:
        requant = self.spec.constants["requant"]  # (REQUANT, constant_id 2)
        if requant:
            a, a_scale, azp, b, b_scale, bzp, y_scale, yzp = padded(call.inputs, 8)
            for t, what in ((a_scale, "a_scale"), (azp, "a_zero_point"), (y_scale, "y_scale"),
                            (yzp, "y_zero_point")):
                _scalar(t, what, self.spec.op)
        else:
            a, b, azp, bzp = padded(call.inputs, 4)
            a_scale = b_scale = y_scale = yzp = None
        if len(a.shape) < 2 or len(b.shape) < 2 or a.shape[-1] != b.shape[-2]:
            raise UnsupportedError(f"{self.spec.op} of {a.shape} and {b.shape}")
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        if len(b.shape) == 2:
            batch_shape, a_stride, b_stride = a.shape[:-2], m * k, 0
        elif len(a.shape) == 2:
            batch_shape, a_stride, b_stride = b.shape[:-2], 0, k * n
        elif b.shape[:-2] == a.shape[:-2]:
            batch_shape, a_stride, b_stride = a.shape[:-2], m * k, k * n
        else:
            raise UnsupportedError(f"{self.spec.op}: batch dimensions of {a.shape} and {b.shape}")
        batches = math.prod(batch_shape)
        if azp is None or azp.size == 1:
            a_zp_step = 0
        elif azp.shape in ((m,), (m, 1)) and len(a.shape) == 2:
            a_zp_step = 1
        else:
            raise UnsupportedError(f"{self.spec.op}: a_zero_point of shape {azp.shape}")
        bzp_steps = _per_column(bzp, b.shape, "b_zero_point", self.spec.op)
        bs_steps = _per_column(b_scale, b.shape, "b_scale", self.spec.op)
        if k > LOOP_BUDGET:
            raise UnsupportedError(f"{self.spec.op}: K={k} past one invocation's loop budget")
        out_type = (yzp.dtype if yzp is not None else a.dtype) if requant else "int32"
        y = call.output(0, batch_shape + (m, n), out_type)
        saturate = saturating(a.dtype, b.dtype, self.as_uint8)
        # (QLinearMatMul too, its requantization a pass of its own: 256 x 768 by 768 x 768 37 -> 24 ms, 128 x 768 by
        # 768 x 3072 73 -> 67; requantize.glsl reads float32 scales)
        floats = not requant or all(t.dtype == "float32" for t in (a_scale, b_scale, y_scale))
        if y.size and floats and len(b.shape) == 2 and {a.dtype, b.dtype} <= {"uint8", "int8"} \
                and integer_float.applies(batches * m, n, k, bool(saturate), self.b_largest):
            if not requant:
                return integer_float.matmul_integer(self, call, a, b, azp, bzp, y, bool(a_zp_step),
                                                    bool(bzp_steps[0]))
            acc = call.scratch(y.shape, "int32")
            integer_float.matmul_integer(self, call, a, b, azp, bzp, acc, bool(a_zp_step), bool(bzp_steps[0]))
            return integer_float.requantize(call, acc, None, a_scale, b_scale, y_scale, yzp, y, 1, n)
        if y.size:
            constants = {"a_signed": int(a.dtype == "int8"), "b_signed": int(b.dtype == "int8"), "requant": requant,
                         "saturate": saturate,
                         "y_signed": int(out_type == "int8"), "wide16": int(a.dtype == "int16")}
            ins = {"a": a, "b": b, "azp": azp, "bzp": bzp, "a_scale": a_scale, "b_scale": b_scale,
                   "y_scale": y_scale, "yzp": yzp}
            push = {**ins, "y": y, "c": None, "m": m, "n": n, "k": k, "batches": batches, "a_batch_stride": a_stride,
                    "b_batch_stride": b_stride, "a_zp_step": a_zp_step, "bzp_step": bzp_steps[0],
                    "bzp_batch_step": bzp_steps[1], "bs_step": bs_steps[0], "bs_batch_step": bs_steps[1],
                    "alpha": 1.0}
            variant = shader_dtype(a_scale) if requant else "uint8"  # (the scales' type: float32 or float16)
            tiles = batches * -(-m // MATMUL_TM) * -(-n // MATMUL_TN)
            call.dispatch(self.spec.shader, variant, constants, push, grid_1d(tiles, 64),
                          [t for t in ins.values() if t is not None], [y])


def conv_integer_loops(cg: int, kh: int, kw: int) -> int:
    """Loop steps conv_integer.comp's invocation spends (its exact products: channels, kernel rows, taps), as lavapipe
    counts them: measured 3 + kh (2 + kw) a channel (1x1: 6, 3x3: 18, 5x5: 38; each loop's leaving pass and more),
    where 1 + kh (1 + kw) let a 1x1 QLinearConv of 19,999 channels through that lost its last 9,000 (a wrong
    answer); the saturating products' loop spends less (one step per two of cg x kh x kw)."""
    return cg * (3 + kh * (2 + kw)) + 2


def _fits_16_bits(op: str, **values: int) -> None:
    for name, v in values.items():
        if not 0 <= v < 65536:
            raise UnsupportedError(f"{op}: {name} {v} does not fit conv_integer.comp's 16-bit parameters")


class ConvInteger(ConvBase):
    """ConvInteger (int32 Y) and QLinearConv (requantized 8-bit Y, manifest constant `requant`) over NCHW
    with 1 or 2 spatial dims: groups, strides, dilations, pads, auto_pad. Zero points and scales per tensor;
    W's (and QLinearConv's w_scale) per output channel too. One invocation per block of output channels by
    CONV_TN output pixels (conv_integer.comp). QLinearConv's products saturate where the CPU EP's do
    (`saturating`), but for depthwise convolutions (one input and one output channel a group), which MLAS
    computes exactly."""

    as_uint8 = False  # int8 X computed as the uint8 ORT's CPU EP makes of it (QLinearBinary's): where it saturates

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        rank = input_ranks[0]
        if rank is not None and rank not in (-1, 3, 4):
            return f"{spec.op} with X of rank {rank}: 1 or 2 spatial dims only"
        for name in ("kernel_shape", "strides", "dilations", "pads"):  # (conv_integer.comp packs them in 16 bits)
            if any(not 0 <= v < 65536 for v in attrs.get(name) or ()):
                return f"{spec.op}: {name} {attrs[name]} past conv_integer.comp's 16-bit parameters"
        return None

    def compute(self, call) -> None:
        requant = self.constants["requant"]
        if requant:
            x, x_scale, xzp, w, w_scale, wzp, y_scale, yzp, bias = padded(call.inputs, 9)
        else:
            x, w, xzp, wzp = padded(call.inputs, 4)
            x_scale = w_scale = y_scale = yzp = bias = None
        key = (x.shape, w.shape, *(t.shape if t is not None else None for t in (xzp, wzp, x_scale, w_scale,
                                                                                  y_scale, yzp, bias)))
        out_shape, members, groups, tm, patches = self.planned(key, lambda: self._plan(x, w, xzp, wzp, x_scale, w_scale,
                                                                                     y_scale, yzp, bias))
        out_type = (yzp.dtype if yzp is not None else x.dtype) if requant else "int32"
        y = call.output(0, out_shape, out_type)
        if y.size == 0:
            return
        if patches is not None:  # (one group, large enough, no product the CPU EP saturates: through float32 GEMMs)
            if not requant:
                return integer_float.conv_integer(self, call, x, w, xzp, wzp, y, patches)
            acc = call.scratch(out_shape, "int32")
            integer_float.conv_integer(self, call, x, w, xzp, wzp, acc, patches)
            return integer_float.requantize(call, acc, bias, x_scale, w_scale, y_scale, yzp, y,
                                            math.prod(out_shape[2:]), out_shape[1])
        depthwise = members["cg"] == 1 and members["mg"] == 1
        saturate = saturating(x.dtype, w.dtype, self.as_uint8) if requant and not depthwise else 0
        constants = {"requant": requant, "x_signed": int(x.dtype == "int8"), "w_signed": int(w.dtype == "int8"),
                     "y_signed": int(out_type == "int8"), "tm": tm, "saturate": saturate}
        ins = {"x": x, "w": w, "xzp": xzp, "wzp": wzp, "bias": bias, "xs": x_scale, "ws": w_scale, "ys": y_scale,
               "yzp": yzp}
        call.dispatch(self.spec.shader, "uint8", constants, {**members, **ins, "y": y}, groups,
                      [t for t in ins.values() if t is not None], [y])

    def _plan(self, x, w, xzp, wzp, x_scale, w_scale, y_scale, yzp, bias) -> tuple:
        op = self.spec.op
        xs, ws = x.shape, w.shape
        if len(xs) not in (3, 4):
            raise UnsupportedError(f"{op}: X {xs} must be 3-D or 4-D")
        nd, kernel, strides, dilations = self._spatial(xs, ws)
        group = self.attrs["group"]
        batch, c = xs[:2]
        m = ws[0]
        if group <= 0 or c % group or m % group or ws[1] != c // group:
            raise UnsupportedError(f"{op}: X {xs}, W {ws} and group {group} do not agree")
        for t, what in ((xzp, "x_zero_point"), (x_scale, "x_scale"), (y_scale, "y_scale"), (yzp, "y_zero_point")):
            _scalar(t, what, op)
        steps = 0
        for bit, (t, what) in enumerate(((wzp, "w_zero_point"), (w_scale, "w_scale"))):
            if t is not None and t.size != 1:
                if t.shape != (m,):
                    raise UnsupportedError(f"{op}: {what} of shape {t.shape} for {m} output channels")
                steps |= 1 << bit
        if bias is not None and bias.shape != (m,):
            raise UnsupportedError(f"{op}: bias of shape {bias.shape} for {m} output channels")
        if self.attrs["auto_pad"] in ("SAME_UPPER", "SAME_LOWER") and any(d != 1 for d in dilations):
            raise UnsupportedError(f"{op}: dilations with auto_pad {self.attrs['auto_pad']} (the CPU EP refuses them)")
        out, begin, _ = window_geometry(xs[2:], kernel, strides, dilations, self.attrs.get("pads"),
                                        self.attrs["auto_pad"])
        out_shape = (batch, m, *out)
        if math.prod(out_shape) > MAX_ELEMENTS:
            raise UnsupportedError(f"{op}: output {out_shape} has more than {MAX_ELEMENTS} elements")
        # a 1-D conv is a 2-D one of height 1 (no padding along it)
        two = [(fill, *v) if nd == 1 else tuple(v) for v, fill in ((xs[2:], 1), (out, 1), (kernel, 1), (strides, 1),
                                                                   (dilations, 1), (begin, 0))]
        (ih, iw), (oh, ow), (kh, kw), (sh, sw), (dh, dw), (ph, pw) = two
        _fits_16_bits(op, kernel_height=kh, kernel_width=kw, stride_h=sh, stride_w=sw, dilation_h=dh, dilation_w=dw,
                      pad_h=ph, pad_w=pw)  # (the attributes': ConvInteger.declines checks them at GetCapability)
        cg = c // group
        if conv_integer_loops(cg, kh, kw) > LOOP_BUDGET:
            raise UnsupportedError(f"{op}: {cg} input channels x {kernel} taps exceed one invocation's loop budget")
        mg = m // group
        tm = 1 if mg == 1 else 4 if mg < 16 else 16  # (few channels a group: less work computed and dropped)
        grid = grid_1d(group * -(-mg // tm) * oh * -(-ow // CONV_TN), 64)
        if grid[1] > 65535 or batch > 65535:
            raise UnsupportedError(f"{op}: output {out_shape} is too large for one dispatch")
        members = {"cg": cg, "m": m, "mg": m // group, "ih": ih, "iw": iw, "oh": oh, "ow": ow,
                   "stride": sh << 16 | sw, "dilation": dh << 16 | dw, "pad": ph << 16 | pw, "kernel": kh << 16 | kw,
                   "steps": steps}
        rows, pitch = c * kh * kw, oh * ow + (oh * ow) % 2  # (the float path's patches: K rows, pairs along pixels)
        patches = None
        requant = self.constants["requant"]
        paid = not requant or (not saturating(x.dtype, w.dtype, self.as_uint8)
                               and rows >= integer_float.QLINEAR_FLOAT_MIN_K)
        if paid and group == 1 and integer_float.conv_applies(m, oh * ow, rows, batch * rows * pitch * 4):
            patches = conv.im2col_plan((batch, c, ih, iw), [oh, ow], [1, kh, kw], [sh, sw], [dh, dw], [ph, pw], rows,
                                       pitch)
        return out_shape, members, (grid[0], grid[1], batch), tm, patches


class QLinearBinary(Kernel):
    """com.microsoft QLinearAdd and QLinearMul (manifest constant `op`), broadcast, every parameter per tensor.
    QLinearAdd's float operations follow ORT's spans (qlinear_binary.comp): which input MLAS reads as the
    first operand, and whether it takes it as a scalar, decide the order of its fused multiply-adds."""

    # int8 tensors computed as the uint8 ones ORT's CPU EP makes of them in a QDQ group (vkep/ort/qdq.py sets it:
    # the shader's SIGNED 2)
    as_uint8 = False
    # With every scale and zero point a constant (pack saw them), each result depends on the two bytes alone: the
    # shader builds the 65,536 of them once (MODE 1, a table a span order in the kernel's state) and later runs look
    # them up (MODE 2). A QLinearAdd of 200,704 bytes took 8.7 ms computed (two exact multiply-adds an element, in
    # int64), CPU EP 0.02 ms.
    TABLE_FROM = 4096  # elements from which a node looks its results up (the first run builds the table)
    TABLE_BYTES = 1 << 16
    packed_inputs: frozenset[int] = frozenset()  # the inputs pack saw: constants
    tables_built: frozenset[int] = frozenset()  # the span orders whose tables a run has built

    def pack(self, index: int, weight: np.ndarray) -> tuple[np.ndarray, str]:
        self.packed_inputs = self.packed_inputs | {index}
        return super().pack(index, weight)

    def _tabled(self, call, n: int) -> bool:
        """Whether this node looks its results up: large enough, and its scales and zero points constants."""
        given = {i for i in (1, 2, 4, 5, 6, 7) if i < len(call.inputs) and call.inputs[i] is not None}
        return n >= self.TABLE_FROM and given <= self.packed_inputs

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 4)
        return declines_rank(spec, [ranks[0], ranks[3]], MAX_RANK)

    def compute(self, call) -> None:
        a, a_scale, azp, b, b_scale, bzp, c_scale, czp = padded(call.inputs, 8)
        for t, what in ((a_scale, "A_scale"), (azp, "A_zero_point"), (b_scale, "B_scale"), (bzp, "B_zero_point"),
                        (c_scale, "C_scale"), (czp, "C_zero_point")):
            _scalar(t, what, self.spec.op)
        out, members, outer = self.planned((a.shape, b.shape), lambda: self._plan(a.shape, b.shape))
        y = call.output(0, out, a.dtype)
        if not y.size:
            return
        signed = 2 if a.dtype == "int8" and self.as_uint8 else int(a.dtype == "int8")
        params = {"a_scale": a_scale, "a_zp": azp, "b_scale": b_scale, "b_zp": bzp, "c_scale": c_scale, "c_zp": czp}
        constants = {"op": self.constants["op"], "signed": signed}
        spans = outer["spans"]
        reads = [t for t in params.values() if t is not None]
        if self._tabled(call, y.size):
            flags = members["rank_flags"] >> 8  # (QLinearAdd's span order: a table each)
            table = call.state(4 * self.TABLE_BYTES).view(flags * self.TABLE_BYTES, (self.TABLE_BYTES,))
            if flags not in self.tables_built:
                call.dispatch(self.spec.shader, "uint8", {**constants, "mode": 1},
                              {**members, **params, "n": self.TABLE_BYTES, "a": table, "b": table, "y": table},
                              grid_1d(self.TABLE_BYTES, WG), reads, [table])
                if call.fills_state():
                    self.tables_built = self.tables_built | {flags}
            constants["mode"] = 2
            params = {**dict.fromkeys(params), "a_scale": table}  # (MODE 2 reads the table at a_scale)
            reads = [table]
        # (a broadcast that collapses past the shader's rank: a dispatch per index of its outer dims, at their offsets;
        # elements are bytes)
        for index in itertools.product(*(range(d) for d in outer["dims"])):
            at = [sum(i * s for i, s in zip(index, strides, strict=True))
                  for strides in (outer["a"], outer["b"], outer["y"])]
            views = {"a": a.view(at[0], (spans[0],)), "b": b.view(at[1], (spans[1],)),
                     "y": y.view(at[2], (members["n"],))}
            call.dispatch(self.spec.shader, "uint8", constants, {**members, **params, **views},
                          grid_1d(members["n"], WG), [views["a"], views["b"], *reads], [views["y"]])

    @staticmethod
    def _plan(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[tuple[int, ...], dict, dict]:
        out = broadcast_shape(sa, sb)
        dims, (stride_a, stride_b) = collapse(out, broadcast_strides(sa, out), broadcast_strides(sb, out))
        k = max(len(dims) - BINARY_RANK, 0)  # outer dims, a dispatch each
        stride_y = [math.prod(dims[j + 1:]) for j in range(len(dims))]
        inner = dims[k:]
        # (the elements of A and B one dispatch reads, from its offset)
        spans = [1 + sum((d - 1) * st for d, st in zip(inner, strides[k:], strict=True))
                 for strides in (stride_a, stride_b)]
        outer = {"dims": dims[:k], "a": stride_a[:k], "b": stride_b[:k], "y": stride_y[:k], "spans": spans}
        return out, {"n": math.prod(inner), "rank_flags": len(inner) | _span_order(sa, sb) << 8, "dims": inner,
                     "a_strides": stride_a[k:], "b_strides": stride_b[k:]}, outer


def _span_order(sa: tuple[int, ...], sb: tuple[int, ...]) -> int:
    """qlinear_binary.comp's flags for QLinearAdd, from ORT's Broadcaster: its innermost span is the last
    dimension pair not both 1 (or the first pair, when all are); an input of extent 1 there is a scalar of
    the span. ORT hands MLAS the vector first (B first when A is the scalar), and MLAS takes a first
    operand of one element (a span of 1) as its scalar: bit 0 = B's ratio is fused first in the fixed
    part, bit 1 = B is the outer operand."""
    if not sa or not sb:  # a scalar input: the other's last extent (1 when both are scalars)
        ea, eb = (sa[-1] if sa else 1), (sb[-1] if sb else 1)
    else:
        k = 1
        while k < min(len(sa), len(sb)) and max(sa[-k], sb[-k]) <= 1:
            k += 1
        ea, eb = sa[-k], sb[-k]
    if ea > 1:
        return 0
    span = max(ea, eb)
    return 1 if span <= 1 else 3


def _mixed_8bit(op: str, tensors: list[Tensor | None]) -> bool:
    """Whether the 8-bit tensors are int8 (all of them: ORT's CPU EP reads every one as the output's type)."""
    types = {t.dtype for t in tensors if t is not None}
    if not types <= {"uint8", "int8"} or len(types) > 1:
        raise UnsupportedError(f"{op}: 8-bit tensors of types {sorted(types)}")
    return types == {"int8"}


class QLinearLookup(Kernel):
    """com.microsoft QLinearLeakyRelu, QLinearSigmoid (inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point)
    and QLinearConcat (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per input): each element as ORT's
    CPU EP computes its lookup table (qlinear_lookup.comp, manifest constant `op`), one dispatch per input.
    Every parameter per tensor, as the CPU EP takes them."""

    variadic = True  # (QLinearConcat)
    CONCAT = 0

    def compute(self, call) -> None:
        op = self.constants["op"]
        if op == self.CONCAT:
            ins = padded(call.inputs, 2)
            y_scale, yzp = ins[:2]
            if len(ins) < 5 or (len(ins) - 2) % 3:
                raise UnsupportedError(f"QLinearConcat with {len(ins)} inputs (2 + 3 per tensor)")
            triples = [tuple(ins[j:j + 3]) for j in range(2, len(ins), 3)]
        else:
            x, x_scale, xzp, y_scale, yzp = padded(call.inputs, 5)
            triples = [(x, x_scale, xzp)]
        params = [y_scale, yzp] + [t for xs in triples for t in xs[1:]]
        for t in params:
            _scalar(t, "a scale or zero point", self.spec.op)
        signed = _mixed_8bit(self.spec.op, [yzp] + [t for xs, _, zp in triples for t in (xs, zp)])
        shapes = tuple(xs.shape for xs, _, _ in triples)
        out, plan = self.planned(shapes, lambda: self._plan(shapes))
        y = call.output(0, out, "int8" if signed else "uint8")
        alpha = self.attrs.get("alpha", 0.0)
        for (x, scale, zp), (n, inner, length, total, base) in zip(triples, plan, strict=True):
            if n:
                ins = {"x": x, "x_scale": scale, "x_zp": zp, "y_scale": y_scale, "y_zp": yzp}
                call.dispatch(self.spec.shader, "uint8", {"op": op, "signed": int(signed)},
                              {**ins, "y": y, "n": n, "inner": inner, "len": length, "total": total, "base": base,
                               "alpha": alpha}, grid_1d(n, WG), [t for t in ins.values() if t is not None], [y])

    def _plan(self, shapes: tuple) -> tuple:
        """(output shape, (elements, inner, axis length, axis total, axis start) per input)."""
        if self.constants["op"] != self.CONCAT:
            n = math.prod(shapes[0])
            return shapes[0], [(n, max(n, 1), 1, 1, 0)]
        ref = shapes[0]
        axis = axis_in(self.attrs["axis"], len(ref), self.spec.op)
        if any(len(s) != len(ref) or s[:axis] + s[axis + 1:] != ref[:axis] + ref[axis + 1:] for s in shapes):
            raise UnsupportedError(f"QLinearConcat: shapes {shapes} differ off axis {axis}")
        total = sum(s[axis] for s in shapes)
        out = ref[:axis] + (total,) + ref[axis + 1:]
        if math.prod(out) > MAX_ELEMENTS:
            raise UnsupportedError(f"QLinearConcat: output {out} has more than {MAX_ELEMENTS} elements")
        inner = math.prod(ref[axis + 1:])
        plan, base = [], 0
        for s in shapes:
            plan.append((math.prod(s), max(inner, 1), s[axis], total, base))
            base += s[axis]
        return out, plan


class QLinearWhere(Kernel):
    """com.microsoft QLinearWhere: Z = condition ? X : Y over three broadcast inputs, X and Y each requantized to
    Z's scale and zero point as ORT's CPU EP builds its lookup tables (qlinear_lookup.comp's identity, into
    scratch), then chosen by where.comp. Scales and zero points per tensor, as the CPU EP takes them."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        return declines_rank(spec, input_ranks, 5)

    def compute(self, call) -> None:
        c, x, x_scale, xzp, y, y_scale, yzp, z_scale, zzp = padded(call.inputs, 9)
        for t in (x_scale, xzp, y_scale, yzp, z_scale, zzp):
            _scalar(t, "a scale or zero point", self.spec.op)
        signed = _mixed_8bit(self.spec.op, [x, y, xzp, yzp, zzp])
        key = (c.shape, x.shape, y.shape)
        out, n, members = self.planned(key, lambda: broadcast_plan(list(key), max_rank=5, names=("c", "a", "b")))
        z = call.output(0, out, x.dtype)
        if not n:
            return
        chosen = []
        for v, scale, zp in ((x, x_scale, xzp), (y, y_scale, yzp)):
            r = call.scratch(v.shape, v.dtype)
            ins = {"x": v, "x_scale": scale, "x_zp": zp, "y_scale": z_scale, "y_zp": zzp}
            call.dispatch("qlinear_lookup.comp", "uint8", {"op": QLinearLookup.CONCAT, "signed": int(signed)},
                          {**ins, "y": r, "n": v.size, "inner": v.size, "len": 1, "total": 1, "base": 0, "alpha": 0.0},
                          grid_1d(v.size, WG), [t for t in ins.values() if t is not None], [r])
            chosen.append(r)
        call.dispatch("where.comp", (shader_dtype(c), shader_dtype(x)), {}, {**members, "c": c, "a": chosen[0],
                      "b": chosen[1], "y": z, "table": None}, grid_1d(n, WG), [c, *chosen], [z])


class QLinearPool(Kernel):
    """com.microsoft QLinearGlobalAveragePool and QLinearAveragePool (manifest constant `global`) over 8-bit
    tensors, NCHW or channels_last ([N, spatial..., C]), as ORT's CPU EP computes them (qlinear_pool.comp): the
    global form, and an average pool whose window is the whole unpadded image, requantize an int32 sum; other
    windows average in float32. Average pools with 1 or 2 spatial dims."""

    as_uint8 = False  # int8 tensors computed as the uint8 ones ORT's CPU EP makes of them (QLinearBinary's)

    @property
    def channels_last(self) -> bool:
        return bool(self.attrs.get("channels_last", 0))

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        rank = input_ranks[0]
        if not spec.constants.get("global") and rank is not None and rank not in (-1, 3, 4):
            return f"{spec.op} with X of rank {rank}: 1 or 2 spatial dims only"
        return None

    def compute(self, call) -> None:
        x, x_scale, xzp, y_scale, yzp = padded(call.inputs, 5)
        for t, what in ((x_scale, "x_scale"), (xzp, "x_zero_point"), (y_scale, "y_scale"), (yzp, "y_zero_point")):
            _scalar(t, what, self.spec.op)
        signed = _mixed_8bit(self.spec.op, [x, xzp, yzp])
        out_shape, is_global, count_pad, geometry = self.planned(x.shape, lambda: self._plan(x.shape))
        y = call.output(0, out_shape, x.dtype)
        if y.size:
            ins = {"x": x, "x_scale": x_scale, "x_zp": xzp, "y_scale": y_scale, "y_zp": yzp}
            mode = 2 if signed and self.as_uint8 else int(signed)
            last = self.channels_last
            call.dispatch(self.spec.shader, "uint8", {"global": is_global, "signed": mode, "count_pad": count_pad,
                                                      "channels_last": int(last)},
                          {**geometry, **ins, "y": y, "n": y.size, "channels": x.shape[-1] if last else 1},
                          grid_1d(y.size, WG),
                          [t for t in ins.values() if t is not None], [y])

    def _plan(self, xs: tuple[int, ...]) -> tuple:
        op = self.spec.op
        if len(xs) < 3:
            raise UnsupportedError(f"{op}: input {xs} has no spatial dims")
        n = len(xs) - 2
        last = self.channels_last
        spatial = list(xs[1:-1] if last else xs[2:])
        if self.spec.constants.get("global"):
            kernel, out, begin, end = spatial, [1] * n, [0] * n, [0] * n
        else:
            if n > 2:
                raise UnsupportedError(f"{op}: input {xs}: 1 or 2 spatial dims only")
            kernel = list(self.attrs["kernel_shape"])
            if len(kernel) != n:
                raise UnsupportedError(f"{op}: kernel_shape {kernel} does not fit input {xs}")
            strides = list(self.attrs.get("strides") or [1] * n)
            out, begin, end = window_geometry(spatial, kernel, strides, [1] * n, self.attrs.get("pads"),
                                              self.attrs["auto_pad"], self.attrs.get("ceil_mode", 0))
        out_shape = (xs[0], *out, xs[-1]) if last else (*xs[:2], *out)
        if math.prod(out_shape) > MAX_ELEMENTS:
            raise UnsupportedError(f"{op}: output {out_shape} has more than {MAX_ELEMENTS} elements")
        # the CPU EP takes the global path where the window is the whole image and nothing is padded
        if kernel == spatial and not any(begin) and not any(end):
            image = math.prod(spatial)
            if image >= 1 << 24:  # (MLAS refuses these)
                raise UnsupportedError(f"{op}: an image of {image} elements")
            if -(-image // 8) > LOOP_BUDGET:
                raise UnsupportedError(f"{op}: an image of {image} elements past one invocation's loop budget")
            return out_shape, 1, 0, _pool_geometry(image, 1, 1, 1, 1, 1, 1, 1, 0, 0)
        # a 1-D pool is a 2-D one of height 1 (no padding along it)
        (ih, iw), (oh, ow), (kh, kw), (sh, sw), (ph, pw) = (
            (fill, *v) if n == 1 else tuple(v) for v, fill in ((spatial, 1), (out, 1), (kernel, 1), (strides, 1),
                                                                (begin, 0)))
        if window_loops(1, kh, kw) > LOOP_BUDGET:  # (qlinear_pool.comp's rows and taps: pool.comp's loops)
            raise UnsupportedError(f"{op}: a window of {kernel} taps is too large for one invocation")
        return out_shape, 0, int(self.attrs.get("count_include_pad", 0) != 0), _pool_geometry(ih, iw, oh, ow, kh, kw,
                                                                                                sh, sw, ph, pw)


def _pool_geometry(ih: int, iw: int, oh: int, ow: int, kh: int, kw: int, sh: int, sw: int, ph: int,
                   pw: int) -> dict[str, int]:
    """qlinear_pool.comp's window members (the global form: ih the image size, every other extent 1)."""
    return {"ih": ih, "iw": iw, "oh": oh, "ow": ow, "kh": kh, "kw": kw, "sh": sh, "sw": sw, "ph": ph, "pw": pw}


class QGemm(Kernel):
    """com.microsoft QGemm: alpha * (A - a_zp)(B - b_zp) (+ int32 C) requantized to 8 bits, or float32 without
    y_scale, as ORT's CPU EP computes it (matmul_integer.comp's QGemm mode): A per tensor, B per tensor or per
    column, transA / transB, C scalar, per column, per row or [M, N]."""

    as_uint8 = False  # int8 A computed as the uint8 ORT's CPU EP makes of it (MatMulInteger's)

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 9)
        if (ranks[7] is None) != (ranks[8] is None):
            return "QGemm with only one of y_scale and y_zero_point"
        return None

    def compute(self, call) -> None:
        a, a_scale, azp, b, b_scale, bzp, c, y_scale, yzp = padded(call.inputs, 9)
        for t, what in ((a_scale, "a_scale"), (azp, "a_zero_point"), (y_scale, "y_scale"), (yzp, "y_zero_point")):
            _scalar(t, what, "QGemm")
        key = (a.shape, b.shape, c.shape if c is not None else None, b_scale.shape,
               bzp.shape if bzp is not None else None)
        m, n, bias, steps = self.planned(key, lambda: self._plan(a.shape, b.shape, c, b_scale, bzp))
        requant = 1 if y_scale is not None else 2
        y = call.output(0, (m, n), yzp.dtype if requant == 1 else "float32")
        if y.size:
            k = a.shape[0] if self.attrs["transA"] else a.shape[1]
            constants = {"a_signed": int(a.dtype == "int8"), "b_signed": int(b.dtype == "int8"), "requant": requant,
                         "saturate": saturating(a.dtype, b.dtype, self.as_uint8),
                         "y_signed": int(y.dtype == "int8"), "trans_a": int(self.attrs["transA"] != 0),
                         "trans_b": int(self.attrs["transB"] != 0), "bias": bias}
            ins = {"a": a, "b": b, "azp": azp, "bzp": bzp, "a_scale": a_scale, "b_scale": b_scale,
                   "y_scale": y_scale, "yzp": yzp, "c": c}
            push = {**ins, "y": y, "m": m, "n": n, "k": k, "batches": 1, "a_batch_stride": 0, "b_batch_stride": 0,
                    "a_zp_step": 0, "bzp_step": steps[0], "bzp_batch_step": 0, "bs_step": steps[1],
                    "bs_batch_step": 0, "alpha": self.attrs["alpha"]}
            tiles = -(-m // MATMUL_TM) * -(-n // MATMUL_TN)
            call.dispatch(self.spec.shader, "float32", constants, push, grid_1d(tiles, 64),
                          [t for t in ins.values() if t is not None], [y])

    def _plan(self, sa, sb, c, b_scale, bzp) -> tuple:
        if len(sa) != 2 or len(sb) != 2:
            raise UnsupportedError(f"QGemm of {sa} and {sb}: 2-D operands only")
        m, k = sa[::-1] if self.attrs["transA"] else sa
        kb, n = sb[::-1] if self.attrs["transB"] else sb
        if k != kb:
            raise UnsupportedError(f"QGemm: A {sa} and B {sb} do not agree")
        if k == 0:  # the CPU EP quantizes the bias in float there (HandleZeroKCase)
            raise UnsupportedError("QGemm with K = 0")
        if k > LOOP_BUDGET:
            raise UnsupportedError(f"QGemm: K={k} past one invocation's loop budget")
        steps = []
        for t, what in ((bzp, "b_zero_point"), (b_scale, "b_scale")):
            if t is None or t.size == 1:
                steps.append(0)
            elif t.shape == (n,):
                steps.append(1)
            else:
                raise UnsupportedError(f"QGemm: {what} of shape {t.shape} for N = {n}")
        bias = 0
        if c is not None:
            cs = c.shape
            if math.prod(cs) == 1 and len(cs) <= 2:
                bias = 1
            elif cs in ((n,), (1, n)):
                bias = 2
            elif cs == (m, 1):
                bias = 3
            elif cs == (m, n):
                bias = 4
            else:
                raise UnsupportedError(f"QGemm: C of shape {cs} for an output of ({m}, {n})")
        return m, n, bias, steps
