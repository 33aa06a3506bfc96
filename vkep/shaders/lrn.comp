#version 450
// LRN across channels of an [N, C, ...] tensor: y = x / (bias + alpha / size * sum of x^2 over the
// channels c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2))^beta. One thread per element.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint n, channels, inner, size;   // inner: elements per channel
    float alpha, beta, bias;
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint c = (i / pc.inner) % pc.channels;
    uint base = i - c * pc.inner;
    int lo = max(int(c) - int((pc.size - 1) / 2), 0);
    int hi = min(int(c) + int(pc.size / 2), int(pc.channels) - 1);
    Tensor X = Tensor(pc.x);
    float sum = 0.0;
    for (int k = lo; k <= hi; ++k) {
        float v = LOAD(X, base + uint(k) * pc.inner);
        sum += v * v;
    }
    float v = LOAD(X, i);
    STORE(Tensor(pc.y), i, v / pow_nonnegative(pc.bias + pc.alpha / float(pc.size) * sum, pc.beta));
}
