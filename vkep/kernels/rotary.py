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
        members, n = self.planned(key, lambda: self._plan(x, cos, sin, pos))
        y = call.output(0, x.shape)
        if n == 0:
            return
        dispatch_rotary(call, {"interleaved": int(self.attrs.get("interleaved", 0)), "positions": int(pos is not None)},
                        x, cos, sin, pos, y, members, n)

    def _plan(self, x: Tensor, cos: Tensor, sin: Tensor, pos: Tensor | None) -> tuple[dict, int]:
        """(push members but the tensors, element count) from the shapes alone."""
        if len(x.shape) == 4:
            batch, heads, seq, d = x.shape
            seq_step, head_step = d, seq * d  # X is [B, H, S, D]
        elif len(x.shape) == 3:
            batch, seq, hidden = x.shape
            heads = self.attrs.get("num_heads", 0)
            if heads <= 0 or hidden % heads:
                raise UnsupportedError(f"RotaryEmbedding: 3-D X {x.shape} does not split into {heads} heads")
            d = hidden // heads
            seq_step, head_step = hidden, d  # X is [B, S, H*D]
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
        strides = (heads * seq * d, seq_step, head_step, 0)
        return rotary_members((batch, seq, heads, d), rot, max_pos, 0, strides, strides), n


def rotary_members(shape: tuple[int, int, int, int], rot: int, max_pos: int, start: int,
                   x_strides: tuple[int, int, int, int], y_strides: tuple[int, int, int, int]) -> dict[str, int]:
    """rotary_embedding.comp's push members but the tensors, over a logical [B, S, H, D]: X's and Y's element
    strides of a batch, a sequence step and a head, and their first element; `start` is token 0's position
    (POSITIONS 2)."""
    batch, seq, heads, d = shape
    x_b, x_s, x_h, x_off = x_strides
    y_b, y_s, y_h, y_off = y_strides
    return {"n": batch * seq * heads * d, "d": d, "rot": rot, "heads": heads, "seq": seq, "max_pos": max_pos,
            "start": start, "x_b": x_b, "x_s": x_s, "x_h": x_h, "x_off": x_off, "y_b": y_b, "y_s": y_s, "y_h": y_h,
            "y_off": y_off}


def dispatch_rotary(call, constants: dict[str, int], x: Tensor, cos: Tensor | None, sin: Tensor | None,
                    pos: Tensor | None, y: Tensor, members: dict[str, int], n: int) -> None:
    """One rotary_embedding.comp dispatch (constants interleaved and positions) of n output elements, `members`
    its push members but the tensors (rotary_members)."""
    reads = [t for t in (x, cos, sin, pos) if t is not None]
    call.dispatch("rotary_embedding.comp", shader_dtype(x), constants,
                  {**members, "x": x, "cos_cache": cos, "sin_cache": sin, "pos": pos, "y": y}, grid_1d(n, WG),
                  reads, [y])
