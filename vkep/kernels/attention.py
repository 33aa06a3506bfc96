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
    ITEMSIZE,
    LOOP_BUDGET,
    Kernel,
    Redirect,
    Tensor,
    UnsupportedError,
    float_bits,
    grid_1d,
    holds_constant,
    implementation,
    onnx_spec,
    padded,
    shader_dtype,
)
from vkep.kernels.elementwise import Float32Outputs, as_float32, broadcast_strides
from vkep.kernels.matmul import MAX_LOOP, product, product_members, tiled_loops
from vkep.kernels.movement import dispatch_gather

CHUNK = 2048  # keys whose scores stay in shared memory (attention.comp)
MAX_D = 512  # Q/K head size held in shared memory
MAX_R = 4  # output columns per thread
WG_SIZES = (64, 256)
FLOAT16, FLOAT32, FLOAT64 = 10, 1, 11  # ONNX TensorProto element types for softmax_precision
QK_NONE = 4
COPY_WG = 256
# the product path's scores [B, Hq, Sq, keys] in scratch memory: at most this many bytes (past it, and for the
# forms it does not take, one workgroup a query row computes everything: attention.comp MODE 0)
SCORES_MAX = 1 << 26
SERIAL_ROWS = 512  # score rows from which MODE 3 (an invocation a row) normalises them, not MODE 2
PRODUCT_ROWS = 32  # a KV head's query rows from which the products take an attention (fewer: MODE 0)
SHADER = "attention.comp"


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


def mask_members(strides: tuple[int, int, int, int]) -> dict[str, int]:
    """attention.comp's attn_mask members from _mask_strides (all 0 without a mask)."""
    return dict(zip(("mask_len", "mask_sb", "mask_sh", "mask_sq"), strides, strict=True))


def present_copy(batch: int, heads: int, width: int, rows: int, cache_len: int, new: int,
                 total: int) -> tuple[int, dict]:
    """(elements, push members but k, past_k and y) of a MODE 1 dispatch writing present [batch, heads, total,
    width] (into y): the first `rows` rows of a past cache (past_k) of `cache_len` rows, then `new` rows of the new
    K or V (k), then zeros. MODE 1 reads sq as the past cache's length and dv as present's."""
    n = batch * heads * total * width
    return n, {"q": None, "v": None, "mask": None, "past_v": None, "aux": None, "qk": None, "rows": n, "hq": heads,
               "group": 1, "sq": cache_len, "kv_new": new, "past": rows, "d": width, "dv": total,
               **mask_members((0, 0, 0, 0)), "offset": 0, "window": 0}


def products_fit(q: Tensor, constants: dict, members: dict) -> bool:
    """Whether by_products takes an attention (no past or qk output asked): float32 without softcap or a sink, a
    KV head's query rows enough for a product (a decode step's few rows: MODE 0 reads only the keys it attends),
    keys to attend, and scores of at most SCORES_MAX bytes, keys that one dispatch of a product sums (more: MODE 0)."""
    p = members
    keys = _attended_keys(constants, members)
    return (q.dtype == "float32" and not constants["softcap_bits"] and not constants["sink"] and keys > 0
            and p["group"] * p["sq"] >= PRODUCT_ROWS and 4 * p["rows"] * keys <= SCORES_MAX
            and tiled_loops(keys) <= MAX_LOOP)  # (the weighted values' K: summed in one dispatch in any mode)


def _attended_keys(constants: dict, members: dict) -> int:
    """How many of the first keys the causal frontier lets any query row attend (all without one; nonpad_kv_seqlen
    moves the frontier at run time): the products stop there, the rest are masked anyway."""
    p = members
    total = p["past"] + p["kv_new"]
    causal = constants["causal"]
    if causal == 0 or constants["nonpad"]:
        return total
    last = p["sq"] - 1 + p["offset"] if causal == 1 else p["offset"]
    return max(0, min(total, last + 1))


