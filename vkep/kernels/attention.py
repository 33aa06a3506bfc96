"""ONNX Attention (opset 23 and 24) as one fused dispatch (attention.comp), plus one dispatch per present
KV cache output. Follows onnx's reference implementation: bottom-right causal alignment, keys past a
short attn_mask masked, fully-masked rows give zeros, float16 rounded where the reference rounds.

Two deliberate differences from the reference: qk_matmul_output mode 0 is q.k before softcap (the spec's
wording and ORT's CPU EP; the reference softcaps it), and keys that the bias masks are not scored (keys
past the causal frontier or past nonpad_kv_seqlen are not read at all), so a non-finite key there (an
unwritten cache slot) cannot turn a row into NaN as it would in the reference."""

from __future__ import annotations

import math

import numpy as np

from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    Tensor,
    UnsupportedError,
    float_bits,
    grid_1d,
    pack,
    padded,
    shader_dtype,
)
from vkep.kernels.elementwise import broadcast_strides

CHUNK = 2048  # keys whose scores stay in shared memory (attention.comp)
MAX_D = 512  # Q/K head size held in shared memory
MAX_R = 4  # output columns per thread
WG_SIZES = (64, 256)
FLOAT16, FLOAT32, FLOAT64 = 10, 1, 11  # ONNX TensorProto element types for softmax_precision
QK_NONE = 4
COPY_WG = 256


def _float_bits(x: float, dtype: str) -> int:
    """x in the precision of the reference (it casts sqrt(scale) to T1), as float32 bits."""
    return float_bits(float(np.float16(x)) if dtype == "float16" else x)


def _mask_strides(shape: tuple[int, ...], batch: int, heads: int, sq: int, total: int) -> tuple[int, int, int, int]:
    """(length, batch, head, query strides) of attn_mask broadcast right-aligned to [B, Hq, Sq, length]."""
    if not 1 <= len(shape) <= 4:
        raise UnsupportedError(f"Attention: attn_mask of rank {len(shape)}")
    length = shape[-1]
    if length > total:
        raise UnsupportedError(f"Attention: attn_mask has {length} keys, the keys are {total}")
    mb, mh, mq = (1,) * (4 - len(shape)) + tuple(shape[:-1])
    for got, want in ((mb, batch), (mh, heads), (mq, sq)):
        if got not in (1, want):
            raise UnsupportedError(f"Attention: attn_mask {shape} does not broadcast to [{batch}, {heads}, {sq}, *]")
    sb_stride, sh_stride, sq_stride, _ = broadcast_strides(shape, (batch, heads, sq, length))
    return length, sb_stride, sh_stride, sq_stride


