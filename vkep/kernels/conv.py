"""Conv, ConvTranspose and Col2Im over NC[D]HW tensors with 1 to 3 spatial dimensions.

Conv runs as an implicit GEMM (shaders/conv.comp), Winograd for 3x3 stride-1 (winograd.py), or on CPU devices
with 8-wide subgroups as the broadcast GEMMs (conv.comp's MODE 3; matmul.comp's mode 3 for 1x1 stride-1 convs
over an even pixel count; docs/design.md says why); float16 convs on a device's cooperative matrices
(coopmat.py) as W x the patches gathered by im2col.comp (X itself for 1x1 stride-1) on matmul_coop.comp;
ConvTranspose gathers per output (shaders/conv_transpose.comp), as Col2Im does (shaders/col2im.comp). They read
spatial shapes as 3-D, with leading dims of size 1.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from vkep.kernels import coopmat, matmul, mlas_gemm, winograd
from vkep.kernels.base import (
    LOOP_BUDGET,
    MAX_ELEMENTS,
    Kernel,
    Redirect,
    UnsupportedError,
    grid_1d,
    shader_dtype,
)
from vkep.kernels.elementwise import OP_ADD, dispatch_binary
from vkep.kernels.movement import host_values

MAX_SPATIAL = 3
# conv.comp's GEMM: threads per workgroup, output channels and pixels per thread. Measured on lavapipe,
# where every load costs tens of cycles: 16 x 8 halves Mesa 22.3's time against 8 x 8 and costs Mesa 25
# little (32 x 8 is faster on 22.3 but slower on 25 and wastes more on layers with few channels).
GEMM_WG, GEMM_TM, GEMM_TN = 64, 16, 8  # conv.comp: threads per workgroup, channels and pixels per thread

WORKGROUP = 256
MODE_GEMM, MODE_POINTWISE, MODE_DIRECT, MODE_BROADCAST, MODE_DIRECT_RUN = 0, 1, 2, 3, 4
DIRECT_RUN = 4  # conv.comp's RUN: MODE_DIRECT_RUN's outputs a thread along a row, for rows of at least as many
# conv.comp's MODE_BROADCAST (CPU devices with 8-wide subgroups, float32): a workgroup's block of output channels
# and pixels (BR, 8 BC there). 16 channels against 32: the light models 0.98-0.99x the time on Mesa 25 (resnet50's
# 7x7 stem slower, its layer-4 1x1 convs faster), and lavapipe compiles the pipeline in 0.52 s instead of 1.19 s
BROADCAST_CHANNELS, BROADCAST_PIXELS = 16, 64
DIRECT_MAX_CHANNELS = 8  # fewer output channels per group than this: one thread per output (depthwise)
# k x k and strided convs on CPU devices: their patches gathered into scratch memory (im2col.comp, RUN pixels an
# invocation) and multiplied by matmul.comp's broadcast GEMM, where the patches fit IM2COL_MAX_BYTES; with at
# least IM2COL_MIN_OUTPUTS output channels (the gather costs a pass over the patches per row of W: the 7x7 stem's
# 64 outputs ran 0.69x, 128 and more 1.2-1.4x on Mesa 25). An odd pixel count (7x7 maps) gets a zero column per
# row, so that the GEMM's pair loads serve it too; 1x1 convs over one take this path as well.
IM2COL = True
IM2COL_ODD = True  # ... over an odd pixel count too (padded rows)
IM2COL_MIN_OUTPUTS = 128
IM2COL_RUN = 8
IM2COL_MAX_BYTES = 64 << 20


class Im2col(NamedTuple):
    """A conv planned as im2col.comp into scratch memory of `shape` ([images, rows, pitch]: pixels, or one more where
    they are odd), then a GEMM."""

    shape: tuple[int, int, int]
    members: dict  # im2col.comp's push members but the tensors
    grid: tuple[int, int, int]


def im2col_plan(xs: tuple[int, ...], out: list[int], k3: list[int], strides: list[int], dilations: list[int],
                begin: list[int], rows: int, pitch: int) -> Im2col:
    """im2col.comp's patches of X (xs: [images, channels of one group, ...], 1-D or 2-D) for a conv of output
    `out`, kernel `k3` (as_3d), `rows` rows (channels x taps, or one more) `pitch` elements apart."""
    batch, cg = xs[0], xs[1]
    runs = -(-pitch // IM2COL_RUN)
    n_col = batch * rows * runs
    (_, h, w), (_, ho, wo), (_, sh, sw) = as_3d(xs[2:], 1), as_3d(out, 1), as_3d(strides, 1)
    (_, dh, dw), (_, ph, pw) = as_3d(dilations, 1), as_3d(begin, 0)
    members = {"C": cg, "H": h, "W": w, "Ho": ho, "Wo": wo, "kh": k3[1], "kw": k3[2], "sh": sh, "sw": sw,
               "dh": dh, "dw": dw, "ph": ph, "pw": pw, "rows": rows, "pitch": pitch, "runs": runs, "n": n_col}
    return Im2col((batch, rows, pitch), members, grid_1d(n_col, 64))


class Coop(NamedTuple):
    """A float16 conv planned on the device's cooperative matrices: W [m, k] x patches [k, n] per image, the patches
    gathered first (`col`) or X itself (a 1x1 stride-1 conv: None)."""

    size: tuple[int, int, int]  # (TM, TN, TK) of the device's product (coopmat.product)
    col: Im2col | None
    m: int
    n: int


def _fill(values: list[int], n: int, default: int) -> list[int]:
    return list(values) if values else [default] * n


def window_geometry(in_dims, kernel, strides, dilations, pads, auto_pad: str,
                    ceil_mode: int = 0) -> tuple[list[int], list[int], list[int]]:
    """(output dims, leading pads, trailing pads) of a sliding window, as ORT's CPU EP computes them."""
    n = len(in_dims)
    pads = _fill(pads, 2 * n, 0)
    begin, end, out = list(pads[:n]), list(pads[n:]), []
    for i, size in enumerate(in_dims):
        k = (kernel[i] - 1) * dilations[i] + 1
        s = strides[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            target = -(-size // s)
            total = max(0, (target - 1) * s + k - size)
            begin[i] = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
            end[i] = total - begin[i]
        elif auto_pad == "VALID":
            begin[i] = end[i] = 0
        elif auto_pad not in ("NOTSET", ""):
            raise UnsupportedError(f"auto_pad {auto_pad!r}")
        span = size + begin[i] + end[i] - k
        if span < 0:
            # ONNX's formula gives no output there; ORT's CPU EP gives one (its C++ division truncates
            # toward zero): left to the CPU EP rather than answering otherwise
            raise UnsupportedError(f"a window of {k} over {size} elements padded by {begin[i]} + {end[i]}")
        if ceil_mode:
            o = -(-span // s) + 1
            if (o - 1) * s >= size + begin[i]:  # the last window must start inside the input or left padding
                o -= 1
        else:
            o = span // s + 1
        out.append(max(o, 0))
    return out, begin, end


# conv.comp's packed strides and dilations: d in the low PACKED_D bits, then h and w in PACKED_HW bits each (its
# push constants leave room for the group base and the EPILOGUE variant's operand that way). Depth: 3-D convs'
# are small; h and w reach 16383 (a 1-D EEG model dilates by 4096)
PACKED_D, PACKED_HW = 4, 14


def packed_dilations(dilations: list[int]) -> int:
    """conv.comp's dilations (d, h, w from the low bits: PACKED_D, PACKED_HW); strides too: packed_strides."""
    return _packed(dilations, "dilations")


def packed_strides(strides: list[int]) -> int:
    return _packed(strides, "strides")


def _packed(values: list[int], what: str) -> int:
    d, h, w = as_3d(values, 1)
    if d >= 1 << PACKED_D or max(h, w) >= 1 << PACKED_HW:
        raise UnsupportedError(f"Conv: {what} {values} (conv.comp takes a depth's below {1 << PACKED_D}, a "
                               f"height's and a width's below {1 << PACKED_HW})")
    return d | h << PACKED_D | w << (PACKED_D + PACKED_HW)


def _image_gemm_members(m: int, k: int, pixels: int, pitch: int | None = None) -> dict:
    """matmul.comp's push members but the tensors (matmul.product_members) for W [m, k] x B [k, pixels] of each
    image (B's rows `pitch` apart, pixels by default: X itself for a 1x1 conv, im2col's patches else), plus the
    bias per row."""
    pitch = pitch or pixels
    return matmul.product_members(m, pixels, k, a=(0, 0, k, 1), b=(k * pitch, 0, pitch, 1), c=(1, 0), beta=1.0)


def _conv_members(cg: int, mg: int, group: int, xs: tuple[int, ...], out: list[int], strides: list[int],
                  dilations: list[int], begin: list[int], k3: list[int], wn: int) -> dict:
    """conv.comp's push members but the tensors."""
    (i_d, ih, iw), (od, oh, ow), (pd, ph, pw) = as_3d(xs[2:], 1), as_3d(out, 1), as_3d(begin, 0)
    return {"cg": cg, "mg": mg, "groups": group, "id": i_d, "ih": ih, "iw": iw, "od": od, "oh": oh, "ow": ow,
            "strides": packed_strides(strides), "dilations": packed_dilations(dilations), "pd": pd, "ph": ph, "pw": pw,
            "kd": k3[0], "kh": k3[1], "kw": k3[2], "wn": wn}


def as_3d(values: list[int], fill: int) -> list[int]:
    return [fill] * (MAX_SPATIAL - len(values)) + list(values)


def check_size(*shapes: tuple[int, ...]) -> None:
    for shape in shapes:
        if math.prod(shape) > MAX_ELEMENTS:
            raise UnsupportedError(f"{shape} has more than {MAX_ELEMENTS} elements")


class ConvBase(Kernel):
    """What every convolution reads alike (Conv, ConvTranspose, quantize.ConvInteger): its spatial attributes."""

    def _spatial(self, xs: tuple[int, ...], ws: tuple[int, ...]) -> tuple[int, list[int], list[int], list[int]]:
        if len(xs) < 3 or len(xs) - 2 > MAX_SPATIAL or len(ws) != len(xs):
            raise UnsupportedError(f"{self.spec.op}: X {xs} and W {ws} must be 3-D to 5-D and of the same rank")
        n = len(xs) - 2
        kernel = list(self.attrs.get("kernel_shape") or ws[2:])
        if kernel != list(ws[2:]):
            raise UnsupportedError(f"{self.spec.op}: kernel_shape {kernel} does not match W {ws}")
        strides = _fill(self.attrs.get("strides"), n, 1)
        dilations = _fill(self.attrs.get("dilations"), n, 1)
        return n, kernel, strides, dilations

    def compute(self, call) -> None:
        x, w = call.inputs[:2]
        b = call.inputs[2] if len(call.inputs) > 2 else None
        key = (x.shape, w.shape, b is not None)
        plan = self.planned(key, lambda: self._plan(x.shape, w.shape))
        out, constants, members, groups = plan
        y = call.output(0, out)
        if y.size == 0:
            return
        reads = [x, w] + ([b] if b is not None else [])
        call.dispatch(self.spec.shader, shader_dtype(x), constants, {**members, "x": x, "w": w, "b": b, "y": y},
                      groups, reads, [y])


class Conv(ConvBase):
    # Winograd's output tile size R where the weight was packed as U = G g G^T (0: the implicit GEMM), the length
    # of W's rows where it was packed with an odd K padded (0: not), and the weight's shape before packing
    winograd_tile = 0
    weight_row = 0
    weight_shape: tuple[int, ...] = ()

    def pack(self, index: int, weight: np.ndarray) -> tuple[np.ndarray, str]:
        """A 3x3 weight of a conv that Winograd serves (winograd.choose_tile) is packed transformed; one that
        conv.comp's broadcast GEMM will read with an odd K (input channels x taps: the 7x7 stem on 3 channels)
        is packed as [M, K + 1] with a zero column, so that its rows are read in pairs too."""
        tile = winograd.choose_tile(self.attrs, weight.shape, self.device_info) if index == 1 else 0
        if tile and weight.dtype == np.float16 and self._coop() is not None:  # (the matrix units take it: _plan)
            tile = 0
        if tile:
            self.winograd_tile, self.weight_shape = tile, tuple(weight.shape)
            return winograd.transform_weights(weight, tile), f"winograd-{tile}"
        if index == 1 and self._pads_rows(weight):
            m, k = weight.shape[0], math.prod(weight.shape[1:])
            padded = np.zeros((m, k + 1), np.float32)
            padded[:, :k] = weight.reshape(m, k)
            self.weight_row, self.weight_shape = k + 1, tuple(weight.shape)
            return padded, "conv-rows-even"
        return weight, "raw"

    def _coop(self) -> tuple[int, int, int] | None:
        """The device's cooperative-matrix product for a float16 conv (coopmat.product), else None."""
        return coopmat.product(self) if self.input_types[0] == "float16" else None

    def _pads_rows(self, weight: np.ndarray) -> bool:
        """Whether the plan will surely take conv.comp's broadcast GEMM for this weight (as _plan decides) with an
        odd K: float32, one group, 1-D or 2-D, not 1x1, at least DIRECT_MAX_CHANNELS outputs, within the loop
        budget."""
        k = math.prod(weight.shape[1:])
        return (weight.dtype == np.float32 and self.attrs["group"] == 1 and weight.ndim in (3, 4)
                and any(d != 1 for d in weight.shape[2:]) and weight.shape[0] >= DIRECT_MAX_CHANNELS and k % 2 == 1
                and (k + 1) // 2 + 1 <= LOOP_BUDGET and matmul.broadcast_applies(self, True))

    def compute(self, call) -> None:
        if not self.winograd_tile:
            x, w = call.inputs[:2]
            b = call.inputs[2] if len(call.inputs) > 2 else None
            ws = self.weight_shape if self.weight_row else w.shape
            out, constants, members, groups = self.planned((x.shape, w.shape, b is not None),
                                                           lambda: self._plan(x.shape, ws))
            y = call.output(0, out)
            if y.size == 0:
                return
            reads = [x, w] + ([b] if b is not None else [])
            if isinstance(constants, Coop):  # W [M, rows] x (col or X) [rows, pixels] per image + bias
                patches = x
                if constants.col is not None:
                    patches = call.scratch(constants.col.shape, "float16")
                    call.dispatch("im2col.comp", "float16", {}, {**constants.col.members, "x": x, "col": patches},
                                  constants.col.grid, [x], [patches])
                coopmat.dispatch(call, self, constants.size, {**members, "a": w, "b": patches, "c": b, "y": y}, groups,
                                 [w, patches] + reads[2:])
            elif isinstance(constants, Im2col):  # W [M, rows] x col [rows, pixels] per image + bias
                col = call.scratch(constants.shape, "float32")
                call.dispatch("im2col.comp", "float32", {}, {**constants.members, "x": x, "col": col}, constants.grid,
                              [x], [col])
                matmul.broadcast_dispatch(call, "float32", {**members, "a": w, "b": col, "c": b, "y": y}, groups,
                                          [w, col] + reads[2:], b_padded=True)
            elif constants is not None:
                call.dispatch(self.spec.shader, self.product_dtype(x), constants,
                              {**members, "x": x, "w": w, "b": b, "y": y}, groups, reads, [y])
            else:  # a 1x1 conv as matmul.comp's broadcast product per image: W [M, C] x X [C, pixels] + bias
                matmul.broadcast_dispatch(call, shader_dtype(x), {**members, "a": w, "b": x, "c": b, "y": y}, groups,
                                          reads)
            return
        x, u = call.inputs[:2]
        b = call.inputs[2] if len(call.inputs) > 2 else None
        plan = self.planned((x.shape, b is not None), lambda: self._plan(x.shape, self.weight_shape))
        out, planned = plan
        y = call.output(0, out)
        if y.size:
            winograd.record(call, "winograd.comp", shader_dtype(x), self.winograd_tile, planned, x, u, b, y)

    def _plan(self, xs: tuple[int, ...], ws: tuple[int, ...]) -> tuple:
        n, kernel, strides, dilations = self._spatial(xs, ws)
        group = self.attrs["group"]
        batch, c = xs[:2]
        m = ws[0]
        if group <= 0 or c % group or m % group or ws[1] != c // group:
            raise UnsupportedError(f"Conv: X {xs}, W {ws} and group {group} do not agree")
        out, begin, _ = window_geometry(xs[2:], kernel, strides, dilations, self.attrs.get("pads"),
                                        self.attrs["auto_pad"])
        out_shape = (batch, m, *out)
        check_size(xs, ws, out_shape)
        if self.winograd_tile:
            cpu = self.device_info is not None and self.device_info.device_type == "cpu"
            return out_shape, winograd.plan(self.winograd_tile, xs, out, begin, m, cpu)
        cg, mg, pixels = c // group, m // group, math.prod(out)
        k3 = as_3d(kernel, 1)
        pointwise = k3 == [1, 1, 1] and all(s == 1 for s in strides) and not any(begin) and list(out) == list(xs[2:])
        # on CPU devices with 8-wide subgroups: the broadcast GEMMs (float32, 1-D or 2-D, one group)
        broadcast = (mg >= DIRECT_MAX_CHANNELS and group == 1 and n <= 2
                     and matmul.broadcast_applies(self, self.input_types[0] == "float32"))
        # 1x1: matmul.comp's pairs along the pixels where their count is even; else through im2col's padded rows
        # (below), or conv.comp for few output channels
        if broadcast and pointwise and pixels % 2 == 0 and -(-cg // 2) <= matmul.MAX_LOOP:
            return out_shape, None, _image_gemm_members(mg, cg, pixels), batch
        rows = self.weight_row or cg * math.prod(k3)  # (W's row length: K, or K + 1 where pack padded it)

        def im2col(pitch: int = pixels) -> Im2col:
            return im2col_plan(xs, out, k3, strides, dilations, begin, rows, pitch)

        coop = self._coop()
        if coop is not None and group == 1 and n <= 2 and -(-rows // coop[2]) <= matmul.MAX_LOOP and (
                pointwise or batch * rows * pixels * 2 <= IM2COL_MAX_BYTES):
            return out_shape, Coop(coop, None if pointwise else im2col(), mg, pixels), \
                _image_gemm_members(mg, rows, pixels), batch
        pitch = pixels + pixels % 2
        if (broadcast and IM2COL and mg >= IM2COL_MIN_OUTPUTS and batch * rows * pitch * 4 <= IM2COL_MAX_BYTES
                and (IM2COL_ODD or pixels % 2 == 0) and -(-rows // 2) <= matmul.MAX_LOOP):
            return out_shape, im2col(pitch), _image_gemm_members(mg, rows, pixels, pitch), batch
        if broadcast and -(-cg * math.prod(k3) // 2) + 1 <= LOOP_BUDGET:
            row = self.weight_row or cg * math.prod(k3)  # (W's row length: K, or K + 1 where pack padded it)
            groups = (-(-pixels // BROADCAST_PIXELS), -(-mg // BROADCAST_CHANNELS), batch)
            members = _conv_members(cg, mg, group, xs, out, strides, dilations, begin, k3, row)
            constants = {"mode": MODE_BROADCAST, "tm": GEMM_TM, "tn": GEMM_TN, "local_size_x": 8,
                         "a_pairs": int(row % 2 == 0), "br": BROADCAST_CHANNELS}
            return out_shape, constants, members, groups
        if self.weight_row:  # (pack pads W only where the plan takes the branch above)
            raise UnsupportedError(f"Conv: a weight packed for the broadcast GEMM, planned otherwise for X {xs}")
        if mg < DIRECT_MAX_CHANNELS:
            mode = MODE_DIRECT_RUN if out[-1] >= DIRECT_RUN else MODE_DIRECT
            runs = pixels // out[-1] * -(-out[-1] // DIRECT_RUN) if mode == MODE_DIRECT_RUN else pixels
            groups = grid_1d(group * mg * runs, GEMM_WG)
            wn = GEMM_WG
            groups = (groups[0], groups[1], batch)
        else:
            mode = MODE_POINTWISE if pointwise else MODE_GEMM
            # threads along pixels: enough for the output, at least a SIMD width (8), at most all
            wn = min(GEMM_WG, max(8, 1 << (-(-pixels // GEMM_TN) - 1).bit_length()))
            wm = GEMM_WG // wn
            groups = (-(-pixels // (wn * GEMM_TN)), -(-mg // (wm * GEMM_TM)), batch * group)
        # each invocation loops over the group's input channels, and in MODE_GEMM over each channel's taps
        # (the direct mode unrolls them, MODE_POINTWISE has one): within lavapipe's budget, or a clear error
        # rather than a sum silently cut short
        # (lavapipe counts a loop's leaving pass too: MODE_GEMM's taps loop costs taps + 1 a channel)
        taps = math.prod(k3) + 1 if mode == MODE_GEMM else 0
        if cg * (1 + taps) + 1 > LOOP_BUDGET:
            raise UnsupportedError(f"Conv: {cg} input channels x {k3} taps exceed one invocation's loop budget")
        members = _conv_members(cg, mg, group, xs, out, strides, dilations, begin, k3, wn)
        # the GEMM modes read the kernel's size and the workgroup's shape from the push constants: one pipeline
        # per mode for every conv of a model (conv.comp's header says why)
        kd, kh, kw = k3 if mode in (MODE_DIRECT, MODE_DIRECT_RUN) else [1, 1, 1]
        return out_shape, {"mode": mode, "kd": kd, "kh": kh, "kw": kw, "tm": GEMM_TM, "tn": GEMM_TN}, members, groups


class ConvTranspose(ConvBase):
    """ConvTranspose, as ORT's CPU EP computes it where it can: float32 of one group as the columns W^T x X (MLAS's
    SGEMM followed to the last bit where mlas_gemm takes the product, else matmul.comp's) summed into the image by
    col2im.comp in the CPU EP's order, then the bias added; otherwise conv_transpose.comp's
    gather (each output sums the kernel offsets that land on an input, over the input channels: a load or two per
    multiply-add, so a 1-D upsampler of kernel 20, stride 10 and 512 channels took lavapipe 9.5 s, the CPU EP 60 ms,
    Kokoro-82M's generator)."""

    w_constant = False  # W is a constant (pack saw it), which the CPU EP's PrePack transposes: its SGEMM reads W^T as
    # given (MLAS's M1 kernel possible), not transposed

    def pack(self, index: int, weight: np.ndarray) -> tuple[np.ndarray, str]:
        if index == 1:
            self.w_constant = True
        return super().pack(index, weight)

    def compute(self, call) -> None:
        x, w = call.inputs[:2]
        b = call.inputs[2] if len(call.inputs) > 2 else None
        out, taps, m, _ = self.planned((x.shape, w.shape, b is not None), lambda: self._plan(x.shape, w.shape))
        columns = (x.shape[0], math.prod(w.shape[1:]), math.prod(x.shape[2:]))
        if x.dtype != "float32" or self.attrs["group"] != 1 or math.prod(columns) * 4 > COLUMNS_MAX_BYTES:
            return super().compute(call)  # (the plan bounds the taps by the loop budget, for col2im.comp too)
        y = call.output(0, out)
        if y.size == 0:
            return
        cin, rows, length = w.shape[0], columns[1], columns[2]
        cols = call.scratch(columns, "float32")
        # cols[n] [C_out K, L] = W [C_in, C_out K]^T x X[n] [C_in, L] (W^T transposed first each run was slower: 179
        # -> 210 ms for Kokoro-82M's upsampler [1, 512, 138] -> [1, 256, 1380], kernel 20, stride 10, on lavapipe)
        members = matmul.product_members(rows, length, cin, a=(0, 0, 1, rows), b=(cin * length, 0, length, 1))
        mm = self.composed("MatMul")
        # (a constant W: a weight layer's bound, MAX_MACS_CONSTANT_B; a segmentation decoder's last upsampling,
        # 32 -> 8 channels to 96 x 96, took 21 ms in the exact path against the CPU EP's 0.1)
        dtype = mlas_gemm.variant(mm, w, x, members, x.shape[0], packed=False, trans_b=False, interleaved=False,
                                  weights=self.w_constant)
        if dtype is not None:  # the CPU EP's SGEMM, an image a call (its PrePack transposes a constant W)
            mlas_gemm.record(mm, Redirect(call, [w, x, None], cols), dtype, w, x, None, columns, members, x.shape[0],
                             packed=False, trans_a=not self.w_constant, trans_b=False, interleaved=False,
                             folds=False, calls=True)
        else:
            matmul.product(self, call, w, x, cols, members, x.shape[0])
        # col2im.comp's 3-D sizes are the plan's (conv_transpose.comp's)
        push = {"image": [m["od"], m["oh"], m["ow"]], "block": [taps["kd"], taps["kh"], taps["kw"]],
                "cols": [m["id"], m["ih"], m["iw"]], "stride": [m["sd"], m["sh"], m["sw"]],
                "dilation": [m["dd"], m["dh"], m["dw"]], "pad": [m["pd"], m["ph"], m["pw"]]}
        call.dispatch("col2im.comp", "float32", {}, {**push, "n": y.size, "channels": out[1], "x": cols, "y": y},
                      grid_1d(y.size, COL2IM_WG), [cols], [y])
        if b is not None:  # (as the CPU EP: the bias added to the sums)
            bias = b.view(0, (out[1],) + (1,) * (len(out) - 2))
            dispatch_binary(call, OP_ADD, y, bias, y)

    def _plan(self, xs: tuple[int, ...], ws: tuple[int, ...]) -> tuple:
        n, kernel, strides, dilations = self._spatial(xs, ws)
        group = self.attrs["group"]
        batch, c = xs[:2]
        if group <= 0 or c % group or ws[0] != c:
            raise UnsupportedError(f"ConvTranspose: X {xs}, W {ws} and group {group} do not agree")
        cg, mg = c // group, ws[1]
        adj = _fill(self.attrs.get("output_padding"), n, 0)
        pads = _fill(self.attrs.get("pads"), 2 * n, 0)
        out_attr = list(self.attrs.get("output_shape") or [])
        if out_attr and len(out_attr) == n + 2:
            out_attr = out_attr[2:]
        auto_pad = self.attrs["auto_pad"]
        begin, out = [], []
        for i in range(n):
            full = (xs[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 + adj[i]
            same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
            if out_attr or same:  # pads follow from the output size (SAME: input * stride)
                size = out_attr[i] if out_attr else xs[2 + i] * strides[i]
                total = max(0, full - size)
                # ONNX: SAME_UPPER puts the odd pixel at the tail, others at the head
                begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
                out.append(size)
            elif auto_pad == "VALID":
                begin.append(0)
                out.append(full)
            else:
                begin.append(pads[i])
                out.append(full - pads[i] - pads[n + i])
        if any(o <= 0 for o in out):
            raise UnsupportedError(f"ConvTranspose: output dims {out} are not positive")
        out_shape = (batch, mg * group, *out)
        check_size(xs, ws, out_shape)
        groups = grid_1d(math.prod(out_shape[1:]), WORKGROUP)
        kd, kh, kw = as_3d(kernel, 1)
        # the taps' loops around the channel loop, each with its leaving pass (lavapipe counts it)
        if 1 + kd * (2 + kh * (2 + kw * (2 + cg))) > LOOP_BUDGET:
            raise UnsupportedError(f"ConvTranspose: {cg} input channels x {kernel} taps exceed one invocation's "
                                   "loop budget")
        (i_d, ih, iw), (od, oh, ow), (pd, ph, pw) = as_3d(xs[2:], 1), as_3d(out, 1), as_3d(begin, 0)
        (sd, sh, sw), (dd, dh, dw) = as_3d(strides, 1), as_3d(dilations, 1)
        members = {"cg": cg, "mg": mg, "groups": group, "id": i_d, "ih": ih, "iw": iw, "od": od, "oh": oh, "ow": ow,
                   "sd": sd, "sh": sh, "sw": sw, "dd": dd, "dh": dh, "dw": dw, "pd": pd, "ph": ph, "pw": pw}
        return out_shape, {"kd": kd, "kh": kh, "kw": kw}, members, (groups[0], groups[1], batch)


COL2IM_WG = 64  # col2im.comp's workgroup
COLUMNS_MAX_BYTES = 1 << 28  # ConvTranspose's columns in scratch memory past which it takes the gather


class Col2Im(Kernel):
    """Col2Im (opset 18): the columns [N, C * prod(block), L] summed back into the image [N, C, *image_shape]
    (1 to 3 spatial dims; image_shape and block_shape CPU inputs), one invocation per image element."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        dilations = attrs.get("dilations") or []
        if len(dilations) != 2 and any(d != 1 for d in dilations):
            # (ORT 1.32's CPU EP places dilated blocks elsewhere than ONNX's definition outside 2-D; vkep follows it
            # where the two agree)
            return f"Col2Im with dilations {dilations} outside 2-D"
        return None

    def compute(self, call) -> None:
        x = call.inputs[0]
        image, block = (host_values(call, t) for t in call.inputs[1:3])
        n = len(image)
        if not 1 <= n <= MAX_SPATIAL or len(block) != n or len(x.shape) != 3:
            raise UnsupportedError(f"Col2Im: input {x.shape}, image_shape {image}, block_shape {block}")
        strides = list(self.attrs.get("strides") or [1] * n)
        dilations = list(self.attrs.get("dilations") or [1] * n)
        pads = list(self.attrs.get("pads") or [0] * 2 * n)
        cols = [(image[d] + pads[d] + pads[n + d] - (dilations[d] * (block[d] - 1) + 1)) // strides[d] + 1
                for d in range(n)]
        blocks = math.prod(block)
        if min(cols) <= 0 or min(block) <= 0 or x.shape[1] % blocks or math.prod(cols) != x.shape[2]:
            raise UnsupportedError(f"Col2Im: input {x.shape} does not fit image_shape {image}, block_shape {block}")
        out = (x.shape[0], x.shape[1] // blocks, *image)
        check_size(x.shape, out)
        y = call.output(0, out)
        if y.size:
            if blocks > LOOP_BUDGET:
                raise UnsupportedError(f"Col2Im: blocks of {blocks} elements")
            members = {"n": y.size, "channels": out[1]}
            for name, values, fill in (("image", image, 1), ("block", block, 1), ("stride", strides, 1),
                                       ("dilation", dilations, 1), ("pad", pads[:n], 0), ("cols", cols, 1)):
                members[name] = as_3d(values, fill)
            call.dispatch(self.spec.shader, shader_dtype(x), {}, {**members, "x": x, "y": y},
                          grid_1d(y.size, COL2IM_WG), [x], [y])
