"""Integer products through float32 GEMMs (integer_float.comp): on lavapipe matmul.comp multiplies and adds
float32 several times faster than matmul_integer.comp does int32 (a 2000x1408 by 1408x128 uint8 product: 2.6
GOPS there). A float32 sum of products of 8-bit values less their zero points (each at most 255 from 0) is exact
while it has at most FLOAT_SLICE_K terms, so K is cut into slices that short, each slice's partial product taken
in float32, and the slices added as int32. Where the CPU EP's products saturate (MLAS's uint8 x int8 pairs on
AVX2: quantize.saturating) the path is taken only for weights that never do (|B| <= 64: 2 * 255 * 64 < 2^15)."""

from __future__ import annotations

import math

from vkep.kernels import conv, matmul
from vkep.kernels.base import Kernel, Tensor, grid_1d

MODE_WIDEN, MODE_SUM, MODE_REQUANTIZE = 0, 1, 2  # integer_float.comp's
NO_SCALES = {"bias": None, "xs": None, "ws": None, "ys": None}  # (MODE 2's push members, unread by the others)
WG = 256  # integer_float.comp's workgroup
FLOAT_SLICE_K = (1 << 24) // (255 * 255)  # 258: the longest run of K whose float32 sums are exact
# smaller products keep the integer shaders: the float path widens B each run (K x N), which few rows of A do not
# repay (16 x 768 by 768 x 768 on lavapipe: 9.8 ms in int32, 20.6 through float; 64 rows by 3072 columns: 115 / 81)
FLOAT_MIN_MACS, FLOAT_MIN_ROWS = 1 << 22, 64
FLOAT_MIN_CHANNELS = 16  # ConvInteger's output channels: widening X and its patches cost 1 / M of the product
# QLinearConv's K (channels x taps) from which the float path pays: conv_integer.comp requantizes in registers, the
# float path writes int32 accumulators and requantizes in a pass of its own. Paired on lavapipe (loaded): K 27 (a
# 3 x 3 stem over 224 x 224) 1.7 ms there, 6.6 through float; K 576 36 / 34; K 1152 38 / 24; K 2304 36 / 25
QLINEAR_FLOAT_MIN_K = 1024
NEVER_SATURATES = 64  # the largest |B| of int8 weights whose pairs with uint8 values fit int16: 2 * 255 * 64


