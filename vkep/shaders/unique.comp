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
// Items of one element (len 1) take a sort instead of MODE 0's pairs, both modes in one workgroup:
// MODE 3 sorts the item indices by (value, index) into `order` (a bitonic network over `padded` entries, a power
// of two, in device memory); MODE 4 walks the sorted order in 64 chunks (a scan): each group of equal items has
// its head (its first occurrence), so first[], counts_of[] and flags[] as MODE 0 writes them, and slot[head] = the
// group's rank (MODE 1 then reads its place there: `ranked`).
// Past SORT_MAX items (one workgroup's network within lavapipe's loop count), MODE 5 sorts them a dispatch a step of
// the network, an invocation a pair (`step`: log2 of the network's size << 8 | log2 of the stride; 0 fills `order`).
// FLOAT64: float64 items, compared in double (common.glsl's VAL). A zero address: that output is not wanted. Loops per invocation: m * len (MODE 0), distinct * len (MODE 1),
// log2(padded)^2 / 2 * padded / 128 (MODE 3), 2 * m / 64 + 64 (MODE 4). MODE 3 and 4 take items of one element.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint SORTED = 1;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Words { uint v[]; };
// (the sort's lanes read what other lanes wrote before the workgroup's barrier)
layout(buffer_reference, scalar, buffer_reference_align = 4) coherent buffer SharedWords { uint v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, indices, inverse, counts, first, counts_of, flags, reps, slot, order;
    uint m, len, inner, distinct, padded, ranked, step;
    GROUP_BASE;
} pc;

uint at(uint item, uint e) { return ((e / pc.inner) * pc.m + item) * pc.inner + e % pc.inner; }

bool is_nan(VAL v) {
#if IS_FLOAT || defined(FLOAT64)
    return isnan(v);
#else
    return false;
#endif
}

// -1, 0, 1: item a before, equal to, after item b
int compare(uint a, uint b) {
    for (uint e = 0u; e < pc.len; ++e) {
        VAL va = LOAD_VAL(pc.x, at(a, e)), vb = LOAD_VAL(pc.x, at(b, e));
        bool na = is_nan(va), nb = is_nan(vb);
        if (na || nb) {
            if (na && nb) continue;
            return na ? 1 : -1;
        }
        if (va != vb) return va < vb ? -1 : 1;
    }
    return 0;
}

#define PAD 0xffffffffu

// compare() for items of one element (MODE 3, 4), without a loop (lavapipe counts every iteration)
int compare_one(uint a, uint b) {
    VAL va = LOAD_VAL(pc.x, a), vb = LOAD_VAL(pc.x, b);
    bool na = is_nan(va), nb = is_nan(vb);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
    return va == vb ? 0 : (va < vb ? -1 : 1);
}

// whether item a (an entry of `order`: PAD sorts last) goes before item b: by value, then by index
bool before(uint a, uint b) {
    if (a == PAD || b == PAD) return a < b;
    int c = compare_one(a, b);
    return c < 0 || (c == 0 && a < b);
}

shared uint chunk_heads[WG], chunk_last[WG];

uint first_entry(uint p) { return p < pc.m ? p : PAD; }  // `order` before the network: the items, then PAD

// the network's pair p at (size, stride): its entries a and a + stride swapped where out of the pair's direction
// (a macro: the one-workgroup sort's buffer is coherent, the dispatch-a-step sort's is not)
#define COMPARE_SWAP(order, p, size, stride) {                                          \
    uint a = ((p) / (stride)) * (stride) * 2u + (p) % (stride), b = a + (stride);      \
    uint va = order.v[a], vb = order.v[b];                                              \
    if (before(vb, va) == ((a & (size)) == 0u)) { order.v[a] = vb; order.v[b] = va; } \
}

