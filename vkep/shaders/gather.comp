#version 450
// Index-driven reads; indices (int32 or int64, IDX64) are read on the device, negatives wrap, and
// out-of-range ones are clamped so that no read leaves the tensor, and reported (common.glsl). WRAP 0: a negative
// index is out of range too (ai.onnx.ml ArrayFeatureExtractor: MODE 0 over the last axis).
//   MODE 0 Gather:         p0 inner, p1 index count, p2 axis length; out = [outer, count, inner]
//   MODE 1 GatherElements: out shape = dims (rank), data strides = strides, p0 axis, p1 axis length
//   MODE 2 GatherND:       p0 inner (slice size), p1 index rows per batch, p2 K (index depth),
//                          p3 data elements per batch; dims/strides = the K indexed data dims
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint IDX64 = 1;
layout(constant_id = 2) const uint WRAP = 1;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32Tensor { int v[]; };

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t x, idx, y, err;  // err: the device's error word (common.glsl)
    uint n, p0, p1, p2, p3, rank;
    uint dims[MAX_RANK];
    uint strides[MAX_RANK];
    GROUP_BASE;
} pc;

uint index_at(uint k, uint len) {
    if (IDX64 == 1) {
        int64_t v = Int64Tensor(pc.idx).v[k];
        if (v < 0 && WRAP != 0) v += int64_t(len);
        if (v < 0 || v >= int64_t(len)) report_index_error(pc.err);
        return uint(clamp(v, int64_t(0), int64_t(len) - 1));
    }
    int v = Int32Tensor(pc.idx).v[k];
    if (v < 0 && WRAP != 0) v += int(len);
    if (v < 0 || v >= int(len)) report_index_error(pc.err);
    return uint(clamp(v, 0, int(len) - 1));
}

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    uint src = 0;
    if (MODE == 0) {
        uint r = i % pc.p0, t = i / pc.p0;
        uint j = t % pc.p1, o = t / pc.p1;
        src = (o * pc.p2 + index_at(j, pc.p2)) * pc.p0 + r;
    } else if (MODE == 1) {
        uint rem = i;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint c = rem % pc.dims[d];
            rem /= pc.dims[d];
            if (d != int(pc.p0)) src += c * pc.strides[d];
        }
        src += index_at(i, pc.p1) * pc.strides[pc.p0];
    } else {
        uint row = i / pc.p0;
        src = (row / pc.p1) * pc.p3 + i % pc.p0;
        for (uint t = 0; t < pc.p2; ++t) src += index_at(row * pc.p2 + t, pc.dims[t]) * pc.strides[t];
    }
    STORE(Tensor(pc.y), i, LOAD(Tensor(pc.x), src));
}
