"""com.microsoft ops of exported transformer models (ORT's contrib domain), built from vkep's shaders."""

from __future__ import annotations

import math

import numpy as np

from vkep.kernels.attention import Attention
from vkep.kernels.base import (
    ITEMSIZE,
    LOOP_BUDGET,
    MAX_ELEMENTS,
    Kernel,
    Tensor,
    UnsupportedError,
    grid_1d,
    padded,
    shader_dtype,
)
from vkep.kernels.elementwise import (
    OP_ADD,
    Unary,
    broadcast_members,
    broadcast_shape,
    dispatch_binary,
    dispatch_unary,
    dispatch_wide,
)
from vkep.kernels.norm import MODE_RMS, Skip, affine_index, normalize_rows, scalar_order, stat_outputs
from vkep.kernels.rotary import RotaryEmbedding


class BiasedGelu(Unary):
    """FastGelu (the tanh approximation; bias optional) and BiasGelu (erf): gelu(x + bias), the add in a
    dispatch of its own, then unary.comp's gelu in place."""

    def __init__(self, *args):
        super().__init__(*args)
        self.params = (1.0 if self.spec.op == "FastGelu" else 0.0, 0.0)  # alpha 1: tanh

    def compute(self, call) -> None:
        x = call.inputs[0]
        bias = call.inputs[1] if len(call.inputs) > 1 else None
        if bias is None:
            self.run(call)
            return
        y = call.output(0, broadcast_shape(x.shape, bias.shape), x.dtype)
        if y.size:
            dispatch_binary(call, OP_ADD, x, bias, y)
            dispatch_unary(call, self.spec.shader, self.constants, y, y, self.params)


class BiasAdd(Kernel):
    """com.microsoft BiasAdd (diffusion models): Y = X + bias + skip, X and skip [N, S, C], bias [C]; two
    dispatches of binary.comp's add (the second in place), each rounding to the tensors' type."""

    def compute(self, call) -> None:
        x, bias, skip = call.inputs[:3]
        if len(x.shape) != 3 or bias.shape != x.shape[-1:] or skip.shape != x.shape:
            raise UnsupportedError(f"BiasAdd: input {x.shape}, bias {bias.shape}, skip {skip.shape} (want "
                                   "[N, S, C], [C], [N, S, C])")
        y = call.output(0, x.shape, x.dtype)
        if y.size:
            dispatch_binary(call, OP_ADD, x, bias, y)
            dispatch_binary(call, OP_ADD, y, skip, y)


class BiasSplitGelu(Kernel):
    """com.microsoft BiasSplitGelu (diffusion models): s = X + bias over X [N, S, 2D], then Y [N, S, D] = the
    left half of each row of s times the erf Gelu of its right half. The add goes into scratch memory (in
    the tensors' type), then one dispatch of binary.comp's OP_MUL_GELU reads both halves as strided views."""

    def compute(self, call) -> None:
        x, bias = call.inputs[:2]
        if len(x.shape) != 3 or bias.shape != x.shape[-1:] or x.shape[-1] % 2:
            raise UnsupportedError(f"BiasSplitGelu: input {x.shape} with bias {bias.shape} (want [N, S, 2D], [2D])")
        width = x.shape[-1]
        half = width // 2
        y = call.output(0, x.shape[:-1] + (half,), x.dtype)
        if not y.size:
            return
        s = call.scratch(x.shape, x.dtype)
        dispatch_binary(call, OP_ADD, x, bias, s)
        rows = y.size // half
        left = Tensor(s.addr, (rows, half), s.dtype, s.io)
        right = Tensor(s.addr + half * ITEMSIZE[s.dtype], (rows, half), s.dtype, s.io)
        members = broadcast_members(y.size, (rows, half), [(width, 1), (width, 1)], divisor=True)
        dispatch_wide(call, "binary.comp", self.constants["op"], y.size, shader_dtype(x),
                      {**members, "scale": 1.0, "a": left, "b": right, "y": y}, [s], [y])


