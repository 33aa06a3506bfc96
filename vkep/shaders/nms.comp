#version 450
// NonMaxSuppression, one workgroup per (batch, class), as ORT's CPU EP selects (non_max_suppression.cc):
// MODE 0: the candidates (every box, or those scoring above score_threshold) are marked alive; then, until none
// is left or max_per_class are chosen, the alive box of the highest score (ties: the lower index) is chosen and
// every alive box it overlaps by more than iou_threshold leaves (the IoU computed in ORT's order of float
// operations). The chosen box indices go to chosen[bc * max_per_class + k], their count to counts[bc]. A dispatch
// takes the rounds [first_round, end_round) (lavapipe's loop budget: vkep/kernels/nms.py); one after the first
// goes on from the alive flags and the count the one before left (where it ran out of boxes, so does this one).
// MODE 1: after the kernel read the counts (the output's length is their sum), each workgroup writes its
// (batch, class, box) triples at its place: the counts of the (batch, class) pairs before it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint CENTER_POINT_BOX = 0;
layout(constant_id = 2) const uint HAS_SCORE_THRESHOLD = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Uints { uint v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t boxes, scores, alive, chosen, counts, y;
    uint boxes_n, classes, max_per_class;
    float iou_threshold, score_threshold;
    uint first_round, end_round;  // MODE 0: this dispatch's rounds (boxes chosen)
} pc;

shared float best_score[WG];
shared uint best_index[WG];
shared uint chosen_count;

// box i's (x min, y min, x max, y max), as ORT's SuppressByIOU derives them
vec4 corners(uint b, uint i) {
    Floats box = Floats(pc.boxes);
    uint at = (b * pc.boxes_n + i) * 4u;
    float p0 = box.v[at], p1 = box.v[at + 1u], p2 = box.v[at + 2u], p3 = box.v[at + 3u];
    if (CENTER_POINT_BOX == 0u)  // [y1, x1, y2, x2], either corner first
        return vec4(p1 >= p3 ? p3 : p1, p0 >= p2 ? p2 : p0, p1 >= p3 ? p1 : p3, p0 >= p2 ? p0 : p2);
    float half_w = p2 / 2.0, half_h = p3 / 2.0;  // [x center, y center, width, height]
    return vec4(p0 - half_w, p1 - half_h, p0 + half_w, p1 + half_h);
}

bool suppresses(vec4 a, vec4 c) {
    float ix0 = max(a.x, c.x), ix1 = min(a.z, c.z);
    if (ix1 <= ix0) return false;
    float iy0 = max(a.y, c.y), iy1 = min(a.w, c.w);
    if (iy1 <= iy0) return false;
    precise float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0.0) return false;
    precise float area_a = (a.z - a.x) * (a.w - a.y);
    precise float area_c = (c.z - c.x) * (c.w - c.y);
    precise float union_area = area_a + area_c - inter;
    if (area_a <= 0.0 || area_c <= 0.0 || union_area <= 0.0) return false;
    precise float iou = inter / union_area;
    return iou > pc.iou_threshold;
}

void main() {
    uint lane = gl_LocalInvocationID.x, bc = gl_WorkGroupID.x, b = bc / pc.classes, n = pc.boxes_n;
    Uints alive = Uints(pc.alive), chosen = Uints(pc.chosen), counts = Uints(pc.counts);
    if (MODE == 1u) {
        uint before = 0u;  // (the pairs before this one: a strided share each, then a tree)
        for (uint p = lane; p < bc; p += WG) before += counts.v[p];
        best_index[lane] = before;
        barrier();
        SHARED_SUM(best_index, lane, WG)
        uint base = best_index[0];
        for (uint k = lane; k < counts.v[bc]; k += WG) {
            Int64Tensor y = Int64Tensor(pc.y);
            y.v[(base + k) * 3u] = int64_t(b);
            y.v[(base + k) * 3u + 1u] = int64_t(bc % pc.classes);
            y.v[(base + k) * 3u + 2u] = int64_t(chosen.v[bc * pc.max_per_class + k]);
        }
        return;
    }
    Floats scores = Floats(pc.scores);
    // (box i's alive flag is only ever read and written by lane i % WG: no buffer barriers between the rounds)
    if (pc.first_round == 0u) {
        for (uint i = lane; i < n; i += WG)
            alive.v[bc * n + i] = HAS_SCORE_THRESHOLD == 0u || scores.v[bc * n + i] > pc.score_threshold ? 1u : 0u;
        if (lane == 0u) chosen_count = 0u;
    } else if (lane == 0u) {
        chosen_count = counts.v[bc];  // (the dispatches before this one chose them)
    }
    barrier();
    for (uint k = pc.first_round; k < pc.end_round; ++k) {
        // the alive box of the highest score, the lower index on a tie
        float top = 0.0;
        uint top_index = 0xFFFFFFFFu;
        for (uint i = lane; i < n; i += WG) {
            float s = scores.v[bc * n + i];
            if (alive.v[bc * n + i] != 0u && (top_index == 0xFFFFFFFFu || s > top)) {
                top = s;
                top_index = i;
            }
        }
        best_score[lane] = top;
        best_index[lane] = top_index;
        barrier();
        for (uint half_ = WG / 2u; half_ > 0u; half_ >>= 1u) {
            if (lane < half_) {
                uint other = best_index[lane + half_], mine = best_index[lane];
                float s = best_score[lane + half_];
                if (other != 0xFFFFFFFFu && (mine == 0xFFFFFFFFu || s > best_score[lane]
                                             || (s == best_score[lane] && other < mine))) {
                    best_score[lane] = s;
                    best_index[lane] = other;
                }
            }
            barrier();
        }
        uint top_box = best_index[0];
        barrier();  // (every lane has read the winner before the next round writes the scratch)
        if (top_box == 0xFFFFFFFFu) break;
        // (clamped although the break leaves a valid index: Mesa 26's LLVM hoists corners' loads above the break,
        // and box 0xFFFFFFFF reads 16 bytes before the boxes, a fault where they start a block: a staged input)
        vec4 chosen_box = corners(b, min(top_box, n - 1u));
        for (uint i = lane; i < n; i += WG)
            if (alive.v[bc * n + i] != 0u && (i == top_box || suppresses(chosen_box, corners(b, i))))
                alive.v[bc * n + i] = 0u;
        if (lane == 0u) {
            chosen.v[bc * pc.max_per_class + k] = top_box;
            chosen_count = k + 1u;
        }
        barrier();
    }
    if (lane == 0u) counts.v[bc] = chosen_count;
}
