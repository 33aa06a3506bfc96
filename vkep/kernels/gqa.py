"""com.microsoft GroupQueryAttention (the decoder attention of ORT GenAI's and Optimum's exports) from vkep's
rotary and attention shaders, following ORT's CPU EP:

1. present_key / present_value [B, Hkv, Tp, D], Tp = max(total_sequence_length, past length): the past's
   first `past_len` rows, the new keys (values) after them, zeros after those (attention.comp MODE 1); where
   ORT hands present in past's own buffer (a shared KV cache) only the new rows are written, as ORT does.
2. New keys rotated (do_rotary) or copied out of packed QKV into present, and Q rotated or unpacked into the
   output Y (rotary_embedding.comp with strides; rot 0 copies).
3. attention.comp over present, Q in Y (each workgroup reads its query row before it writes that row):
   causal frontier at past_len + i (causal=0: every key up to the total), ORT's local window (the last
   local_window_size keys), a padded batch one row at a time (each its own past length), rotary positions past_len + s or from position_ids, softcap, attention_bias as an
   additive mask, smooth_softmax / head_sink as an extra softmax logit.

seqlens_k and total_sequence_length are read on the host (the plan keys on them; a padded batch's views of
its rows are not replayed natively). Declined at GetCapability: a quantized KV cache (k_scale / v_scale, kv_cache_bit_width, k/v_quant_type),
q/k_norm_weight, sliding_window_cache, qk_output, float types that differ."""

from __future__ import annotations

import math

from vkep.kernels.attention import (
    MAX_D,
    MAX_R,
    QK_NONE,
    WG_SIZES,
    _float_bits,
    _mask_strides,
    _workgroup,
    by_products,
    mask_members,
    present_copy,
    products_fit,
)
from vkep.kernels.base import ITEMSIZE, Kernel, Tensor, UnsupportedError, grid_1d, padded, shader_dtype
from vkep.kernels.movement import host_values
from vkep.kernels.rotary import dispatch_rotary, rotary_members

COPY_WG = 256
# inputs: query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache,
# position_ids, attention_bias, head_sink, k_scale, v_scale, q_norm_weight, k_norm_weight
N_INPUTS = 16
FLOATS = (0, 1, 2, 3, 4, 7, 8, 10, 11)  # the inputs of type T (or T_CACHE, which vkep takes equal to T)
UNSUPPORTED_INPUTS = ((12, "k_scale"), (13, "v_scale"), (14, "q_norm_weight"), (15, "k_norm_weight"))