def by_products(kernel: Kernel, call, q: Tensor, k: Tensor, v: Tensor, y: Tensor, mask: Tensor | None,
                aux: Tensor | None, constants: dict, members: dict, scale: float, kv_3d: bool) -> None:
    """softmax(Q K^T * scale + bias) V as two products of the MatMul kernel (its tiles read Q, K and V along rows,
    20-100x the speed of MODE 0's workgroup a query row on lavapipe) around attention.comp MODE 2 or 3, which bias
    the score rows as MODE 0 does (`members`' masks, frontier, window; `aux` nonpad_kv_seqlen) and replace them by
    their softmax in place. Q and Y are [B, S, Hq * D] (constants' layout3d) or [B, Hq, S, D]; K and V [B, T, Hkv *
    D] (kv_3d) or [B, Hkv, T, D], T = members' past + kv_new. A KV head's query heads are one block of group * S
    rows: 3-D Q with more query heads than KV heads is first gathered into [B, Hq, S, D]."""
    p = members
    hq, group, sq, d, dv = p["hq"], p["group"], p["sq"], p["d"], p["dv"]
    total, batch, hkv, layout3d = p["past"] + p["kv_new"], p["rows"] // (hq * sq), hq // group, constants["layout3d"]
    keys = _attended_keys(constants, members)  # (K and V hold `total` rows a head; the products read `keys`)
    q_3d = layout3d and group == 1  # (read in place: a head a batch index, its rows heads * D apart)
    if layout3d and group > 1:
        q4 = call.scratch((batch, hq, sq, d), "float32")
        dispatch_gather(call, q, q4, (batch, hq, sq, d), [sq * hq * d, d, hq * d, 1])
        q = q4
    a = (sq * hq * d, d, hq * d, 1) if q_3d else (hq * sq * d, group * sq * d, d, 1)
    b = (total * hkv * d, d, 1, hkv * d) if kv_3d else (hkv * total * d, total * d, 1, d)
    scores = call.scratch((batch * hkv, group * sq, keys), "float32")
    product(kernel, call, q, k, scores, product_members(group * sq, keys, d, batch_inner=hkv, a=a, b=b, alpha=scale),
            batches=batch * hkv)
    # many rows: an invocation walks a row (lavapipe: 1.5x the workgroup a row); few: a workgroup a row
    serial = p["rows"] >= SERIAL_ROWS and 3 * keys <= LOOP_BUDGET
    wg = 64 if serial else WG_SIZES[0] if 3 * -(-keys // WG_SIZES[0]) <= LOOP_BUDGET else WG_SIZES[-1]
    call.dispatch(SHADER, "float32" if mask is None else ("float32", shader_dtype(mask)),
                  {**constants, "mode": 3 if serial else 2, "local_size_x": wg},
                  {**members, "past": 0 if p["past"] == 0 else keys, "kv_new": keys if p["past"] == 0 else 0,
                   "q": None, "k": None, "v": None, "past_k": None, "past_v": None, "y": None,
                   "mask": mask, "aux": aux, "qk": scores}, grid_1d(p["rows"], wg if serial else 1),
                  [t for t in (scores, mask, aux) if t is not None], [scores])
    out = call.scratch((batch, hq, sq, dv), "float32") if layout3d else y
    values = (total * hkv * dv, dv, hkv * dv, 1) if kv_3d else (hkv * total * dv, total * dv, dv, 1)
    pv = product_members(group * sq, dv, keys, batch_inner=hkv, a=(hq * sq * keys, group * sq * keys, keys, 1),
                         b=values)
    product(kernel, call, scores, v, Tensor(out.addr, (batch * hkv, group * sq, dv), "float32", out.io), pv,
            batches=batch * hkv)
    if layout3d:  # [B, heads, S, Dv] into Y [B, S, heads * Dv]
        dispatch_gather(call, out, y, (batch, sq, hq, dv), [hq * sq * dv, dv, sq * dv, 1])


class Attention(Kernel):
    # the mask holds (bias, mask) pairs, added one after the other (attention.comp MASK 2): com.microsoft Attention's
    # attention_bias and mask_index, as its CPU EP adds them
    mask_pairs = False

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
        (y_shape, pk_shape, pv_shape, qk_shape, constants, members, rows, wg, copies) = plan

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
        constants = {**constants, "qk_mode": qk_mode}
        reads = [t for t in (q, k, v, mask, past_k, past_v, nonpad) if t is not None]
        scale = self.attrs.get("scale")
        if past_k is None and qk is None and products_fit(q, constants, members):
            by_products(self, call, q, k, v, y, mask, nonpad, constants, members,
                        1.0 / math.sqrt(members["d"]) if scale is None else scale, kv_3d=bool(constants["layout3d"]))
        else:
            call.dispatch(self.spec.shader, dtype if mask is None else (dtype, shader_dtype(mask)), constants,
                          {**members, "q": q, "k": k, "v": v, "mask": mask, "past_k": past_k, "past_v": past_v,
                           "aux": nonpad, "y": y, "qk": qk}, grid_1d(rows, 1), reads,
                          [t for t in (y, qk) if t is not None])
        # present_key / present_value: past and new keys (values) concatenated along the sequence axis
        for present, past, new, (n, copy) in zip((present_k, present_v), (past_k, past_v), (k, v), copies,
                                                 strict=True):
            if present is None or n == 0:
                continue
            src = [t for t in (past, new) if t is not None]
            vec4 = constants["vec4"]  # head sizes are multiples of 4: an invocation copies 4 elements
            call.dispatch(self.spec.shader, dtype, {**constants, "mode": 1, "local_size_x": COPY_WG},
                          {**copy, "k": new, "past_k": past, "y": present}, grid_1d(n // (4 if vec4 else 1), COPY_WG),
                          src, [present])

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
        constants = {"mode": 0, "local_size_x": wg, "layout3d": int(rank == 3),
                     "causal": int(bool(self.attrs.get("is_causal", 0))),
                     "mask": (2 if self.mask_pairs else 1) if mask is not None else 0,
                     "qk_mode": QK_NONE, "round16": round16, "softmax16": softmax16,
                     "scale_bits": _float_bits(math.sqrt(scale), dtype),
                     "softcap_bits": _float_bits(softcap, "float32") if softcap > 0 else 0,
                     "nonpad": int(nonpad is not None), "vec4": int(d % 4 == 0 and dv % 4 == 0), "sink": 0}
        rows = batch * hq * sq
        members = {"rows": rows, "hq": hq, "group": hq // hkv, "sq": sq, "kv_new": kv_new, "past": past, "d": d,
                   "dv": dv, **mask_members(mask_args), "offset": past, "window": 0}
        y_shape = (batch, sq, hq * dv) if rank == 3 else (batch, hq, sq, dv)
        copies = [present_copy(batch, hkv, width, past, past, kv_new, total) for width in (d, dv)]
        return (y_shape, (batch, hkv, total, d), (batch, hkv, total, dv), (batch, hq, sq, total), constants,
                members, rows, wg, copies)


def _halves(t: Tensor, shape: tuple[int, ...]) -> list[Tensor]:
    """Views of a [2, *shape] float32 tensor (com.microsoft Attention's past and present): keys, then values."""
    size = 4 * math.prod(shape)
    return [t.view(size * i, shape) for i in (0, 1)]


class ContribAttention(Kernel):
    """com.microsoft Attention (BERT exports of ORT's transformer optimizer): Q, K and V projected by one
    packed weight (matmul.comp through the Gemm kernel, one dispatch each), the mask_index (right/left padding
    ends, raw 2-D or 3-D masks), unidirectional and attention_bias merged into one additive mask as ORT's CPU
    EP does (attention_mask.comp: masked keys get mask_filter_value, not -inf), then ONNX Attention's
    attention.comp over [B, S, heads * head size], with `past` [2, B, heads, P, head size] (GPT-2 exports) read as
    its past keys and values and `present` [2, B, heads, P + S, head size] written as its present ones. Left to the
    CPU EP: past_sequence_length, 4-D masks, do_rotary, past_present_share_buffer, the qk output, Q and K of
    different hidden sizes."""

    w_packed = False

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 7)
        if ranks[0] not in (3, -1) or ranks[1] not in (2, -1):
            return f"input of rank {ranks[0]} / weights of rank {ranks[1]}"
        if ranks[6] is not None:
            return "the past_sequence_length input"
        if ranks[4] not in (None, 5, -1):
            return f"a past of rank {ranks[4]}"
        if ranks[3] not in (None, 1, 2, 3):
            return f"a mask_index of rank {ranks[3]}"
        if ranks[5] not in (None, 4, -1):
            return f"an attention_bias of rank {ranks[5]}"
        if attrs.get("do_rotary") or attrs.get("past_present_share_buffer"):
            return "do_rotary / past_present_share_buffer"
        if (attrs.get("scale") or 0.0) < 0:
            return "a negative scale (attention.comp scales Q and K by sqrt(scale))"
        sizes = attrs.get("qkv_hidden_sizes") or []
        if sizes and (len(sizes) != 3 or sizes[0] != sizes[1]):
            return f"qkv_hidden_sizes {sizes} (Q and K of the same size only)"
        return None

    def pack(self, index: int, weight):
        """The weights [K, Q + K + V columns] as three contiguous [K, columns] blocks, one per projection (float16
        ones as float32: a float16 node computes in float32, _attend)."""
        if index != 1 or weight.ndim != 2:
            return weight, "raw"
        self.w_packed = True
        ends = np.cumsum(self._sizes(weight.shape[1]))
        blocks = np.split(weight, ends[:-1], axis=1)
        packed = np.concatenate([np.ascontiguousarray(b).ravel() for b in blocks])
        return (packed.astype(np.float32) if packed.dtype == np.float16 else packed), "attention-qkv-blocks"

    def _sizes(self, columns: int) -> list[int]:
        sizes = list(self.attrs.get("qkv_hidden_sizes") or [])
        if not sizes:
            if columns % 3:
                raise UnsupportedError(f"Attention: {columns} weight columns do not split into Q, K and V")
            sizes = [columns // 3] * 3
        if sum(sizes) != columns:
            raise UnsupportedError(f"Attention: qkv_hidden_sizes {sizes} for {columns} weight columns")
        return sizes

    def _parts(self) -> tuple[Kernel, Kernel]:
        parts = self.__dict__.get("_composed")
        if parts is None:
            gemm = implementation(onnx_spec("Gemm"))(onnx_spec("Gemm"),
                                                     {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}, 13,
                                                     ["float32"] * 3)
            heads = self.attrs["num_heads"]
            scale = self.attrs.get("scale") or None  # (0: 1 / sqrt(head size), as ONNX's Attention's default)
            attention = Attention(onnx_spec("Attention"), {"q_num_heads": heads, "kv_num_heads": heads, "scale": scale,
                                                       "is_causal": 0, "softcap": 0.0, "softmax_precision": None,
                                                       "qk_matmul_output_mode": 0}, 23, ["float32"] * 4)
            for part in (gemm, attention):
                part.device_info, part.output_count = self.device_info, 1
            parts = self.__dict__["_composed"] = (gemm, attention)
        return parts

    def compute(self, call) -> None:
        x, w, bias, mask, past, attn_bias, _ = padded(call.inputs, 7)
        gemm = self._parts()[0]

        def project(a: Tensor, b: Tensor, c: Tensor | None, out: Tensor, offset: int) -> None:
            plan = gemm.planned((a.shape, b.shape, c.shape if c else None),
                                lambda: gemm._plan(a.shape, b.shape, c.shape if c else None))
            gemm._record(Redirect(call, [a, b, c], out), a, b, c, *plan)

        self._attend(call, x, w, bias, mask, attn_bias, project, past)

    def _attend(self, call, x: Tensor, w: Tensor, bias: Tensor | None, mask: Tensor | None,
                attn_bias: Tensor | None, project, past: Tensor | None = None) -> None:
        """Q, K and V by `project(a, b, c, out, offset)` (input rows by one projection's packed weight block,
        its bias, into its block of the scratch; offset: the projection's first column), then the attention over
        the past keys and values and the new ones, writing the present ones where the node has that output."""
        if not self.w_packed and (w.addr or not holds_constant(call, w)):
            # (planning at GetCapability runs before packing, at address 0: the graph says whether it will pack)
            raise UnsupportedError("Attention: weights that are not constant (they are packed per projection)")
        if len(x.shape) != 3:
            raise UnsupportedError(f"Attention: input {x.shape}")
        if x.dtype == "float16":  # (ORT's optimizer with --float16): in float32, the outputs cast to float16 last
            x, bias, attn_bias, past = (as_float32(call, t) for t in (x, bias, attn_bias, past))
            call = Float32Outputs(call)
            self._attend(call, x, w, bias, mask, attn_bias, project, past)
            return call.finish()
        batch, seq, hidden = x.shape
        heads = self.attrs["num_heads"]
        sizes = self._sizes(w.size // hidden if hidden else 0)
        if w.size != hidden * sum(sizes) or heads <= 0 or any(s % heads for s in sizes):
            raise UnsupportedError(f"Attention: weights of {w.size} elements for input {x.shape}, sizes {sizes}")
        if bias is not None and bias.shape != (sum(sizes),):
            raise UnsupportedError(f"Attention: bias {bias.shape}")
        attention = self._parts()[1]
        rows = batch * seq
        qkv = call.scratch((rows * sum(sizes),), "float32")
        a = Tensor(x.addr, (rows, hidden), x.dtype, x.io)
        views, offset = [], 0
        for size in sizes:
            b = Tensor(w.addr + ITEMSIZE[w.dtype] * hidden * offset, (hidden, size), w.dtype, w.io)
            c = Tensor(bias.addr + 4 * offset, (size,), bias.dtype, bias.io) if bias is not None else None
            out = Tensor(qkv.addr + 4 * rows * offset, (rows, size), "float32", qkv.io)
            if rows and hidden:
                project(a, b, c, out, offset)
            views.append(Tensor(out.addr, (batch, seq, size), "float32", out.io))
            offset += size
        past_kv, present_kv, past_len = self._cache(call, past, batch, heads, seq, sizes)
        additive, attention.mask_pairs = self._mask(call, mask, attn_bias, batch, heads, seq, past_len)
        attention.output_count = 3 if present_kv else 1
        attention.compute(Redirect(call, [*views, additive, *past_kv, None], dict(enumerate(present_kv, 1))))

    def _cache(self, call, past: Tensor | None, batch: int, heads: int, seq: int,
               sizes: list[int]) -> tuple[list, list, int]:
        """([past keys, past values] as views of `past` (Nones without one), [present keys, present values] as
        views of output 1 (empty where the node has no present), the past's length)."""
        head = sizes[1] // heads
        past_len = 0
        if past is not None:
            if len(past.shape) != 5 or past.shape[:3] != (2, batch, heads) or past.shape[4] != head or sizes[1] != sizes[2]:
                raise UnsupportedError(f"Attention: past {past.shape} for batch {batch}, {heads} heads of K {head}, "
                                       f"V {sizes[2] // heads}")
            past_len = past.shape[3]
        past_kv = _halves(past, (batch, heads, past_len, head)) if past_len else [None, None]
        if (self.output_count or 1) < 2:
            if past is not None:  # (ORT's CPU EP fails such a run: "Expect to have present state output")
                raise UnsupportedError("Attention: a past input without the present output")
            return past_kv, [], past_len
        if sizes[1] != sizes[2]:
            raise UnsupportedError(f"Attention: a present output for K and V of sizes {sizes[1:]}")
        total = past_len + seq
        present = call.output(1, (2, batch, heads, total, head))
        return past_kv, _halves(present, (batch, heads, total, head)), past_len

    def _mask(self, call, mask: Tensor | None, attn_bias: Tensor | None, batch: int, heads: int, seq: int,
              past: int) -> tuple[Tensor | None, bool]:
        """The additive mask attention.comp adds to the scaled scores (keys: the past's, then the new ones), and
        whether it holds pairs: attention_bias as it is, the mask_index's (and causal) filter values, or with both
        (attention_bias, filter) pairs, added to the score in that order as the CPU EP adds them (at -10000 the sum
        rounds to 1e-3: a row the mask covers everywhere is the softmax of those roundings)."""
        total = past + seq
        causal = bool(self.attrs.get("unidirectional", 0)) and seq > 1
        if mask is None and not causal:
            return attn_bias, False
        kind = 0
        if mask is not None:
            shapes = {1: ((batch,), (2 * batch,)), 2: ((batch, total),), 3: ((batch, seq, total),)}
            if mask.shape not in shapes.get(len(mask.shape), ()):
                raise UnsupportedError(f"Attention: mask_index {mask.shape} for batch {batch}, {seq} x {total}")
            kind = {1: 1 if mask.shape == (batch,) else 2, 2: 3, 3: 4}[len(mask.shape)]
        bias_sb = bias_sh = 0
        bias_heads = 1
        if attn_bias is not None:
            bs = attn_bias.shape
            if len(bs) != 4 or bs[0] not in (1, batch) or bs[1] not in (1, heads) or bs[2:] != (seq, total):
                raise UnsupportedError(f"Attention: attention_bias {bs}")
            bias_heads = bs[1]
            bias_sh = seq * total if bs[1] > 1 else 0
            bias_sb = bs[1] * seq * total if bs[0] > 1 else 0
        pairs = attn_bias is not None
        shape = (batch, bias_heads, seq, total)
        out = call.scratch((*shape, 2) if pairs else shape, "float32")
        n = math.prod(shape)
        if n:
            filter_value = self.attrs.get("mask_filter_value")
            filter_value = -10000.0 if filter_value is None else filter_value
            call.dispatch("attention_mask.comp", "float32", {"kind": kind, "causal": int(causal), "pairs": int(pairs)},
                          {"mask_index": mask, "attention_bias": attn_bias, "y": out, "n": n, "heads": bias_heads,
                           "s": seq, "t": total, "past": past, "bias_sb": bias_sb, "bias_sh": bias_sh,
                           "filter_value": filter_value}, grid_1d(n, 256),
                          [t for t in (mask, attn_bias) if t is not None], [out])
        return (out.view(0, shape) if pairs else out), pairs  # (pairs: attention.comp reads two floats an element)
