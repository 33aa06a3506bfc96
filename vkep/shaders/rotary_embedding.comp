#version 450
// ONNX RotaryEmbedding (opset 23), one invocation per output element.
//
// X is [B, H, S, D] (4-D) or [B, S, H*D] (3-D); pc.seq_div is the element count of one sequence step
// (D, or H*D) and pc.batch_len that of one batch, so both layouts take the same index arithmetic.
// Element c < rot of a head is rotated with its partner: (c, c + rot/2) (halves) or (2i, 2i + 1)
// (INTERLEAVED); elements past rot are copied.
// The cos/sin row is position_ids[b, s] (POSITIONS) or b*S + s (caches of [B, S, rot/2]). Position ids
// are read on the device: negatives wrap as numpy indexing does in onnx's reference, and any id still
// outside [0, max_pos) is clamped so that no read leaves the caches (ORT's CPU EP rejects those ids, a
// shader cannot). DTYPE is the type of X, the caches and Y; arithmetic is float32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint INTERLEAVED = 0;
layout(constant_id = 1) const uint POSITIONS = 0;   // position_ids given

layout(push_constant, scalar) uniform Push {
    uint64_t x, cos_cache, sin_cache, pos, y;
    uint n, d, rot, seq_div, seq, batch_len, max_pos;
} pc;

// the cache row of token (b, s)
uint cache_row(uint b, uint s) {
    uint bs = b * pc.seq + s;
    if (POSITIONS == 0) return bs;
    int64_t p = Int64Tensor(pc.pos).v[bs];
    if (p < 0) p += int64_t(pc.max_pos);
    return uint(clamp(p, int64_t(0), int64_t(pc.max_pos) - 1));
}

void main() {
    uint i = flat_index(WG);
    if (i >= pc.n) return;
    uint c = i % pc.d;
    if (c >= pc.rot) {
        STORE(Tensor(pc.y), i, LOAD(Tensor(pc.x), i));
        return;
    }
    uint half_rot = pc.rot / 2;
    uint s = (i / pc.seq_div) % pc.seq;
    uint b = i / pc.batch_len;
    uint head = i - c;  // the head's first element
    // j: the pair's cache column; first: whether c is x1 (the real part) of its pair
    uint j, i1, i2;
    bool first;
    if (INTERLEAVED != 0) {
        j = c / 2;
        first = (c & 1u) == 0;
        i1 = head + 2 * j;
        i2 = i1 + 1;
    } else {
        first = c < half_rot;
        j = first ? c : c - half_rot;
        i1 = head + j;
        i2 = i1 + half_rot;
    }
    uint k = cache_row(b, s) * half_rot + j;
    // float(): the manifest's int64 (position ids) makes `vkep shaders build` compile a DTYPE=3 variant too
    float cs = float(LOAD(Tensor(pc.cos_cache), k)), sn = float(LOAD(Tensor(pc.sin_cache), k));
    float x1 = float(LOAD(Tensor(pc.x), i1)), x2 = float(LOAD(Tensor(pc.x), i2));
    STORE(Tensor(pc.y), i, first ? cs * x1 - sn * x2 : sn * x1 + cs * x2);
}
