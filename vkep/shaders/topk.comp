#version 450
// TopK along one axis of a tensor read as [outer, axis, inner]: one workgroup per row loads the row
// into shared memory, sorts it (bitonic network over a power of two; padding sorts last) and writes the
// first k. Rows longer than MAX_LEN go in chunks: each chunk is sorted together with the k best so far
// (so k <= MAX_LEN / 2 then). Ties go to the lower index. sorted=0 gives the k chosen in index order
// (ONNX leaves that order open). FLOAT64: float64 values, compared in double.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FLOAT64
#define KEY_T double
#define LOAD_X(i) Doubles(pc.x).v[i]
#define STORE_VALUE(at, value) Doubles(pc.values).v[at] = (value)
#else
#define KEY_T COMP_T
#define LOAD_X(i) LOAD(Tensor(pc.x), i)
#define STORE_VALUE(at, value) STORE(Tensor(pc.values), at, value)
#endif

#define WG 256
#define MAX_LEN 2048
#define PAD 0xffffffffu
layout(local_size_x = WG) in;

layout(push_constant, scalar) uniform Push {
    uint64_t x, values, indices;
    uint rows, len, inner, k, width, flags;  // flags: 1 largest, 2 sorted
    GROUP_BASE;
} pc;

shared KEY_T key[MAX_LEN];
shared uint idx[MAX_LEN];

// whether element a goes before element b
bool before(uint a, uint b, bool by_index) {
    uint ia = idx[a], ib = idx[b];
    if (ia == PAD || ib == PAD || by_index) return ia < ib;
    KEY_T va = key[a], vb = key[b];
    if (va != vb) return (pc.flags & 1u) != 0 ? va > vb : va < vb;
    return ia < ib;
}

void bitonic(uint width, bool by_index) {
    for (uint size = 2; size <= width; size <<= 1) {
        for (uint stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint p = gl_LocalInvocationID.x; p < width / 2; p += WG) {
                uint a = (p / stride) * stride * 2 + p % stride;
                uint b = a + stride;
                bool up = (a & size) == 0;
                if (before(b, a, by_index) == up) {
                    KEY_T tk = key[a]; key[a] = key[b]; key[b] = tk;
                    uint ti = idx[a]; idx[a] = idx[b]; idx[b] = ti;
                }
            }
            barrier();
        }
    }
}

void main() {
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = (row / pc.inner) * pc.len * pc.inner + row % pc.inner;
    uint kept = 0;  // the best so far sit in [0, kept)
    for (uint done = 0; done < pc.len;) {
        uint take = min(pc.len - done, MAX_LEN - kept);
        uint width = kept == 0 ? pc.width : MAX_LEN;
        for (uint j = kept + t; j < width; j += WG) {
            bool real = j < kept + take;
            idx[j] = real ? done + j - kept : PAD;
            key[j] = real ? LOAD_X(base + (done + j - kept) * pc.inner) : KEY_T(0);
        }
        barrier();
        bitonic(width, false);
        done += take;
        kept = pc.k;
    }
    if ((pc.flags & 2u) == 0) {  // unsorted: the k winners in index order
        uint kw = 1;
        while (kw < pc.k) kw <<= 1;
        for (uint j = pc.k + t; j < kw; j += WG) idx[j] = PAD;
        barrier();
        bitonic(kw, true);
    }
    Int64Tensor I = Int64Tensor(pc.indices);
    uint out_base = (row / pc.inner) * pc.k * pc.inner + row % pc.inner;
    for (uint j = t; j < pc.k; j += WG) {
        STORE_VALUE(out_base + j * pc.inner, key[j]);
        I.v[out_base + j * pc.inner] = int64_t(idx[j]);
    }
}
