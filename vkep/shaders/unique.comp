#version 450
// Unique over m items: the elements of x (no axis), or its slices along the axis (each `len` elements: item i's
// element e is x[((e / inner) * m + i) * inner + e % inner]), compared element by element in that order. NaN equals
// NaN and sorts after every number; -0.0 equals 0.0 (an item's first occurrence gives the output its values).
// One invocation per item (MODE 0, 2) or per distinct item (MODE 1):
// MODE 0: first[i] = the first item equal to item i, counts_of[i] = how many there are (first occurrences only),
//         flags[i] = 1 where i is a first occurrence (nonzero.comp then counts and lists them: reps, int64, in
//         index order; their count sizes the outputs);
// MODE 1: for the r-th first occurrence i = reps[r]: its place p (sorted: the first occurrences of smaller
//         items; else r), slot[i] = p; indices[p] = i, counts[p] = counts_of[i], y's item p = item i;
// MODE 2: inverse[i] = slot[first[i]].
// A zero address: that output is not wanted. Loops per invocation: m * len (MODE 0), distinct * len (MODE 1).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint SORTED = 1;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Words { uint v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, indices, inverse, counts, first, counts_of, flags, reps, slot;
    uint m, len, inner, distinct;
    GROUP_BASE;
} pc;

uint at(uint item, uint e) { return ((e / pc.inner) * pc.m + item) * pc.inner + e % pc.inner; }

bool is_nan(COMP_T v) {
#if IS_FLOAT
    return isnan(v);
#else
    return false;
#endif
}

// -1, 0, 1: item a before, equal to, after item b
int compare(uint a, uint b) {
    Tensor X = Tensor(pc.x);
    for (uint e = 0u; e < pc.len; ++e) {
        COMP_T va = LOAD(X, at(a, e)), vb = LOAD(X, at(b, e));
        bool na = is_nan(va), nb = is_nan(vb);
        if (na || nb) {
            if (na && nb) continue;
            return na ? 1 : -1;
        }
        if (va != vb) return va < vb ? -1 : 1;
    }
    return 0;
}

void main() {
    uint i = FLAT_ID(WG);
    Words first = Words(pc.first), slot = Words(pc.slot);
    if (MODE == 0) {
        if (i >= pc.m) return;
        uint f = i;
        for (uint j = 0u; j < i; ++j) {
            if (compare(j, i) == 0) { f = j; break; }
        }
        uint count = 1u;
        if (f == i) {
            for (uint j = i + 1u; j < pc.m; ++j) count += compare(j, i) == 0 ? 1u : 0u;
        }
        first.v[i] = f;
        Words(pc.counts_of).v[i] = count;
        Words(pc.flags).v[i] = f == i ? 1u : 0u;
    } else if (MODE == 1) {
        if (i >= pc.distinct) return;
        uint item = uint(Int64Tensor(pc.reps).v[i]), place = i;
        if (SORTED != 0u) {
            place = 0u;
            for (uint s = 0u; s < pc.distinct; ++s) {
                place += compare(uint(Int64Tensor(pc.reps).v[s]), item) < 0 ? 1u : 0u;
            }
        }
        slot.v[item] = place;
        if (pc.indices != 0) Int64Tensor(pc.indices).v[place] = int64_t(item);
        if (pc.counts != 0) Int64Tensor(pc.counts).v[place] = int64_t(Words(pc.counts_of).v[item]);
        Tensor X = Tensor(pc.x);
        Tensor Y = Tensor(pc.y);
        for (uint e = 0u; e < pc.len; ++e) {
            uint o = e / pc.inner, k = e % pc.inner;
            Y.v[(o * pc.distinct + place) * pc.inner + k] = X.v[at(item, e)];
        }
    } else {
        if (i >= pc.m || pc.inverse == 0) return;
        Int64Tensor(pc.inverse).v[i] = int64_t(slot.v[first.v[i]]);
    }
}
