#version 450
// com.microsoft CropAndResize as ORT's CPU EP computes it (contrib_ops/cpu/crop_and_resize.cc, TensorFlow's
// crop_and_resize): one invocation an output (roi, channel, ph, pw). An ROI [y1, x1, y2, x2] in normalized
// coordinates; with crop_h > 1, in_y = y1 (H - 1) + ph * ((y2 - y1) (H - 1) / (crop_h - 1)), the first row y1 (H - 1)
// and the last y2 (H - 1) exactly; with crop_h = 1, 0.5 (y1 + y2) (H - 1) (x likewise). A row or column outside
// [0, H - 1] ([0, W - 1]) is extrapolation_value. Bilinear: top = tl + (tr - tl) lx, bottom likewise, then
// top + (bottom - top) ly, each float operation rounded (no fma); nearest: roundf (halves away from zero).
// A batch index outside [0, N) fails the run (the error word: the CPU EP reads past X there).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;  // 0 bilinear, 1 nearest

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Rois { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Index32 { int v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, rois, batch_indices, y, err;
    uint n, batch, channels, height, width, crop_h, crop_w;
    float extrapolation_value;
    GROUP_BASE;
} pc;

precise float position(float lo, float hi, uint p, uint crop, uint size) {
    float extent = float(size - 1u);
    if (crop <= 1u) return (0.5 * (lo + hi)) * extent;
    if (p == 0u) return lo * extent;
    if (p == crop - 1u) return hi * extent;
    float scale = precise_div((hi - lo) * extent, float(crop - 1u));
    return lo * extent + float(p) * scale;
}

int round_away(float v) {
    precise float t = trunc(v);
    if (abs(v - t) >= 0.5) t += sign(v);
    return int(t);
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint pw = i % pc.crop_w, ph = (i / pc.crop_w) % pc.crop_h;
    uint c = (i / (pc.crop_w * pc.crop_h)) % pc.channels, r = i / (pc.crop_w * pc.crop_h * pc.channels);
    int b = Index32(pc.batch_indices).v[r];
    if (b < 0 || b >= int(pc.batch)) {
        report_index_error(pc.err);
        STORE(Tensor(pc.y), i, 0.0);
        return;
    }
    Rois rois = Rois(pc.rois);
    precise float in_y = position(rois.v[r * 4u], rois.v[r * 4u + 2u], ph, pc.crop_h, pc.height);
    precise float in_x = position(rois.v[r * 4u + 1u], rois.v[r * 4u + 3u], pw, pc.crop_w, pc.width);
    if (in_y < 0.0 || in_y > float(pc.height - 1u) || in_x < 0.0 || in_x > float(pc.width - 1u)) {
        STORE(Tensor(pc.y), i, pc.extrapolation_value);
        return;
    }
    Tensor x = Tensor(pc.x);
    uint plane = (uint(b) * pc.channels + c) * pc.height * pc.width;
    float v;
    if (MODE == 0) {
        int top = int(floor(in_y)), bottom = int(ceil(in_y)), left = int(floor(in_x)), right = int(ceil(in_x));
        precise float ly = in_y - float(top), lx = in_x - float(left);
        float tl = LOAD(x, plane + uint(top) * pc.width + uint(left));
        float tr = LOAD(x, plane + uint(top) * pc.width + uint(right));
        float bl = LOAD(x, plane + uint(bottom) * pc.width + uint(left));
        float br = LOAD(x, plane + uint(bottom) * pc.width + uint(right));
        precise float t = tl + (tr - tl) * lx;
        precise float bo = bl + (br - bl) * lx;
        precise float o = t + (bo - t) * ly;
        v = o;
    } else {
        v = LOAD(x, plane + uint(round_away(in_y)) * pc.width + uint(round_away(in_x)));
    }
    STORE(Tensor(pc.y), i, v);
}
