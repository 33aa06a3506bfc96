#version 450
// Col2Im: one invocation per output element (n, c, spatial position of up to 3 dims; absent leading dims are 1):
// the sum, over the block's offsets in order, of the column entry whose sliding block covers the position there
// (float32, from 0, in the order of ORT's CPU EP's accumulation).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint n, channels;
    uint image[3], block[3], stride[3], dilation[3], pad[3], cols[3];
    GROUP_BASE;
} pc;

void main() {
    uint o = FLAT_ID(WG);
    if (o >= pc.n) return;
    uint pixel[3];
    uint rest = o;
    for (int d = 2; d >= 0; --d) { pixel[d] = rest % pc.image[d]; rest /= pc.image[d]; }
    uint c = rest % pc.channels, batch = rest / pc.channels;
    uint blocks = pc.block[0] * pc.block[1] * pc.block[2], positions = pc.cols[0] * pc.cols[1] * pc.cols[2];
    uint row0 = (batch * pc.channels + c) * blocks;
    Tensor X = Tensor(pc.x);
    precise float sum = 0.0;
    if (pc.dilation[0] == 1u && pc.dilation[1] == 1u && pc.dilation[2] == 1u) {
        // undilated: only the offsets k that land on an entry, t - k a multiple of the stride (t = pixel + pad),
        // in the same ascending order (ConvTranspose's upsamplers: kernel 2 x stride, one in `stride` lands)
        uint t[3], first[3];
        for (uint d = 0u; d < 3u; ++d) { t[d] = pixel[d] + pc.pad[d]; first[d] = t[d] % pc.stride[d]; }
        for (uint k0 = first[0]; k0 < pc.block[0] && k0 <= t[0]; k0 += pc.stride[0]) {
            uint l0 = (t[0] - k0) / pc.stride[0];
            if (l0 >= pc.cols[0]) continue;
            for (uint k1 = first[1]; k1 < pc.block[1] && k1 <= t[1]; k1 += pc.stride[1]) {
                uint l1 = (t[1] - k1) / pc.stride[1];
                if (l1 >= pc.cols[1]) continue;
                for (uint k2 = first[2]; k2 < pc.block[2] && k2 <= t[2]; k2 += pc.stride[2]) {
                    uint l2 = (t[2] - k2) / pc.stride[2];
                    if (l2 >= pc.cols[2]) continue;
                    uint b = (k0 * pc.block[1] + k1) * pc.block[2] + k2;
                    sum = sum + LOAD(X, (row0 + b) * positions + (l0 * pc.cols[1] + l1) * pc.cols[2] + l2);
                }
            }
        }
        STORE(Tensor(pc.y), o, sum);
        return;
    }
    for (uint b = 0u; b < blocks; ++b) {
        uint offset[3] = uint[3](b / (pc.block[1] * pc.block[2]), (b / pc.block[2]) % pc.block[1], b % pc.block[2]);
        uint at = 0u;
        bool covered = true;
        for (uint d = 0u; d < 3u; ++d) {
            int t = int(pixel[d] + pc.pad[d]) - int(offset[d] * pc.dilation[d]);
            uint l = uint(max(t, 0)) / pc.stride[d];
            covered = covered && t >= 0 && uint(t) % pc.stride[d] == 0u && l < pc.cols[d];
            at = at * pc.cols[d] + min(l, pc.cols[d] - 1u);
        }
        float v = LOAD(X, (row0 + b) * positions + at);
        if (covered) sum = sum + v;
    }
    STORE(Tensor(pc.y), o, sum);
}