class GroupQueryAttention(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks, types = padded(input_ranks, N_INPUTS), padded(input_types, N_INPUTS)
        for index, name in UNSUPPORTED_INPUTS:
            if ranks[index] is not None:
                return f"the {name} input"
        for name, default in (("sliding_window_cache", 0), ("kv_cache_bit_width", 0), ("qk_output", 0),
                              ("k_quant_type", "NONE"), ("v_quant_type", "NONE")):
            if attrs.get(name, default) != default:
                return f"{name}={attrs[name]}"
        if attrs.get("causal", 1) not in (0, 1) or (attrs.get("causal", 1) == 0 and attrs.get("local_window_size",
                                                                                            -1) != -1):
            return f"causal={attrs.get('causal')} with local_window_size={attrs.get('local_window_size')}"
        heads, kv_heads = attrs.get("num_heads", 0), attrs.get("kv_num_heads", 0)
        if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
            return f"num_heads={heads} over kv_num_heads={kv_heads}"
        if attrs.get("local_window_size", -1) == 0:
            return "local_window_size=0"
        if attrs.get("scale", 0.0) < 0:
            return "a negative scale (Q and K are each scaled by sqrt(scale))"
        if ranks[0] not in (3, -1):
            return f"query of rank {ranks[0]}"
        if ranks[9] not in (None, 2, -1) or (types[9] not in (None, "int64")):
            return f"position_ids of rank {ranks[9]} ({types[9]})"
        if (ranks[1] is None) != (ranks[2] is None) or (ranks[3] is None) != (ranks[4] is None):
            return "key without value or past_key without past_value"
        if attrs.get("do_rotary", 0) and (ranks[7] is None or ranks[8] is None):
            return "do_rotary without cos_cache and sin_cache"
        floats = {types[i] for i in FLOATS if ranks[i] is not None and types[i] is not None}
        if len(floats) > 1:
            return f"mixed element types {sorted(floats)}"
        return None

    def compute(self, call) -> None:
        inputs = padded(call.inputs, N_INPUTS)
        query, key, value, past_k, past_v, seqlens, total_t, cos, sin, pos, bias, sink = inputs[:12]
        dtype = shader_dtype(query)
        for t in (key, value, past_k, past_v, cos, sin, bias, sink):
            if t is not None and t.dtype != dtype:
                raise UnsupportedError(f"GroupQueryAttention: mixed element types {dtype} and {t.dtype}")
        if seqlens.dtype != "int32" or total_t.dtype != "int32" or total_t.size != 1:
            raise UnsupportedError("GroupQueryAttention: seqlens_k and total_sequence_length must be int32, "
                                   "total_sequence_length one value")
        self._head_size(query, key)
        lengths = tuple(n + 1 for n in host_values(call, seqlens))
        total = host_values(call, total_t)[0]
        if len(query.shape) != 3 or len(lengths) != query.shape[0] or max(lengths, default=total) > total:
            raise UnsupportedError(f"GroupQueryAttention: query {query.shape} with seqlens_k {lengths} and "
                                   f"total_sequence_length {total}")
        key_ = tuple(None if t is None else (t.shape, t.dtype) for t in inputs[:12]) + (lengths, total)
        y_shape, present_shape, positions, vec4, groups = self.planned(
            key_, lambda: self._plan(query, key, past_k, cos, pos, bias, sink, lengths, total))
        y = call.output(0, y_shape)
        count = self.output_count or 1
        presents = [call.output(i, present_shape) if count > i else None for i in (1, 2)]
        presents = [p if p is not None and p.addr else call.scratch(present_shape, dtype) for p in presents]
        if y.size == 0:
            return
        shared = []
        for past, present in zip((past_k, past_v), presents, strict=True):
            shared.append(past is not None and past.addr == present.addr)
            if shared[-1]:
                call.copy(past, present)  # ORT's shared KV cache (no work): only the new rows are written, below
        flags = {"interleaved": int(self.attrs.get("rotary_interleaved", 0)), "positions": positions}
        for copies, rotations, attentions in groups:
            for (n, copy, direct, at), past, new, present, same, (source, rot, count, rotary, pos_at) in zip(
                    copies, (past_k, past_v), (key, value), presents, shared, rotations[:2], strict=True):
                new = new if direct else None
                if n and not same:
                    src = [t for t in (past, new) if t is not None and t.size]
                    call.dispatch(self.spec.shader, dtype, {**COPY_CONSTANTS, "vec4": vec4},
                                  {**copy, "k": _at(new, at[1]), "past_k": _at(past, at[0]), "y": _at(present, at[2])},
                                  grid_1d(n // (4 if vec4 else 1), COPY_WG), src, [present])
                if count and (same or new is None):
                    dispatch_rotary(call, flags, inputs[source], cos if rot else None, sin if rot else None,
                                    _at(pos, pos_at) if rot and positions != 2 else None, present, rotary, count)
            source, rot, count, rotary, pos_at = rotations[2]
            if count:
                dispatch_rotary(call, flags, query, cos if rot else None, sin if rot else None,
                                _at(pos, pos_at) if rot and positions != 2 else None, y, rotary, count)
            q = y if count else query
            for constants, members, rows, (q_at, present_at, bias_at) in attentions:
                # Q (in Y when rotated or unpacked) against present as the past, no new keys
                ins = {"q": _at(q, q_at), "mask": _at(bias, bias_at), "past_k": _at(presents[0], present_at),
                       "past_v": _at(presents[1], present_at), "aux": sink}
                out = _at(y, q_at)
                # (the part's rows one block a batch: one batch, or every row of each)
                if products_fit(query, constants, members) and (rows == members["hq"] * members["sq"]
                                                                or members["sq"] == query.shape[1]):
                    by_products(self, call, ins["q"], ins["past_k"], ins["past_v"], out, ins["mask"], None, constants,
                                members, self.attrs.get("scale") or 1.0 / math.sqrt(members["d"]), kv_3d=False)
                    continue
                call.dispatch(self.spec.shader, dtype if bias is None else (dtype, shader_dtype(bias)), constants,
                              {**members, **ins, "k": None, "v": None, "y": out, "qk": None}, grid_1d(rows, 1),
                              [t for t in ins.values() if t is not None], [out])

    def _head_size(self, query: Tensor, key: Tensor | None) -> int:
        """D from the shapes (before any host value is read, so that GetCapability's dry run checks it)."""
        hq, hkv = int(self.attrs["num_heads"]), int(self.attrs["kv_num_heads"])
        if len(query.shape) != 3:
            raise UnsupportedError(f"GroupQueryAttention: query {query.shape}")
        batch, sq, width = query.shape
        packed = key is None
        d = width // (hq + 2 * hkv) if packed else width // hq
        if d == 0 or width != d * (hq + 2 * hkv if packed else hq) or (not packed and (
                key.shape != (batch, sq, hkv * d))):
            raise UnsupportedError(f"GroupQueryAttention: query {query.shape}, key {None if packed else key.shape} "
                                   f"do not split into {hq} and {hkv} heads")
        if d > MAX_D:  # attention.comp holds a query row in shared memory
            raise UnsupportedError(f"GroupQueryAttention: head size {d} (at most {MAX_D})")
        return d

    def _plan(self, query: Tensor, key: Tensor | None, past_k: Tensor | None, cos: Tensor | None,
              pos: Tensor | None, bias: Tensor | None, sink: Tensor | None, lengths: tuple[int, ...],
              total: int) -> tuple:
        hq, hkv = int(self.attrs["num_heads"]), int(self.attrs["kv_num_heads"])
        batch, sq, width = query.shape
        packed = key is None
        d = self._head_size(query, key)
        # ORT's first prompt (S == total) ignores the past; later steps append after total_b - S past rows
        first = sq == total
        buffer = past_k.shape[2] if past_k is not None else 0
        if past_k is not None and past_k.shape != (batch, hkv, buffer, d):
            raise UnsupportedError(f"GroupQueryAttention: past_key {past_k.shape}, expected [{batch}, {hkv}, *, {d}]")
        if (not first and min(lengths) < sq) or (buffer != total - sq and total > buffer):  # as ORT's CPU EP
            raise UnsupportedError(f"GroupQueryAttention: totals {lengths} (at most {total}) with {sq} new tokens "
                                   f"and a cache of {buffer} rows (it must hold the past exactly or the total)")
        tp = max(total, buffer)
        # the smallest workgroup within lavapipe's loop budget whose threads hold a row of values (MAX_R each)
        wg = max(_workgroup(tp, d, d), WG_SIZES[0] if d <= MAX_R * WG_SIZES[0] else WG_SIZES[-1])
        rot = 0
        if self.attrs.get("do_rotary", 0):
            rot = cos.shape[1] * 2 if len(cos.shape) == 2 else -1
            if rot <= 0 or rot > d or cos.shape[0] < total:
                raise UnsupportedError(f"GroupQueryAttention: cos_cache {cos.shape} for head size {d} and "
                                       f"{total} positions")
            if pos is not None and pos.shape != (batch, sq):
                raise UnsupportedError(f"GroupQueryAttention: position_ids {pos.shape} for {batch} x {sq} tokens")
        # rotary positions (rotary_embedding.comp): past_len + s, or ORT's reading of position_ids: the first
        # prompt's positions start at position_ids[0, 0], later tokens take their own
        positions = 2 if pos is None or not rot else 3 if first else 1
        if sink is not None and sink.size != hq:
            raise UnsupportedError(f"GroupQueryAttention: head_sink {sink.shape} for {hq} heads")
        mask = (0, 0, 0, 0) if bias is None else _mask_strides(bias.shape, batch, hq, sq, tp)
        scale = self.attrs.get("scale") or 1.0 / math.sqrt(d)
        softcap = float(self.attrs.get("softcap") or 0.0)
        sink_mode = 2 if sink is not None else int(self.attrs.get("smooth_softmax", -1) == 1)
        vec4 = int(d % 4 == 0)
        constants = {"mode": 0, "local_size_x": wg, "layout3d": 1, "causal": 1, "mask": int(bias is not None),
                     "qk_mode": QK_NONE, "round16": 0, "softmax16": 0,
                     "scale_bits": _float_bits(math.sqrt(scale), "float32"),
                     "softcap_bits": _float_bits(softcap, "float32") if softcap > 0 else 0, "nonpad": 0,
                     "vec4": vec4, "sink": sink_mode}
        window = max(self.attrs.get("local_window_size", -1), 0)
        bidirectional = not self.attrs.get("causal", 1)
        row = width if packed else hkv * d  # elements from one token to the next in key / value
        max_pos = cos.shape[0] if rot else 0
        # batches of one length together (no padding: one group); a padded batch one by one
        spans = [(0, batch, total)] if len(set(lengths)) == 1 else [(b, 1, n) for b, n in enumerate(lengths)]
        groups = []
        for b0, nb, length in spans:
            past_len = 0 if first else length - sq
            cache_at = b0 * hkv * tp * d
            pos_at = 0 if first else b0 * sq  # position_ids: a first prompt reads [0, 0] only
            # new keys (values) come straight from key (value) in the copy (direct), else rotated or unpacked
            copies = []
            for direct in (not packed and not rot, not packed):
                n, copy = present_copy(nb, hkv, d, past_len, buffer, sq if direct else 0, tp)
                copies.append((n if past_len or direct or tp > past_len + sq else 0, copy, direct,
                               (b0 * hkv * buffer * d, b0 * sq * row, cache_at)))
            cache = (hkv * tp * d, d, tp * d, cache_at + past_len * d)  # present [B, Hkv, Tp, D] from row past_len
            rotations = []
            for source, offset, r in ((0 if packed else 1, hq * d, rot), (0 if packed else 2, (hq + hkv) * d, 0)):
                x = (sq * row, row, d, b0 * sq * row + (offset if packed else 0))
                rotations.append((source, r, nb * sq * hkv * d,
                                  rotary_members((nb, sq, hkv, d), r, max_pos, past_len, x, cache), pos_at))
            # Q rotated or unpacked into Y, where attention.comp reads it
            rotations.append((0, rot, nb * sq * hq * d if packed or rot else 0,
                              rotary_members((nb, sq, hq, d), rot, max_pos, past_len,
                                          (sq * width, width, d, b0 * sq * width),
                                          (sq * hq * d, hq * d, d, b0 * sq * hq * d)), pos_at))
            # query rows [i0, i0 + rows) attend keys up to i + offset (causal) or up to offset (bidirectional,
            # and a padded first prompt's rows past its length: ORT's CPU EP ends their local window at the row
            # in float32 without softcap or sink, at the sequence's last key otherwise)
            parts = [(0, sq, 3, length - 1)] if bidirectional else [(0, min(sq, length), 1, past_len)]
            if first and length < sq and not bidirectional:
                row_window = query.dtype == "float32" and softcap <= 0 and not sink_mode
                parts.append((length, sq - length, 2 if row_window else 3, length - 1))
            attentions = []
            for i0, rows, causal, offset in parts:
                members = {"rows": nb * hq * rows, "hq": hq, "group": hq // hkv, "sq": rows, "kv_new": 0, "past": tp,
                           "d": d, "dv": d, **mask_members(mask), "offset": offset, "window": window}
                attentions.append(({**constants, "causal": causal}, members, nb * hq * rows,
                                   ((b0 * sq + i0) * hq * d, cache_at, b0 * mask[1] + i0 * mask[3])))
            groups.append((copies, rotations, attentions))
        return (batch, sq, hq * d), (batch, hkv, tp, d), positions, vec4, groups


# attention.comp MODE 1 over [B, S, heads * D] keys and values (then VEC4)
COPY_CONSTANTS = {"mode": 1, "local_size_x": COPY_WG, "layout3d": 1, "causal": 0, "mask": 0, "qk_mode": QK_NONE,
                  "round16": 0, "softmax16": 0, "scale_bits": 0, "softcap_bits": 0, "nonpad": 0, "sink": 0}


def _at(t: Tensor | None, elements: int) -> Tensor | None:
    """The part of `t` from element `elements` on (a view: a plan re-addresses it from t's own address)."""
    if t is None or not elements:
        return t
    return Tensor(t.addr + elements * ITEMSIZE[t.dtype], (t.size - elements,), t.dtype, t.io)
