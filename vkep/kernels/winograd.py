"""Winograd F(R x R, 3 x 3) for Conv: 3x3 kernel, stride 1, dilation 1, one group (shaders/winograd.comp).

The weights are transformed once, when packed (U = G g G^T, stored [A*A][M][C] with A = R + 2); each run
makes three dispatches per pass over the output's tiles: input transform, A*A GEMMs over the channels, output
transform (+ bias). The transformed input and the GEMMs' output go to the call's scratch memory (float32);
outputs with more tiles than SCRATCH_BYTES holds run as several passes, so any shape the implicit GEMM plans,
this plans too.
"""

from __future__ import annotations

import numpy as np

from vkep.kernels.base import LOOP_BUDGET, UnsupportedError

WG = 64  # winograd.comp's workgroup size
# winograd.comp's GEMM: output channels per invocation (a multiple of 8), and the tiles per invocation it may
# take (gemm_shape). Measured on lavapipe (64->64 over 56x56, GEMM part, paired): 64 x 8 is 1.2x faster than
# 32 x 8 on Mesa 22.3 and 25 but takes 7.3 s to compile cold against 1.6 s (64 x 16: 32 s). One TN, 2: each TN is
# a pipeline of its own, and 32 x 8 took 1.5-2.3 s of lavapipe's cold compile (Mesa 25) against 0.4-0.55 s for
# 32 x 2, for a conv's GPU time within noise (2026-11-27, profiled one-node convs alternated 3-4 times, ms, TN 8
# and 2 against 2 alone: 64@224x224 120-129 / 121-140, 128@112 88-95 / 83-92, 64@56 7.1-8.0 / 8.5-9.7,
# 128@28 5.9-8.3 / 6.1-8.3); light_resnet50's cold session 7.7 -> 5.7 s.
GEMM_TM, GEMM_TILES = 32, (2,)
TRANSFORM_TN = 2  # the TN the transforms (MODE 0 and 2) are compiled with: winograd.comp's default, unused there
# threads per GEMM workgroup (gemm_shape): on a CPU device (lavapipe runs a workgroup as a loop over 8-lane
# SIMD rows) 8, which pads the fewest tiles (64->64 over 56x56 on Mesa 22.3: 69 ms against 82 at 16 and 101
# at 64 threads); 64 elsewhere (not measured on a GPU)
SCRATCH_BYTES = 32 << 20  # V and Y' of one pass (float32)
MODE_INPUT, MODE_GEMM, MODE_OUTPUT = 0, 1, 2

