#version 450
// MaxRoiPool (ONNX 1) as ORT's CPU EP computes it (roi_pool.cc): one invocation an output (roi, channel, ph, pw).
// An ROI [batch, x1, y1, x2, y2]: its batch truncated (out of [0, N): the run fails, as the CPU EP's enforce),
// its corners round(coordinate * spatial_scale) (float product, halves away from zero), at least 1 x 1; a bin from
// floor(p * bin) to ceil((p + 1) * bin), bin = size / pooled (correctly rounded), shifted and clipped to the image.
// An empty bin gives 0; else the max from the lowest float by std::max(v, y) = v < y ? y : v (a NaN is taken, and
// dropped again by the next element).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "precise.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Rois { float v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, rois, y, err;
    uint n, batch, channels, height, width, pooled_h, pooled_w;
    float spatial_scale;
    GROUP_BASE;
} pc;

int round_away(float v) {  // std::round of a float, as an int
    precise float p = v * pc.spatial_scale;
    precise float t = trunc(p);
    if (abs(p - t) >= 0.5) t += sign(p);
    return int(t);
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint pw = i % pc.pooled_w, ph = (i / pc.pooled_w) % pc.pooled_h;
    uint c = (i / (pc.pooled_w * pc.pooled_h)) % pc.channels, r = i / (pc.pooled_w * pc.pooled_h * pc.channels);
    Rois rois = Rois(pc.rois);
    float b = rois.v[r * 5u];
    if (!(b > -1.0 && b < float(pc.batch))) {
        report_index_error(pc.err);
        STORE(Tensor(pc.y), i, 0.0);
        return;
    }
    int start_w = round_away(rois.v[r * 5u + 1u]), start_h = round_away(rois.v[r * 5u + 2u]);
    int end_w = round_away(rois.v[r * 5u + 3u]), end_h = round_away(rois.v[r * 5u + 4u]);
    int roi_h = max(end_h - start_h + 1, 1), roi_w = max(end_w - start_w + 1, 1);
    precise float bin_h = precise_div(float(roi_h), float(pc.pooled_h));
    precise float bin_w = precise_div(float(roi_w), float(pc.pooled_w));
    precise float h0 = float(ph) * bin_h, h1 = float(ph + 1u) * bin_h;
    precise float w0 = float(pw) * bin_w, w1 = float(pw + 1u) * bin_w;
    int height = int(pc.height), width = int(pc.width);
    int hstart = clamp(int(floor(h0)) + start_h, 0, height), hend = clamp(int(ceil(h1)) + start_h, 0, height);
    int wstart = clamp(int(floor(w0)) + start_w, 0, width), wend = clamp(int(ceil(w1)) + start_w, 0, width);
    if (hend <= hstart || wend <= wstart) {
        STORE(Tensor(pc.y), i, 0.0);
        return;
    }
    Tensor x = Tensor(pc.x);
    uint plane = (uint(int(b)) * pc.channels + c) * pc.height * pc.width;
    float m = -3.402823466e38;
    for (int h = hstart; h < hend; ++h) {
        // columns in steps of 8 unrolled: lavapipe ends an invocation's loops after 65,535 iterations in all
        for (int w8 = wstart; w8 < wend; w8 += 8) {
            [[unroll]] for (int j = 0; j < 8; ++j) {
                int w = w8 + j;
                if (w < wend) {
                    float v = LOAD(x, plane + uint(h * width + w));
                    m = v < m ? m : v;
                }
            }
        }
    }
    STORE(Tensor(pc.y), i, m);
}
