#version 450
// ReverseSequence: y[.., t, .., b, ..] = x[.., lens[b] - 1 - t, .., b, ..] for t < lens[b], else x itself (the
// time and batch axes are the first two, in either order). A length outside [0, time steps] reports to the
// error word (common.glsl) and is read as the time steps: the run fails, as on ORT's CPU EP.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform Push {
    uint64_t x, lens, y, err;
    uint n, steps, batches, inner;  // inner: the elements of one (time, batch) cell
    uint time_stride, batch_stride;  // in elements: one of them is inner, the other inner * the other axis
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    uint t = (i / pc.time_stride) % pc.steps, b = (i / pc.batch_stride) % pc.batches;
    int64_t len = Int64Tensor(pc.lens).v[b];
    if (len < 0 || len > int64_t(pc.steps)) {
        report_index_error(pc.err);
        len = int64_t(pc.steps);
    }
    uint from = t < uint(len) ? uint(len) - 1u - t : t;
    STORE(Tensor(pc.y), i, LOAD(Tensor(pc.x), i + from * pc.time_stride - t * pc.time_stride));
}