# G per output tile size R: U = G g G^T (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks")
_G = {
    2: np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
    4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                 [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
}

# Which convs take this path. F(2x2, 3x3): F(4x4, 3x3) is faster on lavapipe (64->64 channels over 56x56:
# 91 against 152 ms a run on Mesa 22.3, GEMM part 5.6 against 10.7 ms on Mesa 25) but its error is 10-20x
# the implicit GEMM's (2.2e-4 against 1.0e-5 for F(2, 3), |y| ~ 10), beyond the CPU EP's tolerances.
TILE = 2
# Channel counts where Winograd wins: Mesa 22.3, ms a run, implicit GEMM -> Winograd (paired in one process,
# 56x56 unless said): 4->32 6.1 -> 12.0 and 3->64 13.4 -> 14.0 (the GEMM wins), 4->64 23.7 -> 14.2,
# 8->8 7.5 -> 4.7, 8->16 12.0 -> 9.7, 16->8 17.7 -> 9.6, 16->16 14.2 -> 7.9, 8->64 44.0 -> 24.1,
# 64->8 55.8 -> 24.4, 32->32 55.9 -> 13.5, 8->8 over 14x14 1.6 -> 1.1, 16->16 over 14x14 9.3 -> 1.5. Below 8
# output channels the implicit GEMM's direct mode serves the conv.
MIN_IN_CHANNELS, MIN_OUT_CHANNELS = 8, 8


def choose_tile(attrs: dict, ws: tuple[int, ...], device_info) -> int:
    """The output tile size R for a Conv node with these attributes and weight shape on this device, or 0 where
    the implicit GEMM serves it better or Winograd cannot (any input shape the implicit GEMM plans, Winograd
    plans too)."""
    # the GEMM hands weights from lane to lane with subgroupBroadcast, within subgroups of 8 lanes or more
    if device_info is None or device_info.subgroup_size < 8 or not device_info.features.get("subgroupBallotCompute"):
        return 0
    if len(ws) != 4 or tuple(ws[2:]) != (3, 3) or attrs.get("group", 1) != 1:
        return 0
    kernel = list(attrs.get("kernel_shape") or [3, 3])
    if kernel != [3, 3] or list(attrs.get("strides") or [1, 1]) != [1, 1] or list(attrs.get("dilations") or [1, 1]) != [1, 1]:
        return 0
    m, c = ws[:2]
    if c < MIN_IN_CHANNELS or m < MIN_OUT_CHANNELS or c > LOOP_BUDGET or m > 65535:
        return 0
    return TILE


def transform_weights(w: np.ndarray, r: int) -> np.ndarray:
    """U = G g G^T of every (output, input channel) 3x3 kernel, as float32 [A*A][M][C] (C padded with zeros
    to a multiple of 4), whatever w's element type (winograd.comp says why)."""
    g = _G[r]
    a = r + 2
    m, c = w.shape[:2]
    u = np.zeros((a, a, m, -(-c // 4) * 4))  # C padded to a multiple of 4: the GEMM reads 4 channels at once
    u[..., :c] = np.einsum("ak,mckl,bl->abmc", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(a * a, m, -1).astype(np.float32))


def gemm_shape(tiles: int, cpu_device: bool) -> tuple[int, int]:
    """(threads per workgroup, tiles per thread) of the GEMM for a pass over `tiles` tiles: the fewest loads,
    which is what lavapipe's time follows (per channel step a subgroup loads TM / 8 + TN vectors)."""
    wg = 8 if cpu_device else 64
    return wg, min(GEMM_TILES, key=lambda tn: -(-tiles // (wg * tn)) * (GEMM_TM // 8 + tn))


def plan(r: int, xs: tuple[int, ...], out: list[int], begin: list[int], m: int, cpu_device: bool) -> tuple:
    """(passes, tiles per pass, specialization constants of the three modes), each pass (push members but the
    tensors, group counts of the three modes), for input X of shape xs, output dims `out`, leading pads `begin`,
    M output channels, on a CPU device or not."""
    batch, c, ih, iw = xs
    oh, ow = out
    a2 = (r + 2) ** 2
    th, tw = -(-oh // r), -(-ow // r)
    tiles = batch * th * tw
    if c > LOOP_BUDGET or m > 65535:
        raise UnsupportedError(f"Conv (Winograd): {c} input and {m} output channels exceed one dispatch")
    # tiles per pass: V and Y' within SCRATCH_BYTES, a whole number of GEMM workgroups (at least one)
    c4 = -(-c // 4) * 4
    per_tile = a2 * (c4 + m) * 4
    wg, tn = gemm_shape(min(tiles, SCRATCH_BYTES // per_tile), cpu_device)
    step = wg * tn
    chunk = min(max(step, SCRATCH_BYTES // per_tile // step * step), tiles, 65535 * min(WG, step))
    passes = []
    for p0 in range(0, tiles, chunk):
        n = min(chunk, tiles - p0)
        groups = ((-(-n // WG), c4 // 4, 1), (-(-n // step), -(-m // GEMM_TM), a2), (-(-n // (4 * WG)), m, 1))
        members = {"c": c, "m": m, "ih": ih, "iw": iw, "oh": oh, "ow": ow, "ph": begin[0], "pw": begin[1], "th": th,
                   "tw": tw, "p0": p0, "np": n}
        passes.append((members, groups))
    if max(max(g) for g in passes[0][1]) > 65535:
        raise UnsupportedError(f"Conv (Winograd) over {xs} is too large for one dispatch")
    # (TM and TN shape the GEMM only: the transforms keep the shader's defaults, one pipeline each for every conv)
    constants = ({"mode": MODE_INPUT, "r": r, "tm": GEMM_TM, "tn": TRANSFORM_TN, "wg": WG},
                 {"mode": MODE_GEMM, "r": r, "tm": GEMM_TM, "tn": tn, "wg": wg},
                 {"mode": MODE_OUTPUT, "r": r, "tm": GEMM_TM, "tn": TRANSFORM_TN, "wg": WG})
    return passes, chunk, constants


def record(call, shader: str, dtype: str, r: int, planned: tuple, x, u, b, y) -> None:
    """The dispatches of one run: three per pass over the tiles."""
    passes, chunk, (k_input, k_gemm, k_output) = planned
    a2, c4, m = (r + 2) ** 2, -(-x.shape[1] // 4) * 4, y.shape[1]
    v = call.scratch((a2, c4, chunk), "float32")
    z = call.scratch((a2, m, -(-chunk // 4) * 4), "float32")  # rows padded to 4 tiles (winograd.comp)
    tensors = {"x": x, "u": u, "b": b, "y": y, "v": v, "z": z}
    bias = [b] if b is not None else []
    for members, (g_input, g_gemm, g_output) in passes:
        push = {**members, **tensors}
        call.dispatch(shader, dtype, k_input, push, g_input, [x], [v])
        call.dispatch(shader, dtype, k_gemm, push, g_gemm, [u, v], [z])
        call.dispatch(shader, dtype, k_output, push, g_output, [z, *bias], [y])
