#version 450
// Rotary embeddings (ONNX RotaryEmbedding opset 23, com.microsoft's, and GroupQueryAttention's Q and K),
// one invocation per output element.
//
// Element i is (b, s, h, c) of a logical [B, S, H, D] (c fastest); X and Y hold it at their own element
// strides of a batch, a sequence step and a head plus a start offset, so [B, S, H*D], [B, H, S, D], a slice
// of packed QKV ([B, S, (Hq + 2 Hkv) * D]) and rows of a KV cache ([B, H, len, D]) take the same arithmetic.
// Element c < rot of a head is rotated with its partner: (c, c + rot/2) (halves) or (2i, 2i + 1)
// (INTERLEAVED); elements past rot are copied (rot 0: a strided copy).
// The cos/sin row is b*S + s (POSITIONS 0: caches of [B, S, rot/2]), position_ids[b, s] (POSITIONS 1),
// start + s (POSITIONS 2) or position_ids[0, 0] + s (POSITIONS 3: GroupQueryAttention's first prompt). Position ids are read on the device: negatives wrap as numpy indexing does in
// onnx's reference, and any id still outside [0, max_pos) is clamped so that no read leaves the caches
// (ORT's CPU EP rejects those ids, a shader cannot). DTYPE is the type of X, the caches and Y; arithmetic
// is float32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint INTERLEAVED = 0;
layout(constant_id = 1) const uint POSITIONS = 0;   // 0: a row per token, 1: position_ids, 2: start + s, 3: ids[0] + s

layout(push_constant, scalar) uniform Push {
    uint64_t x, cos_cache, sin_cache, pos, y;
    uint n, d, rot, heads, seq, max_pos, start;
    uint x_b, x_s, x_h, x_off;  // X's element strides of a batch, a sequence step, a head; its first element
    uint y_b, y_s, y_h, y_off;
    GROUP_BASE;
} pc;

// the cache row of token (b, s)
uint cache_row(uint b, uint s) {
    uint bs = b * pc.seq + s;
    if (POSITIONS == 0) return bs;
    int64_t p = POSITIONS == 2 ? int64_t(pc.start + s)
              : POSITIONS == 3 ? Int64Tensor(pc.pos).v[0] + int64_t(s) : Int64Tensor(pc.pos).v[bs];
    if (p < 0) p += int64_t(pc.max_pos);
    return uint(clamp(p, int64_t(0), int64_t(pc.max_pos) - 1));
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint c = i % pc.d, h = (i / pc.d) % pc.heads, s = (i / (pc.d * pc.heads)) % pc.seq;
    uint b = i / (pc.d * pc.heads * pc.seq);
    uint head = pc.x_off + b * pc.x_b + s * pc.x_s + h * pc.x_h;  // the head's first element in X
    uint dst = pc.y_off + b * pc.y_b + s * pc.y_s + h * pc.y_h + c;
    if (c >= pc.rot) {
        STORE(Tensor(pc.y), dst, LOAD(Tensor(pc.x), head + c));
        return;
    }
    uint half_rot = pc.rot / 2;
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
    STORE(Tensor(pc.y), dst, first ? cs * x1 - sn * x2 : sn * x1 + cs * x2);
}