void sort_items() {
    SharedWords order = SharedWords(pc.order);
    uint lane = gl_LocalInvocationID.x;
    for (uint p = lane; p < pc.padded; p += WG) order.v[p] = first_entry(p);
    groupMemoryBarrier();  // (workgroup scope: the sort is one workgroup's; device scope needs a feature)
    barrier();
    for (uint size = 2u; size <= pc.padded; size <<= 1u) {
        for (uint stride = size >> 1u; stride > 0u; stride >>= 1u) {
            for (uint p = lane; p < pc.padded / 2u; p += WG) COMPARE_SWAP(order, p, size, stride)
            groupMemoryBarrier();  // (workgroup scope: the sort is one workgroup's; device scope needs a feature)
            barrier();
        }
    }
}

// one step of the bitonic network (MODE 5): the pairs sort_items' inner loop takes, each its own invocation
void sort_step() {
    Words order = Words(pc.order);
    uint p = FLAT_ID(WG);
    if (p >= pc.padded / 2u) return;
    if (pc.step == 0u) {
        order.v[2u * p] = first_entry(2u * p);
        order.v[2u * p + 1u] = first_entry(2u * p + 1u);
        return;
    }
    COMPARE_SWAP(order, p, 1u << (pc.step >> 8u), 1u << (pc.step & 0xffu))
}

// the groups of equal items in sorted order: each lane a chunk, heads counted, then each group's head and rank
void scan_groups() {
    Words order = Words(pc.order), first = Words(pc.first), slot = Words(pc.slot);
    uint lane = gl_LocalInvocationID.x, size = (pc.m + WG - 1u) / WG;
    uint begin = min(lane * size, pc.m), end = min(begin + size, pc.m);
    uint heads = 0u, last = 0u;
    for (uint p = begin; p < end; ++p) {
        if (p == 0u || compare_one(order.v[p - 1u], order.v[p]) != 0) { heads += 1u; last = p; }
    }
    chunk_heads[lane] = heads;
    chunk_last[lane] = heads != 0u ? last : 0u;
    barrier();
    uint rank = 0u, head = 0u;  // heads before this chunk, the last head before it
    for (uint c = 0u; c < lane; ++c) {
        rank += chunk_heads[c];
        if (chunk_heads[c] != 0u) head = chunk_last[c];
    }
    for (uint p = begin; p < end; ++p) {
        uint item = order.v[p];
        if (p == 0u || compare_one(order.v[p - 1u], item) != 0) { rank += 1u; head = p; }
        uint lead = order.v[head];
        first.v[item] = lead;
        Words(pc.flags).v[item] = head == p ? 1u : 0u;
        if (head == p) slot.v[item] = rank - 1u;
        if (p + 1u == pc.m || compare_one(order.v[p + 1u], item) != 0) Words(pc.counts_of).v[lead] = p - head + 1u;
    }
}

void main() {
    if (MODE == 3) { sort_items(); return; }
    if (MODE == 4) { scan_groups(); return; }
    if (MODE == 5) { sort_step(); return; }
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
        if (SORTED != 0u && pc.ranked != 0u) {
            place = slot.v[item];
        } else if (SORTED != 0u) {
            place = 0u;
            for (uint s = 0u; s < pc.distinct; ++s) {
                place += compare(uint(Int64Tensor(pc.reps).v[s]), item) < 0 ? 1u : 0u;
            }
        }
        slot.v[item] = place;
        if (pc.indices != 0) Int64Tensor(pc.indices).v[place] = int64_t(item);
        if (pc.counts != 0) Int64Tensor(pc.counts).v[place] = int64_t(Words(pc.counts_of).v[item]);
        for (uint e = 0u; e < pc.len; ++e) {
            uint o = e / pc.inner, k = e % pc.inner;
            STORE_VAL(pc.y, (o * pc.distinct + place) * pc.inner + k, LOAD_VAL(pc.x, at(item, e)));
        }
    } else {
        if (i >= pc.m || pc.inverse == 0) return;
        Int64Tensor(pc.inverse).v[i] = int64_t(slot.v[first.v[i]]);
    }
}
