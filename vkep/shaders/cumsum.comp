#version 450
// CumSum (OP 0) or CumProd (OP 1) along one axis of a tensor read as [outer, axis, inner]. SPLIT=0: one
// thread scans one line, in order as ORT's CPU EP (every float line the loop budget allows: reduce.py).
// SPLIT=1 (long lines): one workgroup per line; each thread combines a contiguous segment, the segment
// totals are scanned in shared memory, then each thread rescans its segment from the total of the segments
// before it. The workgroup size is specialization constant 1 (see reduce.comp on
// lavapipe's loop budget).
// FLOAT64: float64 tensors summed in double (common.glsl's VAL).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint SPLIT = 0;
layout(constant_id = 2) const uint OP = 0;
#define IDENTITY VAL(OP == 1 ? 1 : 0)
VAL combine(VAL a, VAL b) { return OP == 1 ? a * b : a + b; }

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint lines, len, inner, exclusive, reverse;
    GROUP_BASE;
} pc;

shared VAL sums[256];

// scans positions [lo, hi) of a line starting from acc
void scan(uint base, uint lo, uint hi, VAL acc) {
    for (uint j = lo; j < hi; ++j) {
        uint i = base + (pc.reverse != 0 ? pc.len - 1 - j : j) * pc.inner;
        VAL v = LOAD_VAL(pc.x, i);
        if (pc.exclusive != 0) { STORE_VAL(pc.y, i, acc); acc = combine(acc, v); }
        else { acc = j == 0u ? v : combine(acc, v); STORE_VAL(pc.y, i, acc); }  // (the first element copied, as ORT: -0)
    }
}

void main() {
    if (SPLIT == 0) {
        uint line = FLAT_ID(WG);
        if (line >= pc.lines) return;
        scan((line / pc.inner) * pc.len * pc.inner + line % pc.inner, 0, pc.len, IDENTITY);
        return;
    }
    uint line = FLAT_GROUP;
    if (line >= pc.lines) return;  // uniform per workgroup
    uint t = gl_LocalInvocationID.x;
    uint base = (line / pc.inner) * pc.len * pc.inner + line % pc.inner;
    uint seg = (pc.len + WG - 1) / WG;
    uint lo = min(t * seg, pc.len), hi = min(lo + seg, pc.len);
    VAL total = IDENTITY;
    for (uint j = lo; j < hi; ++j)
        total = combine(total, LOAD_VAL(pc.x, base + (pc.reverse != 0 ? pc.len - 1 - j : j) * pc.inner));
    sums[t] = total;
    barrier();
    for (uint off = 1; off < WG; off <<= 1) {  // inclusive scan of the segment totals
        VAL v = t >= off ? sums[t - off] : IDENTITY;
        barrier();
        sums[t] = combine(sums[t], v);
        barrier();
    }
    scan(base, lo, hi, t > 0 ? sums[t - 1] : IDENTITY);  // (no division: products may hold zeros)
}
