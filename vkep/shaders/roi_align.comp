#version 450
// RoiAlign as ORT's CPU EP computes it (roialign.cc): one thread per output (roi, channel, ph, pw) averages
// (MODE 0) or takes the max of (MODE 1: the largest weighted corner of any sample, ORT's rule) the bilinear
// samples of its bin, in ORT's order of float operations. Samples past a border by more than one pixel add 0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Rois { float v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, rois, batch_indices, y;
    uint n, channels, height, width, out_h, out_w, sampling_ratio;
    float spatial_scale, offset;  // offset: 0.5 for half_pixel, 0 for output_half_pixel
    uint aligned;  // 1 for half_pixel: an ROI may be thinner than a pixel (else at least 1)
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    uint pw = i % pc.out_w, ph = (i / pc.out_w) % pc.out_h, c = (i / (pc.out_w * pc.out_h)) % pc.channels;
    uint r = i / (pc.out_w * pc.out_h * pc.channels);
    Rois rois = Rois(pc.rois);
    precise float start_w = rois.v[r * 4u] * pc.spatial_scale - pc.offset;
    precise float start_h = rois.v[r * 4u + 1u] * pc.spatial_scale - pc.offset;
    precise float end_w = rois.v[r * 4u + 2u] * pc.spatial_scale - pc.offset;
    precise float end_h = rois.v[r * 4u + 3u] * pc.spatial_scale - pc.offset;
    precise float roi_w = end_w - start_w, roi_h = end_h - start_h;
    if (pc.aligned == 0u) {
        roi_w = max(roi_w, 1.0);
        roi_h = max(roi_h, 1.0);
    }
    precise float bin_h = roi_h / float(pc.out_h), bin_w = roi_w / float(pc.out_w);
    uint grid_h = pc.sampling_ratio > 0u ? pc.sampling_ratio : uint(ceil(roi_h / float(pc.out_h)));
    uint grid_w = pc.sampling_ratio > 0u ? pc.sampling_ratio : uint(ceil(roi_w / float(pc.out_w)));
    uint count = max(grid_h * grid_w, 1u);
    uint plane = (uint(Int64Tensor(pc.batch_indices).v[r]) * pc.channels + c) * pc.height * pc.width;
    Tensor x = Tensor(pc.x);
    float h = float(pc.height), w = float(pc.width);
    precise float acc = 0.0;
    bool first = true;
    for (uint iy = 0u; iy < grid_h; ++iy) {
        precise float yy = start_h + float(ph) * bin_h + (float(iy) + 0.5) * bin_h / float(grid_h);
        for (uint ix = 0u; ix < grid_w; ++ix) {
            precise float xx = start_w + float(pw) * bin_w + (float(ix) + 0.5) * bin_w / float(grid_w);
            float w1 = 0.0, w2 = 0.0, w3 = 0.0, w4 = 0.0;
            uint p1 = 0u, p2 = 0u, p3 = 0u, p4 = 0u;
            if (!(yy < -1.0 || yy > h || xx < -1.0 || xx > w)) {
                float sy = max(yy, 0.0), sx = max(xx, 0.0);
                uint y_low = uint(sy), x_low = uint(sx), y_high, x_high;
                if (y_low >= pc.height - 1u) { y_high = y_low = pc.height - 1u; sy = float(y_low); }
                else y_high = y_low + 1u;
                if (x_low >= pc.width - 1u) { x_high = x_low = pc.width - 1u; sx = float(x_low); }
                else x_high = x_low + 1u;
                precise float ly = sy - float(y_low), lx = sx - float(x_low);
                precise float hy = 1.0 - ly, hx = 1.0 - lx;
                w1 = hy * hx; w2 = hy * lx; w3 = ly * hx; w4 = ly * lx;
                p1 = y_low * pc.width + x_low; p2 = y_low * pc.width + x_high;
                p3 = y_high * pc.width + x_low; p4 = y_high * pc.width + x_high;
            }
            precise float v1 = w1 * LOAD(x, plane + p1), v2 = w2 * LOAD(x, plane + p2);
            precise float v3 = w3 * LOAD(x, plane + p3), v4 = w4 * LOAD(x, plane + p4);
            if (MODE == 0u) {
                acc += v1 + v2 + v3 + v4;
            } else {
                acc = first ? v1 : acc;
                first = false;
                acc = max(max(max(max(acc, v1), v2), v3), v4);
            }
        }
    }
    STORE(Tensor(pc.y), i, MODE == 0u ? acc / float(count) : acc);
}
