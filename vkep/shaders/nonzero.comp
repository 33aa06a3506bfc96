#version 450
// NonZero in two passes over chunks of WG elements (one element a lane, a chunk a workgroup):
// MODE 0 counts each chunk's non-zero elements into counts[chunk]; the kernel reads the counts back (the output's
// length is their sum) and allocates y [rank, total];
// MODE 1 writes each non-zero element's coordinates (int64, row-major order of the flat index) at its place:
// the chunks before it (summed by the workgroup from the counts) plus the non-zero elements before it in its own
// chunk (a scan in shared memory).
// Zero is compared in the compute type: -0.0 is zero, NaN is not, as ORT's CPU EP (x != T(0)).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
#define MAX_RANK 8
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Counts { uint v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, counts, y;
    uint n, total, rank;
    uint dims[MAX_RANK];
    GROUP_BASE;
} pc;

shared uint scan[WG];

void main() {
    uint lane = gl_LocalInvocationID.x, chunk = FLAT_GROUP, i = chunk * WG + lane;
    // (the load reads a valid element either way, then the choice: a driver may perform a load under a test)
    bool nonzero = i < pc.n && LOAD(Tensor(pc.x), min(i, pc.n - 1u)) != COMP_T(0);
    if (MODE == 0) {
        scan[lane] = nonzero ? 1u : 0u;
        barrier();
        SHARED_SUM(scan, lane, WG)
        if (lane == 0u) Counts(pc.counts).v[chunk] = scan[0];
        return;
    }
    // the chunks before this one (each lane sums a strided share, then a tree)
    uint before = 0u;
    for (uint c = lane; c < chunk; c += WG) before += Counts(pc.counts).v[c];
    scan[lane] = before;
    barrier();
    SHARED_SUM(scan, lane, WG)
    uint base = scan[0];
    barrier();
    // inclusive scan of the flags (Hillis-Steele), then this lane's place
    scan[lane] = nonzero ? 1u : 0u;
    barrier();
    for (uint step = 1u; step < WG; step <<= 1u) {
        uint add = lane >= step ? scan[lane - step] : 0u;
        barrier();
        scan[lane] += add;
        barrier();
    }
    if (!nonzero) return;
    uint place = base + scan[lane] - 1u, rest = i;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint size = pc.dims[d];
        Int64Tensor(pc.y).v[uint(d) * pc.total + place] = int64_t(rest % size);
        rest /= size;
    }
}
