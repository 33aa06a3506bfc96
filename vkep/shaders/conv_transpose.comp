#version 450
// ConvTranspose in NC[D]HW layout (spatial shapes read as 3-D), as a gather: one thread per output sums
// over the kernel offsets that land on an input pixel (o + pad - k * dilation divisible by the stride),
// then over the input channels of its group. W is [C_in, C_out / group, kD, kH, kW].
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KD = 1;
layout(constant_id = 1) const uint KH = 1;
layout(constant_id = 2) const uint KW = 1;
const uint KSZ = KD * KH * KW;

layout(push_constant, scalar) uniform Push {
    uint64_t x, w, b, y;     // b: bias or 0
    uint cg, mg, groups;     // input channels per group, output channels per group, groups
    uint id, ih, iw;         // input spatial dims
    uint od, oh, ow;         // output spatial dims
    uint sd, sh, sw;         // strides
    uint dd, dh, dw;         // dilations
    int pd, ph, pw;          // leading pads
    GROUP_BASE;
} pc;

// the input index along one axis that kernel offset k maps to output o, or -1
int source(uint o, uint k, int pad, uint stride, uint dil, uint size) {
    int t = int(o) + pad - int(k * dil);
    if (t < 0 || t % int(stride) != 0) return -1;
    t /= int(stride);
    return t < int(size) ? t : -1;
}

void main() {
    uint osz = pc.od * pc.oh * pc.ow, per_batch = pc.groups * pc.mg * osz;
    uint i = FLAT_ID(256);
    if (i >= per_batch) return;
    uint bat = WORKGROUP_ID.z;
    uint oc = i / osz, p = i % osz, g = oc / pc.mg, m = oc % pc.mg;
    uint q = p / pc.ow;
    uint ow = p % pc.ow, oh = q % pc.oh, od = q / pc.oh;
    uint isz = pc.id * pc.ih * pc.iw;
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = (bat * pc.groups + g) * pc.cg * isz;
    uint wbase = (g * pc.cg * pc.mg + m) * KSZ;
    float acc = LOAD(Tensor(PRESENT_OR(pc.b, pc.x)), PRESENT_AT(pc.b, oc));
    acc = pc.b != 0 ? acc : 0.0;
    for (uint kd = 0; kd < KD; ++kd) {
        int d = source(od, kd, pc.pd, pc.sd, pc.dd, pc.id);
        if (d < 0) continue;
        for (uint kh = 0; kh < KH; ++kh) {
            int h = source(oh, kh, pc.ph, pc.sh, pc.dh, pc.ih);
            if (h < 0) continue;
            for (uint kw = 0; kw < KW; ++kw) {
                int w = source(ow, kw, pc.pw, pc.sw, pc.dw, pc.iw);
                if (w < 0) continue;
                uint xi = xbase + (uint(d) * pc.ih + uint(h)) * pc.iw + uint(w);
                uint wi = wbase + (kd * KH + kh) * KW + kw;
                for (uint c = 0; c < pc.cg; ++c) acc += LOAD(X, xi + c * isz) * LOAD(W, wi + c * pc.mg * KSZ);
            }
        }
    }
    STORE(Tensor(pc.y), bat * per_batch + i, acc);
}