def float_slices(k: int) -> int:
    """How many equal runs of K the product is summed in (a divisor of K within 4x the fewest), 0 where none."""
    fewest = -(-k // FLOAT_SLICE_K)
    return next((s for s in range(fewest, 4 * fewest + 1) if k % s == 0), 0)


def applies(rows: int, n: int, k: int, saturates: bool, largest: int | None) -> bool:
    """Whether a product of `rows` rows of A, N = n and K = k takes the float path: large enough, K cut evenly,
    and no pair that the CPU EP saturates (`largest`: the constant weight's largest |value|, None if unknown)."""
    unsaturated = not saturates or (largest is not None and largest <= NEVER_SATURATES)
    return rows >= FLOAT_MIN_ROWS and rows * n * k >= FLOAT_MIN_MACS and unsaturated and float_slices(k) > 0


def widen(call, x: Tensor, zp: Tensor | None, y: Tensor, zp_div: int = 1, zp_mod: int = 1) -> None:
    """y (float32) = the 8-bit x less its zero point (element i's: zp[(i / zp_div) % zp_mod])."""
    call.dispatch("integer_float.comp", "uint8", {"mode": MODE_WIDEN, "signed": int(x.dtype == "int8")},
                  {"x": x, "zp": zp, "y": y, "count": x.size, "zp_div": zp_div, "zp_mod": zp_mod, "slices": 0,
                   **NO_SCALES},
                  grid_1d(x.size, WG), [x] + ([zp] if zp is not None else []), [y])


def product(kernel: Kernel, call, a: Tensor, b: Tensor, y: Tensor, members: dict, batches: int) -> None:
    """y (int32, [batches, M, N]) = A x B, both float32 (widened), as the slices' float32 partial products added
    as int32; `members`: matmul.product_members of the whole product (A's and B's outer strides 0)."""
    slices = float_slices(members["K"])
    count = batches * members["M"] * members["N"]
    partials = call.scratch((slices * batches, members["M"], members["N"]), "float32")
    matmul.sliced_product(kernel, call, a, b, partials, members, batches, slices)
    call.dispatch("integer_float.comp", "uint8", {"mode": MODE_SUM},
                  {"x": partials, "zp": None, "y": y, "count": count, "zp_div": 1, "zp_mod": 1, "slices": slices,
                   **NO_SCALES},
                  grid_1d(count, WG), [partials], [y])


def matmul_integer(kernel: Kernel, call, a: Tensor, b: Tensor, azp: Tensor | None, bzp: Tensor | None, y: Tensor,
                   a_zp_per_row: bool, bzp_per_column: bool) -> None:
    """MatMulInteger's y [..., M, N] (int32) = (A [..., M, K] - azp) x (B [K, N] - bzp) through float32."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batches = math.prod(a.shape[:-2])
    a_f, b_f = call.scratch((batches * m, k), "float32"), call.scratch((k, n), "float32")
    widen(call, a, azp, a_f, k if a_zp_per_row else 1, m if a_zp_per_row else 1)
    widen(call, b, bzp, b_f, 1, n if bzp_per_column else 1)
    members = matmul.product_members(m, n, k, batch_inner=batches, a=(0, m * k, k, 1), b=(0, 0, n, 1))
    product(kernel, call, a_f, b_f, y, members, batches)


def conv_applies(m: int, pixels: int, k: int, col_bytes: int) -> bool:
    """Whether ConvInteger of one group, `m` output channels, `pixels` outputs an image and K = k (channels x
    taps) takes the float path: the widening and the patches (1 / m of its work) paid for, K cut evenly, and
    the patches within im2col's scratch limit."""
    return (m >= FLOAT_MIN_CHANNELS and pixels >= FLOAT_MIN_ROWS and m * pixels * k >= FLOAT_MIN_MACS
            and float_slices(k) > 0 and col_bytes <= conv.IM2COL_MAX_BYTES)


def conv_integer(kernel: Kernel, call, x: Tensor, w: Tensor, xzp: Tensor | None, wzp: Tensor | None, y: Tensor,
                 patches: conv.Im2col) -> None:
    """ConvInteger's y [N, M, ...] (int32) of one group = (W - wzp) [M, K] x the patches of (X - xzp) through
    float32 (the padding is X's zero point there: 0 once widened, as im2col.comp pads)."""
    m, rows, pitch = w.shape[0], patches.shape[1], patches.shape[2]
    batch, pixels = x.shape[0], math.prod(y.shape[2:])
    x_f, w_f = call.scratch(x.shape, "float32"), call.scratch((m, rows), "float32")
    widen(call, x, xzp, x_f)
    per_channel = wzp is not None and wzp.size > 1
    widen(call, w, wzp, w_f, rows if per_channel else 1, m if per_channel else 1)
    col = call.scratch(patches.shape, "float32")
    call.dispatch("im2col.comp", "float32", {}, {**patches.members, "x": x_f, "col": col}, patches.grid, [x_f], [col])
    members = matmul.product_members(m, pixels, rows, batch_inner=batch, a=(0, 0, rows, 1),
                                     b=(0, rows * pitch, pitch, 1))
    product(kernel, call, w_f, col, y, members, batch)


def requantize(call, acc: Tensor, bias: Tensor | None, x_scale: Tensor, w_scale: Tensor, y_scale: Tensor,
               yzp: Tensor | None, y: Tensor, channel_div: int, channels: int) -> None:
    """y (8-bit) = the int32 accumulators `acc` plus the bias, requantized as conv_integer.comp and matmul_integer.comp
    requantize them; element i's output channel (its bias and W's scale, where W has one a channel) is
    (i / channel_div) % channels: QLinearConv's [N, M, pixels] (pixels, M), QLinearMatMul's [..., N] (1, N)."""
    ins = {"bias": bias, "xs": x_scale, "ws": w_scale, "ys": y_scale, "zp": yzp}
    call.dispatch("integer_float.comp", "uint8", {"mode": MODE_REQUANTIZE, "signed": int(y.dtype == "int8")},
                  {"x": acc, **ins, "y": y, "count": y.size, "zp_div": channel_div, "zp_mod": channels,
                   "slices": int(w_scale.size > 1)}, grid_1d(y.size, WG),
                  [acc, *(t for t in ins.values() if t is not None)], [y])
