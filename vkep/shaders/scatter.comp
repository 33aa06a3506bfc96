#version 450
// ScatterND / ScatterElements in two dispatches: MODE 0 copies data into the output, then one of the
// scatter modes writes the updates. Duplicate targets are only ever written by one invocation, in
// index order, so every reduction (REDUCE 0 none, 1 add, 2 mul, 3 max, 4 min) is exact and ordered.
// Max and min as the CPU EP does them (found by trying it): the update is taken unless the value there is greater
// (max) or less (min), so a NaN in the update is taken, one in the output replaced, and a tie of -0 and +0 gives the
// update's. The FLOAT64 variant (common.glsl's VAL) reduces float64 updates in double; float64 moves (the copy,
// reduction none) take the int64 variant.
//   MODE 1 ScatterND, no reduction: one invocation per update element; p0 inner (slice size), p1 K
//   MODE 2 ScatterND, reduction: one invocation per slice position r < inner, looping over the rows [p3, p2)
//          (a dispatch each run of rows that lavapipe's loop count allows, in order)
//   MODE 3 ScatterElements: one invocation per update line along the axis, its elements [p3, p2) (likewise);
//          dims = updates' shape, strides = data strides, p0 axis, p1 data axis length
//   MODE 4 TensorScatter: one invocation per update element, the update [outer, seq, inner] written at rows
//          write_indices[b] + s of the cache [outer, max_seq, inner] (b = the outer row / dims[0]); p0 inner,
//          p1 seq, p2 max_seq, p3 1: circular (rows mod max_seq), 0: linear (past the end: an index error);
//          without write_indices (idx 0) from row 0
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint IDX64 = 1;
layout(constant_id = 2) const uint REDUCE = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32Tensor { int v[]; };

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t x, idx, upd, y, err;  // err: the device's error word (common.glsl)
    uint n, p0, p1, p2, p3, rank;
    uint dims[MAX_RANK];
    uint strides[MAX_RANK];
    GROUP_BASE;
} pc;

uint index_at(uint k, uint len) {
    if (IDX64 == 1) {
        int64_t v = Int64Tensor(pc.idx).v[k];
        if (v < 0) v += int64_t(len);
        if (v < 0 || v >= int64_t(len)) report_index_error(pc.err);
        return uint(clamp(v, int64_t(0), int64_t(len) - 1));
    }
    int v = Int32Tensor(pc.idx).v[k];
    if (v < 0) v += int(len);
    if (v < 0 || v >= int(len)) report_index_error(pc.err);
    return uint(clamp(v, 0, int(len) - 1));
}

void put(uint dst, VAL u) {
    if (REDUCE == 0) {
        STORE_VAL(pc.y, dst, u);
        return;
    }
    VAL v = LOAD_VAL(pc.y, dst);
    if (REDUCE == 1) v = v + u;
    else if (REDUCE == 2) v = v * u;
    else if (REDUCE == 3) v = v > u ? v : u;  // (the CPU EP's max and min: see above; GLSL's leave NaN undefined)
    else v = v < u ? v : u;
    STORE_VAL(pc.y, dst, v);
}

uint nd_target(uint row, uint r) {
    uint dst = r;
    for (uint t = 0; t < pc.p1; ++t) dst += index_at(row * pc.p1 + t, pc.dims[t]) * pc.strides[t];
    return dst;
}

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    Tensor U = Tensor(pc.upd);
    if (MODE == 0) {
        STORE(Tensor(pc.y), i, LOAD(Tensor(pc.x), i));
    } else if (MODE == 1) {
        put(nd_target(i / pc.p0, i % pc.p0), LOAD_VAL(pc.upd, i));
    } else if (MODE == 2) {
        for (uint row = pc.p3; row < pc.p2; ++row) put(nd_target(row, i), LOAD_VAL(pc.upd, row * pc.p0 + i));
    } else if (MODE == 4) {
        uint r = i % pc.p0, line = i / pc.p0;
        uint row = line % pc.p1, outer = line / pc.p1;
        int64_t at = pc.idx == 0 ? int64_t(0) : Int64Tensor(pc.idx).v[outer / pc.dims[0]];
        if (at < 0) report_index_error(pc.err);
        at = max(at, int64_t(0)) + int64_t(row);
        if (pc.p3 != 0) at %= int64_t(pc.p2);
        else if (at >= int64_t(pc.p2)) { report_index_error(pc.err); return; }
        STORE(Tensor(pc.y), (outer * pc.p2 + uint(at)) * pc.p0 + r, LOAD(U, i));
    } else {
        uint axis = pc.p0, len = pc.dims[axis];
        uint inner = 1;
        for (uint d = axis + 1; d < pc.rank; ++d) inner *= pc.dims[d];
        uint base = (i / inner) * len * inner + i % inner;
        uint rem = base, dst = 0;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint c = rem % pc.dims[d];
            rem /= pc.dims[d];
            if (d != int(axis)) dst += c * pc.strides[d];
        }
        for (uint l = pc.p3; l < pc.p2; ++l) {
            uint k = base + l * inner;
            put(dst + index_at(k, pc.p1) * pc.strides[axis], LOAD_VAL(pc.upd, k));
        }
    }
}
