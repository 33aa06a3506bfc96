"""ONNX RotaryEmbedding (opset 23) as one dispatch of rotary_embedding.comp, one invocation per output
element: the first rotary_embedding_dim elements of each head are rotated in halves or interleaved pairs,
the rest are copied. Position ids stay on the device (the shader reads them).

One deliberate difference from ORT's CPU EP: a position id outside [0, max_pos) cannot fail the run on the
device, so negatives wrap (as numpy indexing does in onnx's reference) and the rest are clamped to the
cache; the CPU EP rejects both."""

from __future__ import annotations

from vkep.kernels.base import (
    MAX_ELEMENTS,
    Kernel,
    Tensor,
    UnsupportedError,
    grid_1d,
    pack,
    padded,
    shader_dtype,
)

WG = 256  # rotary_embedding.comp's workgroup size


class RotaryEmbedding(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        ranks = padded(input_ranks, 4)
        x_rank, cos_rank, sin_rank, pos_rank = ranks[:4]
        if x_rank not in (3, 4, -1):
            return f"X of rank {x_rank}"
        if x_rank == 3 and attrs.get("num_heads", 0) <= 0:
            return "3-D X needs num_heads"
        if attrs.get("interleaved", 0) not in (0, 1):
            return f"interleaved {attrs.get('interleaved')}"
        if attrs.get("rotary_embedding_dim", 0) < 0:
            return f"rotary_embedding_dim {attrs.get('rotary_embedding_dim')}"
        want = 3 if pos_rank is None else 2  # caches indexed by position id, or one row per token
        for name, rank in (("cos_cache", cos_rank), ("sin_cache", sin_rank)):
            if rank not in (want, -1):
                return f"{name} of rank {rank} {'without' if pos_rank is None else 'with'} position_ids"
        if pos_rank not in (None, 2, -1):
            return f"position_ids of rank {pos_rank}"
        return None

    def compute(self, call) -> None:
        inputs = padded(call.inputs, 4)
        x, cos, sin, pos = inputs[:4]
        dtype = shader_dtype(x)
        if cos.dtype != dtype or sin.dtype != dtype:
            raise UnsupportedError(f"RotaryEmbedding: X of {dtype}, caches of {cos.dtype} and {sin.dtype}")
        key = tuple(None if t is None else (t.shape, t.dtype) for t in inputs[:4])
        tail, n = self.planned(key, lambda: self._plan(x, cos, sin, pos))
        y = call.output(0, x.shape)
        if n == 0:
            return
        constants = (int(self.attrs.get("interleaved", 0)), int(pos is not None))
        reads = [t for t in (x, cos, sin, pos) if t is not None]
        call.dispatch(self.spec.shader, dtype, constants, [x, cos, sin, pos, y], tail, grid_1d(n, WG), reads, [y])

    def _plan(self, x: Tensor, cos: Tensor, sin: Tensor, pos: Tensor | None) -> tuple[bytes, int]:
        """(push-constant tail, element count) from the shapes alone."""
        if len(x.shape) == 4:
            batch, heads, seq, d = x.shape
            seq_div = d  # X is [B, H, S, D]: one sequence step is one head row
        elif len(x.shape) == 3:
            batch, seq, hidden = x.shape
            heads = self.attrs.get("num_heads", 0)
            if heads <= 0 or hidden % heads:
                raise UnsupportedError(f"RotaryEmbedding: 3-D X {x.shape} does not split into {heads} heads")
            d = hidden // heads
            seq_div = hidden  # X is [B, S, H*D]: one sequence step is every head of one token
        else:
            raise UnsupportedError(f"RotaryEmbedding: X of rank {len(x.shape)}")
        rot = self.attrs.get("rotary_embedding_dim", 0) or d
        if rot > d or rot % 2:
            raise UnsupportedError(f"RotaryEmbedding: rotary_embedding_dim {rot} with head size {d}")
        if cos.shape != sin.shape:
            raise UnsupportedError(f"RotaryEmbedding: cos_cache {cos.shape} and sin_cache {sin.shape} differ")
        if pos is None:
            if cos.shape != (batch, seq, rot // 2):
                raise UnsupportedError(f"RotaryEmbedding: caches {cos.shape} without position_ids, expected "
                                       f"{(batch, seq, rot // 2)}")
            max_pos = batch * seq
        else:
            if len(cos.shape) != 2 or cos.shape[1] != rot // 2:
                raise UnsupportedError(f"RotaryEmbedding: caches {cos.shape} with position_ids, expected "
                                       f"[max_pos, {rot // 2}]")
            if pos.dtype != "int64" or pos.shape != (batch, seq):
                raise UnsupportedError(f"RotaryEmbedding: position_ids {pos.shape} {pos.dtype}, expected "
                                       f"{(batch, seq)} int64")
            max_pos = cos.shape[0]
            if max_pos == 0 and x.size and rot:
                raise UnsupportedError("RotaryEmbedding: empty caches for a non-empty X")
        n = x.size
        if max(n, cos.size) > MAX_ELEMENTS:
            raise UnsupportedError(f"RotaryEmbedding: X {x.shape}, caches {cos.shape} (at most {MAX_ELEMENTS} "
                                   "elements each)")
        tail = pack("7I", n, d, rot, seq_div, seq, heads * seq * d, max_pos)
        return tail, n
