"""The com.microsoft ops of ORT's dynamically quantized transformers (quantize_dynamic over a model the
transformers optimizer fused, and ORT's level-2 optimizer after it): MatMulIntegerToFloat and
DynamicQuantizeMatMul (one class), QAttention and QEmbedLayerNormalization.

Each composes kernels vkep already has: the integer GEMM of matmul_integer.comp (its float32 mode, with a float
bias per column: what MLAS's scale-bias output processor computes), DynamicQuantizeLinear's two shaders,
ContribAttention's attention core, and EmbedLayerNormalization's shader (its 8-bit variant)."""

from __future__ import annotations

import math
import struct

from vkep.kernels.attention import ContribAttention
from vkep.kernels.base import LOOP_BUDGET, Kernel, Tensor, UnsupportedError, grid_1d, padded
from vkep.kernels.contrib import EmbedLayerNorm
from vkep.kernels.movement import host_values
from vkep.kernels.quantize import (
    MATMUL_TM,
    MATMUL_TN,
    _per_column,
    _scalar,
    dispatch_dynamic_quantize,
    saturating,
)

BIAS_PER_COLUMN_FLOAT = 5  # matmul_integer.comp's BIAS: a float32 bias per column added after the scaling


def dispatch_gemm_to_float(call, a: Tensor, b: Tensor, azp: Tensor | None, bzp: Tensor | None, a_scale: Tensor,
                           b_scale: Tensor, bias: Tensor | None, y: Tensor, geometry: dict[str, int],
                           as_uint8: bool = False) -> None:
    """y = float((A - azp)(B - bzp)) * (a_scale * b_scale) (+ bias per column), matmul_integer.comp's REQUANT 2.
    `geometry`: its m, n, k, batches, batch strides and zero point / scale steps; `as_uint8`: quantize.saturating's."""
    constants = {"a_signed": int(a.dtype == "int8"), "b_signed": int(b.dtype == "int8"), "requant": 2,
                 "saturate": saturating(a.dtype, b.dtype, as_uint8),
                 "y_signed": 0, "trans_a": 0, "trans_b": 0, "bias": BIAS_PER_COLUMN_FLOAT if bias is not None else 0}
    ins = {"a": a, "b": b, "azp": azp, "bzp": bzp, "a_scale": a_scale, "b_scale": b_scale, "y_scale": None,
           "yzp": None, "c": bias}
    tiles = geometry["batches"] * -(-geometry["m"] // MATMUL_TM) * -(-geometry["n"] // MATMUL_TN)
    call.dispatch("matmul_integer.comp", "float32", constants, {**ins, "y": y, **geometry, "a_zp_step": 0,
                                                                "alpha": 1.0},
                  grid_1d(tiles, 64), [t for t in ins.values() if t is not None], [y])


class IntegerMatMulToFloat(Kernel):
    """com.microsoft MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias) and
    DynamicQuantizeMatMul (A float32, B, b_scale, b_zero_point, bias: A
    quantized to uint8 as DynamicQuantizeLinear does). A [..., M, K] by B [K, N] (or the same batches); A's
    scale and zero point per tensor, B's per tensor or per column, bias [N], as ORT's CPU EP takes them. Also a
    QDQ group's kernel: DequantizeLinear -> MatMul without a QuantizeLinear (vkep/ort/qdq.py)."""

    as_uint8 = False  # int8 A computed as the uint8 ORT's CPU EP makes of it (quantize.MatMulInteger's)

    def compute(self, call) -> None:
        if self.spec.op == "DynamicQuantizeMatMul":
            a, b, b_scale, bzp, bias = padded(call.inputs, 5)
            a_scale = azp = None
        else:
            a, b, a_scale, b_scale, azp, bzp, bias = padded(call.inputs, 7)
            _scalar(a_scale, "a_scale", self.spec.op)
            _scalar(azp, "a_zero_point", self.spec.op)
        key = (a.shape, b.shape, *(t.shape if t is not None else None for t in (b_scale, bzp, bias)))
        out_shape, geometry = self.planned(key, lambda: self._plan(a.shape, b.shape, b_scale, bzp, bias))
        y = call.output(0, out_shape, "float32")
        if not y.size:
            return
        if a_scale is None:  # DynamicQuantizeMatMul: A's uint8 copy, then its scale (4 bytes) and zero point
            params = call.scratch((8,), "uint8")
            a_scale = Tensor(params.addr, (), "float32", params.io)
            azp = Tensor(params.addr + 4, (), "uint8", params.io)
            quantized = call.scratch(a.shape, "uint8")
            dispatch_dynamic_quantize(call, a, quantized, a_scale, azp)
            a = quantized
        dispatch_gemm_to_float(call, a, b, azp, bzp, a_scale, b_scale, bias, y, geometry, self.as_uint8)

    def _plan(self, sa: tuple[int, ...], sb: tuple[int, ...], b_scale, bzp, bias) -> tuple:
        op = self.spec.op
        if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
            raise UnsupportedError(f"{op} of {sa} and {sb}")
        m, k, n = sa[-2], sa[-1], sb[-1]
        if len(sb) == 2:
            batch_shape, a_stride, b_stride = sa[:-2], m * k, 0
        elif sb[:-2] == sa[:-2]:
            batch_shape, a_stride, b_stride = sa[:-2], m * k, k * n
        else:
            raise UnsupportedError(f"{op}: batch dimensions of {sa} and {sb}")
        if k > LOOP_BUDGET:
            raise UnsupportedError(f"{op}: K={k} past one invocation's loop budget")
        if bias is not None and bias.shape != (n,):
            raise UnsupportedError(f"{op}: bias of shape {bias.shape} for N = {n}")
        bzp_steps = _per_column(bzp, sb, "b_zero_point", op)
        bs_steps = _per_column(b_scale, sb, "b_scale", op)
        geometry = {"m": m, "n": n, "k": k, "batches": math.prod(batch_shape), "a_batch_stride": a_stride,
                    "b_batch_stride": b_stride, "bzp_step": bzp_steps[0], "bzp_batch_step": bzp_steps[1],
                    "bs_step": bs_steps[0], "bs_batch_step": bs_steps[1]}
        return batch_shape + (m, n), geometry


class QAttention(ContribAttention):
    """com.microsoft QAttention (input uint8, weight 8-bit, bias, input_scale, weight_scale, mask_index,
    input_zero_point, weight_zero_point): each of Q, K and V is the integer GEMM of the input and its block of
    the packed weight, scaled by input_scale * weight_scale (per tensor or per column) with its bias added, as
    ORT's CPU EP computes it; then ContribAttention's mask and attention, with its past and present."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 9)
        if ranks[0] not in (3, -1) or ranks[1] not in (2, -1):
            return f"input of rank {ranks[0]} / weights of rank {ranks[1]}"
        if ranks[8] not in (None, 5, -1):
            return f"a past of rank {ranks[8]}"
        if ranks[5] not in (None, 1, 2, 3):
            return f"a mask_index of rank {ranks[5]}"
        return None

    def compute(self, call) -> None:
        x, w, bias, x_scale, w_scale, mask, xzp, wzp, past = padded(call.inputs, 9)
        _scalar(x_scale, "input_scale", "QAttention")
        _scalar(xzp, "input_zero_point", "QAttention")
        columns = w.size // x.shape[-1] if x.shape and x.shape[-1] else 0  # (w is packed: 1-D)
        steps = []
        for t, what in ((wzp, "weight_zero_point"), (w_scale, "weight_scale")):
            if t is not None and t.size != 1 and t.shape != (columns,):
                raise UnsupportedError(f"QAttention: {what} of shape {t.shape} for {columns} weight columns")
            steps.append(int(t is not None and t.size != 1))

        def project(a: Tensor, b: Tensor, c: Tensor | None, out: Tensor, offset: int) -> None:
            # (a per-column scale or zero point: the projection's slice of it)
            scale = Tensor(w_scale.addr + 4 * offset * steps[1], (), "float32", w_scale.io)
            zp = None if wzp is None else Tensor(wzp.addr + offset * steps[0], (), wzp.dtype, wzp.io)
            m, k, n = a.shape[0], a.shape[1], b.shape[1]
            if k > LOOP_BUDGET:
                raise UnsupportedError(f"QAttention: input hidden size {k} past one invocation's loop budget")
            geometry = {"m": m, "n": n, "k": k, "batches": 1, "a_batch_stride": 0, "b_batch_stride": 0,
                        "bzp_step": steps[0], "bzp_batch_step": 0, "bs_step": steps[1], "bs_batch_step": 0}
            dispatch_gemm_to_float(call, a, b, xzp, zp, x_scale, scale, c, out, geometry)

        self._attend(call, x, w, bias, mask, None, project, past)


class QEmbedLayerNorm(EmbedLayerNorm):
    """com.microsoft QEmbedLayerNormalization (input_ids, segment_ids, the 8-bit word, position and segment
    tables, gamma and beta, mask, then their scales and zero points, per tensor): EmbedLayerNormalization's
    shader reading each table element as the CPU EP dequantizes it, float(q - zero_point) * scale (QUANT). The
    scales and zero points are CPU inputs (constants in the models quantize_dynamic writes), handed to the shader
    as one persistent table: only the rows the ids name are read."""

    def compute(self, call) -> None:
        ins = padded(call.inputs, 18)
        ids, segment_ids, mask = ins[0], ins[1], ins[7]
        tables, scales, zero_points = ins[2:7], ins[8:13], ins[13:18]
        values = [0.0] * 5, [0] * 5
        for i, table in enumerate(tables):
            if table is None:
                continue
            if scales[i] is None:
                raise UnsupportedError(f"QEmbedLayerNormalization: table {i + 2} without its scale")
            _scalar(scales[i], "a scale", "QEmbedLayerNormalization")
            _scalar(zero_points[i], "a zero point", "QEmbedLayerNormalization")
            values[0][i] = host_values(call, scales[i])[0]
            values[1][i] = (host_values(call, zero_points[i]) or [0])[0]
        params = call.persistent(struct.pack("<5f5i", *values[0], *values[1]))
        quant = 2 if tables[0].dtype == "int8" else 1
        self.embed(call, ids, segment_ids, *tables, mask, None, quant=quant, params=params)