class SkipNorm(Kernel):
    """SkipLayerNormalization (mode 0: input, skip, gamma, beta, bias) and SkipSimplifiedLayerNormalization
    (mode 1: input, skip, gamma, bias): s = input + skip (+ bias), normalised over the last axis. Outputs:
    output, mean, inv_std_var (float32, [..., 1]) and input_skip_bias_sum (s itself, the next residual)."""

    def compute(self, call) -> None:
        x, skip, gamma = call.inputs[:3]
        mode = self.constants["mode"]
        rest = list(call.inputs[3:]) + [None, None]
        beta, bias = (None, rest[0]) if mode == MODE_RMS else (rest[0], rest[1])
        if x.shape[-1:] != gamma.shape[-1:] or len(x.shape) < 2:
            raise UnsupportedError(f"{self.spec.op}: input {x.shape} with gamma {gamma.shape}")
        # (as the CPU EP: skip as the input, or [S, H] / [1, S, H] added to every batch: read modulo its size)
        if skip.shape != x.shape and skip.shape not in (tuple(x.shape[-2:]), (1, *x.shape[-2:])):
            raise UnsupportedError(f"{self.spec.op}: skip {skip.shape} with input {x.shape}")
        if bias is not None and bias.shape != x.shape[-1:]:
            raise UnsupportedError(f"{self.spec.op}: bias {bias.shape} with input {x.shape}")
        y = call.output(0, x.shape, x.dtype)
        stats = stat_outputs(self, call, x.shape[:-1] + (1,), [0, 1])  # outputs 1, 2: mean, inv_std_var
        s = call.output(3, x.shape, x.dtype) if (self.output_count or 1) > 3 else None
        if not x.size:
            return
        # one dispatch: the sum x + skip + bias in float32 (as ORT's CPU EP, also for float16) is normalised
        # and stored as output 3 where the node has it
        added = Skip(skip, skip.size, bias, s if s is not None and s.addr else None)
        # ORT's skip_layer_norm.cc sums in its scalar loop on every host (SkipLayerNormalization: Welford's)
        normalize_rows(self, call, mode, x, gamma, beta, y, stats, math.prod(x.shape[:-1]), x.shape[-1],
                       affine_index(x, gamma, beta), added, scalar_order(x.shape[-1]))


