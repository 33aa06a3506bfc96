#version 450
// ArgMax / ArgMin along one axis of a tensor read as [outer, axis, inner]; int64 indices out.
// SPLIT=0: one thread per output element; SPLIT=1: one workgroup per output element (long axes), of
// specialization constant 2 threads (see reduce.comp on lavapipe's loop budget). FLOAT64: float64 values, compared
// in double.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FLOAT64
#define VALUE_T double
#define LOAD_X(i) Doubles(pc.x).v[i]
#else
#define VALUE_T COMP_T
#define LOAD_X(i) LOAD(Tensor(pc.x), i)
#endif

#define WG gl_WorkGroupSize.x
#define MAX_WG 1024
#define NONE 0xffffffffu
layout(local_size_x_id = 2) in;
layout(constant_id = 0) const uint OP = 0;  // 0 argmax, 1 argmin
layout(constant_id = 1) const uint SPLIT = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint rows, len, inner, last;  // last: select_last_index
    GROUP_BASE;
} pc;

shared VALUE_T best_v[MAX_WG];
shared uint best_i[MAX_WG];

// whether (v, i) wins over (w, j); indices are visited in increasing order within a thread
bool wins(VALUE_T v, uint i, VALUE_T w, uint j) {
    if (j == NONE) return i != NONE;
    if (i == NONE) return false;
    if (v == w) return pc.last != 0 ? i > j : i < j;
    return OP == 0 ? v > w : v < w;
}

void main() {
    uint row, first, step;
    if (SPLIT == 1) {
        row = FLAT_GROUP;
        first = gl_LocalInvocationID.x;
        step = WG;
    } else {
        row = FLAT_ID(WG);
        first = 0;
        step = 1;
    }
    if (row >= pc.rows) return;  // uniform per workgroup in SPLIT mode
    uint base = (row / pc.inner) * pc.len * pc.inner + row % pc.inner;
    VALUE_T bv = VALUE_T(0);
    uint bi = NONE;
    for (uint k = first; k < pc.len; k += step) {
        VALUE_T v = LOAD_X(base + k * pc.inner);
        if (wins(v, k, bv, bi)) { bv = v; bi = k; }
    }
    if (SPLIT == 1) {
        uint t = gl_LocalInvocationID.x;
        best_v[t] = bv;
        best_i[t] = bi;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (t < s && wins(best_v[t + s], best_i[t + s], best_v[t], best_i[t])) {
                best_v[t] = best_v[t + s];
                best_i[t] = best_i[t + s];
            }
            barrier();
        }
        if (t != 0) return;
        bi = best_i[0];
    }
    Int64Tensor(pc.y).v[row] = int64_t(bi);
}
