#version 450
// MaxUnpool: y is zero but where an index of I names it, which takes x at that index, the last such x where several
// name one element (ORT's CPU EP writes them in order). Three passes, one invocation an element:
// MODE 0 clears `winner` (one uint an element of y); MODE 1, per element i of x: winner[I[i]] = max(it, i + 1)
// (an index outside y is reported, the run then fails as on the CPU EP); MODE 2, per element j of y:
// y[j] = x[winner[j] - 1], or 0 where no index named it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Words { uint v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, idx, y, winner, err;
    uint n, size;  // n: elements of x (MODE 1), of y (MODE 0, 2); size: elements of y
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    Words winner = Words(pc.winner);
    if (MODE == 0) {
        winner.v[i] = 0u;
    } else if (MODE == 1) {
        int64_t at = Int64Tensor(pc.idx).v[i];
        if (at < 0 || at >= int64_t(pc.size)) {
            report_index_error(pc.err);
            return;
        }
        atomicMax(winner.v[uint(at)], i + 1u);
    } else {
        uint w = winner.v[i];
        Tensor X = Tensor(pc.x);
        STORE(Tensor(pc.y), i, w != 0u ? LOAD(X, w - 1u) : COMP_T(0));
    }
}