class ContribRotary(RotaryEmbedding):
    """com.microsoft's RotaryEmbedding: ONNX's (opset 23) with its inputs in another order (input,
    position_ids, cos_cache, sin_cache); position ids per token ([batch, sequence]), scale 1, not packed."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("scale", 1.0) != 1.0:
            return f"scale {attrs['scale']}"
        if attrs.get("is_packed_batching", 0):
            return "is_packed_batching"
        if attrs.get("rotary_embedding_dim", 0) and attrs.get("num_heads", 0) <= 0:
            return "rotary_embedding_dim without num_heads (the CPU EP then fails the session, naming it)"
        ranks = padded(input_ranks, 4)
        types = padded(input_types, 4)
        if ranks[1] not in (2, -1):
            return f"position_ids of rank {ranks[1]} (a start offset is not supported)"
        return super().declines(spec, attrs, since_version, [ranks[i] for i in ONNX_ORDER],
                                [types[i] for i in ONNX_ORDER])

    def compute(self, call) -> None:
        inputs = padded(call.inputs, 4)
        call.inputs = [inputs[i] for i in ONNX_ORDER]
        super().compute(call)


ONNX_ORDER = (0, 2, 3, 1)  # ONNX's (X, cos_cache, sin_cache, position_ids) from com.microsoft's order


FLOAT_ZERO_POINTS = ("float32", "float16")  # MatMulNBits' zero points of A's type (T3 = T1)


class MatMulNBits(Kernel):
    """com.microsoft MatMulNBits: A [..., K] times 4- or 8-bit blockwise-quantized weights [N, K] (ORT's
    packing, matmul_nbits.comp's header), dequantized in the shader; uint8 zero points, float ones (HQQ) or none.
    With accuracy_level 4 (and integer zero points), A is quantized to int8 per block as ORT's CPU EP does it
    (MLAS's CompInt8; a float16 A converted to float first), so that an LLM exported for the CPU EP picks the CPU
    EP's tokens.

    On CPU devices with 8-wide subgroups (lavapipe) a constant B is re-laid for the shader's LANES mode
    (8 columns per subgroup, 64-bit loads; see pack): tools/bench_gemv.py measures it against the CPU EP."""

    def __init__(self, *args):
        super().__init__(*args)
        self.lanes_packed: set[int] = set()  # inputs packed for matmul_nbits.comp's LANES mode (B, scales)

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("bits", 4) not in (2, 4, 8):
            return f"bits={attrs.get('bits')}"
        if attrs.get("weight_prepacked", 0):
            return "weight_prepacked=1 (a layout of another EP's)"
        block = attrs.get("block_size", 0)
        if block < 16 or block & (block - 1):
            return f"block_size={block} (a power of two from 16)"
        if len(input_ranks) > 4 and input_ranks[4] is not None:
            return "g_idx (act-order)"
        zp_type = padded(input_types, 4)[3]
        if zp_type in FLOAT_ZERO_POINTS and attrs.get("bits", 4) != 4:  # (the CPU EP refuses the session)
            return f"{zp_type} zero points with bits={attrs.get('bits', 4)} (float ones: 4 bits only)"
        # (accuracy_level 4 reads each block of A twice: its max |a|, then its int8 dot product)
        passes = 2 if attrs.get("accuracy_level", 0) == 4 else 1
        if attrs.get("K", 0) * passes + -(-attrs.get("K", 0) // max(block, 1)) > LOOP_BUDGET:
            return f"K={attrs['K']} past one invocation's loop budget"
        return None

    def pack(self, index: int, weight):
        """For matmul_nbits.comp's LANES mode: B [N, blocks, blob] as [ceil(N / 32)][chunks][8 lanes]
        [COLS columns][8 bytes] (a chunk: 8 bytes of one column's row of B; zero columns past N), so that a
        subgroup loads 256 contiguous bytes per step, one 64-bit load per column; the scales [N, blocks]
        as float32 [ceil(N / 32)][blocks][8 lanes][COLS], two per 64-bit load."""
        info = self.device_info
        if (index not in (1, 2) or info is None or info.device_type != "cpu" or info.subgroup_size != LANES
                or self.float_zero_points or int(self.attrs["bits"]) == 2):
            return weight, "raw"
        if index == 2 and 1 not in self.lanes_packed:  # (B stays as the node has it: so do the scales)
            return weight, "raw"
        n, k, block = int(self.attrs["N"]), int(self.attrs["K"]), int(self.attrs["block_size"])
        blocks = -(-k // block)
        width = -(-n // (LANES * COLS)) * LANES * COLS
        rows = weight.reshape(n, -1)
        if rows.shape[1] != (blocks * block * int(self.attrs["bits"]) // 8 if index == 1 else blocks):
            return weight, "raw"  # (compute rejects the node's sizes)
        full = np.zeros((width, rows.shape[1]), np.uint8 if index == 1 else np.float32)
        full[:n] = rows
        self.lanes_packed.add(index)
        if index == 1:
            packed = full.reshape(-1, LANES * COLS, rows.shape[1] // 8, 8).transpose(0, 2, 1, 3)
            return np.ascontiguousarray(packed).reshape(-1), "nbits-lanes8x4"
        packed = full.reshape(-1, LANES * COLS, blocks).transpose(0, 2, 1)
        return np.ascontiguousarray(packed).reshape(-1), "nbits-scales-lanes8x4"

    @property
    def lanes(self) -> bool:
        return 1 in self.lanes_packed

    @property
    def float_zero_points(self) -> bool:
        """Zero points of A's type (ORT's HQQ quantizer writes them): the CPU EP dequantizes B to float, each
        weight q * scale + (-scale * zp), and multiplies in float whatever the accuracy_level."""
        return padded(self.input_types, 4)[3] in FLOAT_ZERO_POINTS  # (an absent input's type is "" or None)

    def compute(self, call) -> None:
        inputs = padded(call.inputs, 6)
        a, b, scales, zp, _, bias = inputs[:6]
        k, n, block = int(self.attrs["K"]), int(self.attrs["N"]), int(self.attrs["block_size"])
        bits = int(self.attrs["bits"])
        if not a.shape or a.shape[-1] != k:
            raise UnsupportedError(f"MatMulNBits: A {a.shape} with K={k}")
        blocks = -(-k // block)
        width = -(-n // (LANES * COLS)) * LANES * COLS if self.lanes else n
        if scales.size != (width if 2 in self.lanes_packed else n) * blocks or b.size != width * blocks * block * bits // 8:
            raise UnsupportedError(f"MatMulNBits: B {b.shape} and scales {scales.shape} for N={n}, K={k}, "
                                   f"block_size={block}")
        y = call.output(0, a.shape[:-1] + (n,), a.dtype)
        m = math.prod(a.shape[:-1])
        if not y.size:
            return
        if m * n > MAX_ELEMENTS:
            raise UnsupportedError(f"MatMulNBits: {m} x {n} outputs")
        reads = [t for t in (a, b, scales, zp, bias) if t is not None]
        # (float16 A too: the CPU EP converts it to float, then quantizes it as float32 A; survey 10's W-1. MLAS has
        # no 2-bit CompInt8 kernel for blocks of 16: the CPU EP multiplies those in float, measured)
        int8_a = int(self.attrs.get("accuracy_level", 0) == 4 and not self.float_zero_points
                     and not (bits == 2 and block < 32))
        if self.lanes:
            rows, split, groups = self.planned((m,), lambda: _lanes_plan(m, n, k, block, bits, int8_a))
            a64 = int(bits == 4 and k % 2 == 0 and a.dtype == "float32")
            constants = {"bits": bits, "int8_a": int8_a, "lanes": 1, "rows": rows, "split": split, "cols": COLS,
                         "a64": a64, "has_zp": int(zp is not None), "scales_packed": int(2 in self.lanes_packed)}
        else:
            constants, groups = {"bits": bits, "int8_a": int8_a, "float_zp": int(self.float_zero_points)}, grid_1d(m * n, 64)
        call.dispatch(self.spec.shader, shader_dtype(a), constants,
                      {"a": a, "b": b, "scales": scales, "zp": zp, "bias": bias, "y": y, "m": m, "n": n, "k": k,
                       "block": block, "blocks": blocks}, groups, reads, [y])



def nbits_from_dequantize(w: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, bits: int, block: int,
                          signed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MatMulNBits' B, scales and zero points for the weights a DequantizeLinear [K, N] makes: `w` its integers
    [K, N] (any int type), `scale` and `zp` per block of `block` rows [ceil(K / block), N] (already broadcast).
    MatMulNBits' values are unsigned: a signed type moves by 2^(bits - 1), values and zero points alike, which
    leaves (w - zp) * scale as it is. Rows past K (the last block's padding) hold the zero point."""
    k, n = w.shape
    blocks = -(-k // block)
    shift = 1 << (bits - 1) if signed else 0
    zp_u = (np.zeros((blocks, n), np.int64) if zp is None else zp.astype(np.int64)) + shift
    full = np.repeat(zp_u, block, axis=0)  # [blocks * block, N]
    full[:k] = w.astype(np.int64) + shift
    values = full.T.reshape(n, blocks, block).astype(np.uint8)  # [N, blocks, block]
    zps = zp_u.T.astype(np.uint8)  # [N, blocks]
    if bits == 4:
        values = values[..., 0::2] | (values[..., 1::2] << 4)
        if blocks % 2:
            zps = np.concatenate([zps, np.zeros((n, 1), np.uint8)], axis=1)
        zps = zps[:, 0::2] | (zps[:, 1::2] << 4)
    return (np.ascontiguousarray(values).reshape(-1), np.ascontiguousarray(scale.T.astype(np.float32)).reshape(-1),
            np.ascontiguousarray(zps).reshape(-1))

LANES = 8  # matmul_nbits.comp's LANES mode: lanes per subgroup (lavapipe's subgroup size)
# its columns per lane: each 64-bit load of A serves 4 columns (tools/bench_gemv.py, lavapipe 22.3, 4-bit,
# vkep / CPU EP: 1x4096x4096 0.21 with 4 against 0.14 with 2; 1x512x4096 0.16 against 0.06)
COLS = 4
ROWS_MAX = 8  # its rows per subgroup
# workgroups (of 8 subgroups) wanted before K is split across the subgroups of one: a few per lavapipe
# thread, so that the threads stay busy to the end (1x4096x64 4-bit: 1.72 ms unsplit, 0.84 split 8 ways;
# at N = 512, 2 workgroups unsplit or 16 split, the same within this machine's noise, 3.2-4.2 ms)
SPLIT_BELOW_GROUPS = 16


def _lanes_plan(m: int, n: int, k: int, block: int, bits: int, int8_a: int) -> tuple[int, int, tuple[int, int, int]]:
    """(rows per subgroup, subgroups splitting K, workgroup grid) of matmul_nbits.comp's LANES mode."""
    rows = min(m, ROWS_MAX)
    row_groups = -(-m // rows)  # (past the device's limit, the recorder splits the grid)
    blocks = -(-k // block)
    split = 1
    while split < 8 and -(-n // (LANES * COLS * 8 // split)) * row_groups < SPLIT_BELOW_GROUPS and blocks >= 2 * split:
        split *= 2
    # loop iterations of one invocation: per block, its chunks (and with int8 A, a pass over the block per
    # row); the row loops unroll (ROWS is a specialization constant)
    per_slice = -(-blocks // split)
    steps = per_slice * (1 + block * bits // 64 + (rows * block // 8 if int8_a else 0))
    if steps > LOOP_BUDGET:
        raise UnsupportedError(f"MatMulNBits: K={k} past one invocation's loop budget")
    return rows, split, (-(-n // (LANES * COLS * 8 // split)), row_groups, 1)


class ContribMultiHeadAttention(Attention):
    """com.microsoft's MultiHeadAttention as ONNX's Attention (opset 23) over 3-D query, key and value, with
    attention_bias as the additive mask and a 4-D past KV cache; the bias input ([q, k, v hidden sizes]) added to
    query, key and value first, as the CPU EP adds it (binary.comp's add into scratch). Left to the CPU EP: packed
    QKV or 4-D/5-D key and value, key_padding_mask, past_sequence_length, cache_indirection, and a unidirectional
    mask over query and key of other lengths without a past (aligned otherwise by ORT)."""

    @staticmethod
    def onnx_attrs(attrs: dict) -> dict:
        heads = attrs.get("num_heads", 0)
        return {**attrs, "q_num_heads": heads, "kv_num_heads": heads, "is_causal": attrs.get("unidirectional", 0),
                "softcap": 0.0, "softmax_precision": None, "qk_matmul_output_mode": 0}

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 10)
        types = padded(input_types, 10)
        for index, name in ((4, "key_padding_mask"), (8, "past_sequence_length"), (9, "cache_indirection")):
            if ranks[index] is not None:
                return f"the {name} input"
        if ranks[1] not in (3, -1) or ranks[2] not in (3, -1):
            return f"key / value of rank {ranks[1]} / {ranks[2]} (packed QKV or KV)"
        return super().declines(spec, cls.onnx_attrs(attrs), since_version, [ranks[i] for i in MHA_TO_ONNX],
                                [types[i] for i in MHA_TO_ONNX])

    def __init__(self, *args):
        super().__init__(*args)
        self.attrs = self.onnx_attrs(self.attrs)

    def compute(self, call) -> None:
        if (self.output_count or 1) > 3:
            raise UnsupportedError("MultiHeadAttention: the qk output")
        inputs = padded(call.inputs, 10)
        q, k, past_k = inputs[0], inputs[1], inputs[6]
        if self.attrs["is_causal"] and past_k is None and q.shape[1] != k.shape[1]:
            # (ORT aligns that mask otherwise than ONNX's Attention: measured different)
            raise UnsupportedError("MultiHeadAttention: unidirectional over query and key of other lengths")
        if inputs[3] is not None:
            inputs[:3] = self.biased(call, inputs[:3], inputs[3])
        call.inputs = [inputs[i] for i in MHA_TO_ONNX] + [None]
        super().compute(call)


    @staticmethod
    def biased(call, qkv: list[Tensor], bias: Tensor) -> list[Tensor]:
        """query, key and value plus their parts of `bias` (the CPU EP's MaybeTransposeToBNSHAndAddBias: an add
        rounded to the tensors' type), each into scratch."""
        widths = [t.shape[-1] for t in qkv]
        if len(bias.shape) != 1 or bias.shape[0] != sum(widths):
            raise UnsupportedError(f"MultiHeadAttention: bias {bias.shape} for query, key and value widths {widths}")
        out, at = [], 0
        for t, width in zip(qkv, widths, strict=True):
            biased = call.scratch(t.shape, t.dtype)
            if t.size:
                dispatch_binary(call, OP_ADD, t, bias.view(at * ITEMSIZE[bias.dtype], (width,)), biased)
            out.append(biased)
            at += width
        return out


MHA_TO_ONNX = (0, 1, 2, 5, 6, 7)  # query, key, value, attention_bias (ONNX's attn_mask), past_key, past_value


class EmbedLayerNorm(Kernel):
    """com.microsoft EmbedLayerNormalization (BERT's embeddings as ORT's optimizer fuses them): word + position
    (+ segment) rows, layer-normalized, one thread per token in ORT's order of float operations
    (shaders/embed_layer_norm.comp); mask_index counts each batch row's mask values equal to 1."""

    def compute(self, call) -> None:
        self.embed(call, *padded(call.inputs, 9))

    def embed(self, call, ids: Tensor, segment_ids: Tensor | None, word: Tensor, position: Tensor,
              segment: Tensor | None, gamma: Tensor, beta: Tensor, mask: Tensor | None, position_ids: Tensor | None,
              quant: int = 0, params: Tensor | None = None) -> None:
        """The node's outputs; `quant` (embed_layer_norm.comp's QUANT) and `params`: 8-bit tables and their scales
        and zero points (QEmbedLayerNormalization)."""
        if len(ids.shape) != 2 or len(word.shape) != 2 or len(position.shape) != 2:
            raise UnsupportedError(f"{self.spec.op}: input_ids {list(ids.shape)} (2-D), word_embedding "
                                   f"{list(word.shape)} and position_embedding {list(position.shape)} (2-D)")
        batches, seq = ids.shape
        hidden = word.shape[1]
        if (segment_ids is None) != (segment is None):
            raise UnsupportedError(f"{self.spec.op}: segment_ids and segment_embedding come together")
        # an invocation a token walks its row 3 times (the sum, the squares, the output); mask_index's a batch row
        if 3 * (hidden + 1) > LOOP_BUDGET or seq + 1 > LOOP_BUDGET:
            raise UnsupportedError(f"{self.spec.op}: rows of {hidden} (sequences of {seq}) past one invocation's loop "
                                   "budget")
        out_type = "float32" if quant else word.dtype
        y = call.output(0, (batches, seq, hidden), out_type)
        mask_index = call.output(1, (batches,), "int32") if (self.output_count or 1) > 1 else None
        total = call.output(2, (batches, seq, hidden), out_type) if (self.output_count or 1) > 2 else None
        tokens = batches * seq
        if not tokens:
            return
        push = {"input_ids": ids, "segment_ids": segment_ids, "word": word, "position": position,
                "segment": segment, "gamma": gamma, "beta": beta, "position_ids": position_ids, "y": y, "sum": total,
                "err": call.error_word(), "params": params, "tokens": tokens, "seq": seq, "hidden": hidden,
                "words": word.shape[0], "positions": position.shape[0],
                "segments": segment.shape[0] if segment is not None else 0,
                "batch_positions": int(position_ids is not None and position_ids.size == tokens),
                "epsilon": float(self.attrs.get("epsilon", 1e-12))}
        reads = [t for t in (ids, segment_ids, word, position, segment, gamma, beta, position_ids, params)
                 if t is not None]
        call.dispatch("embed_layer_norm.comp", shader_dtype(y), {"quant": quant}, push, grid_1d(tokens, 64), reads,
                      [t for t in (y, total) if t is not None])
        if mask_index is not None and mask is None:  # (no mask: 0 each, as ORT)
            call.dispatch("fill.comp", "int32", {"mode": 0}, {"y": mask_index, "start": 0, "delta": 0, "n": batches},
                          grid_1d(batches, 64), [], [mask_index])
        elif mask_index is not None:
            call.dispatch("mask_index.comp", "int32", {}, {"mask": mask, "counts": mask_index, "rows": batches,
                                                           "row_length": seq}, grid_1d(batches, 64), [mask], [mask_index])


class CDist(Kernel):
    """com.microsoft CDist (cdist.comp): pairwise squared (sqeuclidean) or plain (euclidean) distances between the
    rows of A [M, K] and B [N, K], one output an invocation."""

    METRICS = {"sqeuclidean": 0, "euclidean": 1}

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        return None if attrs.get("metric") in cls.METRICS else f"metric {attrs.get('metric')!r}"

    def compute(self, call) -> None:
        a, b = call.inputs[:2]
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[1] or a.shape[1] <= 0:
            raise UnsupportedError(f"CDist of {a.shape} and {b.shape}")  # (the CPU EP fails these too)
        (m, k), n = a.shape, b.shape[0]
        if k > LOOP_BUDGET:
            raise UnsupportedError(f"CDist: rows of {k} past one invocation's loop budget")
        y = call.output(0, (m, n))
        if y.size:
            call.dispatch(self.spec.shader, shader_dtype(a), {"sqrt": self.METRICS[self.attrs["metric"]]},
                          {"a": a, "b": b, "y": y, "m": m, "n": n, "k": k}, grid_1d(y.size, 64), [a, b], [y])


class Inverse(Kernel):
    """com.microsoft Inverse (inverse.comp): each n x n matrix of X [..., n, n] (n up to MAX_N) inverted by one
    invocation."""

    MAX_N = 32  # (inverse.comp's MAX_N: its pivot array; n^3 steps stay within one invocation's loop budget)

    def compute(self, call) -> None:
        x = call.inputs[0]
        if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
            raise UnsupportedError(f"Inverse of {x.shape}: not square matrices")  # (the CPU EP fails it too)
        n = x.shape[-1]
        if n > self.MAX_N:
            raise UnsupportedError(f"Inverse of {n} x {n} matrices (at most {self.MAX_N})")
        y = call.output(0, x.shape)
        if y.size:
            count = y.size // (n * n)
            call.dispatch(self.spec.shader, shader_dtype(x), {}, {"x": x, "y": y, "count": count, "n": n},
                          grid_1d(count, 64), [x], [y])
