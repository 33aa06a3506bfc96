#version 450
// AffineGrid: one invocation per grid point of [N, (D,) H, W]; it writes the point's 2 (or 3) coordinates
// theta[n] * (x, y(, z), 1). The base coordinates are those of Eigen's LinSpaced(size, -1, 1) as ORT's CPU EP
// takes them: -1 + i * (2 / (size - 1)), the last exactly 1 (a single point: 1), then, without align_corners,
// times (size - 1) / size. `precise` keeps each product and sum rounded as the CPU EP rounds them (no fma).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;

layout(push_constant, scalar) uniform Push {
    uint64_t theta, y;
    uint n, w, h, d, dims, align;
    GROUP_BASE;
} pc;

float base(uint i, uint size) {
    precise float v = i == size - 1u ? 1.0 : -1.0 + float(i) * (2.0 / float(size - 1u));
    if (pc.align == 0u) v = v * float(size - 1u) / float(size);
    return v;
}

void main() {
    uint p = FLAT_ID(WG);
    if (p >= pc.n) return;
    uint i = p % pc.w, j = (p / pc.w) % pc.h, k = (p / (pc.w * pc.h)) % pc.d, batch = p / (pc.w * pc.h * pc.d);
    float at[3] = float[3](base(i, pc.w), base(j, pc.h), base(k, pc.d));
    Tensor T = Tensor(pc.theta);
    Tensor Y = Tensor(pc.y);
    uint row = pc.dims + 1u, t = batch * pc.dims * row;
    for (uint r = 0u; r < pc.dims; ++r) {
        // summed from the last product (Eigen's order for the CPU EP's 3x3 product: p0 + (p1 + p2))
        precise float v = LOAD(T, t + r * row + pc.dims - 1u) * at[pc.dims - 1u];
        for (int c = int(pc.dims) - 2; c >= 0; --c) v = LOAD(T, t + r * row + uint(c)) * at[c] + v;
        v = v + LOAD(T, t + r * row + pc.dims);
        STORE(Y, p * pc.dims + r, v);
    }
}
