#version 450
// Outputs computed from push-constant scalars alone. MODE 0 Range: y[i] = start + i * delta (start and
// delta are float32 bits for float types, int64 otherwise; delta 0: a fill). MODE 1, a float Range as ORT's CPU
// EP computes it: one invocation adds delta n times, rounding each sum (start + i * delta differs in the last bit).
// MODE 2 EyeLike: a matrix of `delta` columns, ones where column - row == start (the diagonal k), zeros elsewhere.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t y;
    int64_t start, delta;
    uint n;
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    if (MODE == 2) {
        int64_t row = int64_t(i / uint(pc.delta)), column = int64_t(i % uint(pc.delta));
        STORE(Tensor(pc.y), i, COMP_T(column - row == pc.start ? 1 : 0));
        return;
    }
#if IS_FLOAT
    if (MODE == 1) {
        if (i != 0) return;
        float v = uintBitsToFloat(uint(pc.start)), delta = uintBitsToFloat(uint(pc.delta));
        for (uint k = 0; k < pc.n; ++k) {
            STORE(Tensor(pc.y), k, v);
            v += delta;
        }
        return;
    }
    float v = uintBitsToFloat(uint(pc.start)) + float(i) * uintBitsToFloat(uint(pc.delta));
#else
    int64_t v = pc.start + int64_t(i) * pc.delta;
#endif
    STORE(Tensor(pc.y), i, COMP_T(v));
}