def _workgroup(total: int, d: int, dv: int) -> int:
    """The smallest workgroup whose per-invocation loops stay within lavapipe's loop budget."""
    for wg in WG_SIZES:
        dw = min(dv, wg)
        passes = 1 if total <= CHUNK else 2  # long rows compute their scores twice
        # score loops (d each), the weighted sum (counted as if its MAX_R loop were not unrolled), the sums
        loops = passes * -(-total // wg) * (d + 2) + MAX_R * -(-total // (wg // dw)) + 2 * -(-total // wg) + 64
        if loops <= LOOP_BUDGET:
            return wg
    raise UnsupportedError(f"Attention: {total} keys of head size {d} exceed one workgroup's loop budget")


def present_copy(batch: int, heads: int, width: int, rows: int, cache_len: int, new: int,
                 total: int) -> tuple[int, bytes]:
    """(elements, push-constant tail) of a MODE 1 dispatch writing present [batch, heads, total, width]: the first
    `rows` rows of a past cache of `cache_len` rows, then `new` rows of the new K or V, then zeros."""
    n = batch * heads * total * width
    return n, pack("12IiI", n, heads, 1, cache_len, new, rows, width, total, 0, 0, 0, 0, 0, 0)


class Attention(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 7)
        if ranks[0] == 3 and (attrs.get("q_num_heads") is None or attrs.get("kv_num_heads") is None):
            return "3-D inputs need q_num_heads and kv_num_heads"
        if ranks[0] not in (3, 4, -1):
            return f"Q of rank {ranks[0]}"
        if ranks[3] is not None and ranks[3] > 4:
            return f"attn_mask of rank {ranks[3]}"
        if (ranks[4] is None) != (ranks[5] is None):
            return "past_key and past_value must be given together"
        if ranks[6] is not None and ranks[4] is not None:
            return "nonpad_kv_seqlen with a past KV cache"
        if attrs.get("softmax_precision") not in (None, FLOAT16, FLOAT32, FLOAT64):
            return f"softmax_precision {attrs.get('softmax_precision')}"
        if attrs.get("scale") is not None and attrs["scale"] < 0:
            return "a negative scale (Q and K are each scaled by sqrt(scale))"
        if attrs.get("qk_matmul_output_mode", 0) not in (0, 1, 2, 3):
            return f"qk_matmul_output_mode {attrs.get('qk_matmul_output_mode')}"
        types = {t for i, t in enumerate(input_types) if i in (0, 1, 2, 4, 5) and t is not None}
        if len(types) > 1:
            return f"mixed element types {sorted(types)} for Q/K/V (T1 != T2)"
        return None

    def compute(self, call) -> None:
        inputs = padded(call.inputs, 7)
        q, k, v, mask, past_k, past_v, nonpad = inputs[:7]
        dtype = shader_dtype(q)
        for t in (k, v, past_k, past_v):
            if t is not None and t.dtype != dtype:
                raise UnsupportedError(f"Attention: mixed element types {dtype} and {t.dtype}")
        if (past_k is None) != (past_v is None):
            raise UnsupportedError("Attention: past_key and past_value must be given together")
        plan = self.planned(tuple(None if t is None else (t.shape, t.dtype) for t in inputs), lambda: self._plan(inputs))
        (y_shape, pk_shape, pv_shape, qk_shape, constants, tail, rows, wg, copies) = plan

        y = call.output(0, y_shape)
        count = self.output_count or 1
        present_k = call.output(1, pk_shape) if count > 1 else None
        present_v = call.output(2, pv_shape) if count > 2 else None
        qk = call.output(3, qk_shape) if count > 3 else None
        present_k = present_k if present_k is not None and present_k.addr else None
        present_v = present_v if present_v is not None and present_v.addr else None
        qk = qk if qk is not None and qk.addr else None
        if y.size == 0:
            return
        qk_mode = self.attrs.get("qk_matmul_output_mode", 0) if qk is not None else QK_NONE
        constants = constants[:5] + (qk_mode,) + constants[6:]
        reads = [t for t in (q, k, v, mask, past_k, past_v, nonpad) if t is not None]
        call.dispatch(self.spec.shader, dtype if mask is None else (dtype, shader_dtype(mask)), constants,
                      [q, k, v, mask, past_k, past_v, nonpad, y, qk], tail, grid_1d(rows, 1), reads,
                      [t for t in (y, qk) if t is not None])
        # present_key / present_value: past and new keys (values) concatenated along the sequence axis
        for present, past, new, (n, args) in zip((present_k, present_v), (past_k, past_v), (k, v), copies,
                                                 strict=True):
            if present is None or n == 0:
                continue
            src = [t for t in (past, new) if t is not None]
            vec4 = constants[11]  # head sizes are multiples of 4: an invocation copies 4 elements
            call.dispatch(self.spec.shader, dtype, (1, COPY_WG) + constants[2:], [None, new, None, None, past, None,
                          None, present, None], args, grid_1d(n // (4 if vec4 else 1), COPY_WG), src, [present])

    def _plan(self, inputs: list[Tensor | None]) -> tuple:
        q, k, v, mask, past_k, past_v, nonpad = inputs[:7]
        rank = len(q.shape)
        if rank != len(k.shape) or rank != len(v.shape) or rank not in (3, 4):
            raise UnsupportedError(f"Attention: Q {q.shape}, K {k.shape}, V {v.shape}")
        if rank == 3:
            hq, hkv = self.attrs.get("q_num_heads"), self.attrs.get("kv_num_heads")
            if not hq or not hkv or q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
                raise UnsupportedError(f"Attention: 3-D Q {q.shape}, K {k.shape}, V {v.shape} do not split into "
                                       f"{hq} and {hkv} heads")
            batch, sq, d = q.shape[0], q.shape[1], q.shape[2] // hq
            kv_new, dv = k.shape[1], v.shape[2] // hkv
            if k.shape[2] // hkv != d or v.shape[1] != kv_new:
                raise UnsupportedError(f"Attention: K {k.shape} / V {v.shape} do not match Q {q.shape}")
        else:
            batch, hq, sq, d = q.shape
            hkv, kv_new, dv = k.shape[1], k.shape[2], v.shape[3]
            if k.shape[3] != d or v.shape[:3] != k.shape[:3]:
                raise UnsupportedError(f"Attention: K {k.shape} / V {v.shape} do not match Q {q.shape}")
        if k.shape[0] != batch or v.shape[0] != batch or hkv == 0 or hq % hkv:
            raise UnsupportedError(f"Attention: {hq} query heads do not group over {hkv} KV heads")
        past = 0
        if past_k is not None:
            past = past_k.shape[2]
            if (len(past_k.shape) != 4 or past_k.shape != (batch, hkv, past, d)
                    or past_v.shape != (batch, hkv, past, dv)):
                raise UnsupportedError(f"Attention: past_key {past_k.shape} / past_value {past_v.shape}")
        total = past + kv_new
        if d > MAX_D or dv > MAX_R * WG_SIZES[-1]:
            raise UnsupportedError(f"Attention: head sizes {d} / {dv} (at most {MAX_D})")
        if nonpad is not None and (nonpad.dtype != "int64" or nonpad.size != batch):
            raise UnsupportedError(f"Attention: nonpad_kv_seqlen {nonpad.shape} {nonpad.dtype}")
        wg = _workgroup(total, d, dv)
        if dv > MAX_R * wg:
            raise UnsupportedError(f"Attention: V head size {dv} (at most {MAX_R * wg})")
        mask_args = (0, 0, 0, 0) if mask is None else _mask_strides(mask.shape, batch, hq, sq, total)

        dtype = q.dtype
        scale = self.attrs.get("scale")
        scale = 1.0 / math.sqrt(d) if scale is None else scale
        precision = self.attrs.get("softmax_precision")
        round16 = int(dtype == "float16")
        softmax16 = int(round16 and precision in (None, FLOAT16))
        softcap = float(self.attrs.get("softcap") or 0.0)
        constants = (0, wg, int(rank == 3), int(bool(self.attrs.get("is_causal", 0))), int(mask is not None),
                     QK_NONE, round16, softmax16, _float_bits(math.sqrt(scale), dtype),
                     _float_bits(softcap, "float32") if softcap > 0 else 0, int(nonpad is not None),
                     int(d % 4 == 0 and dv % 4 == 0), 0)
        rows = batch * hq * sq
        tail = pack("12IiI", rows, hq, hq // hkv, sq, kv_new, past, d, dv, *mask_args, past, 0)
        y_shape = (batch, sq, hq * dv) if rank == 3 else (batch, hq, sq, dv)
        copies = [present_copy(batch, hkv, width, past, past, kv_new, total) for width in (d, dv)]
        return (y_shape, (batch, hkv, total, d), (batch, hkv, total, dv), (batch, hq, sq, total), constants, tail,
                rows, wg, copies)
