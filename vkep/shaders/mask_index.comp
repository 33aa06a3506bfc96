#version 450
// The count of each row's values equal to 1 (an int32 mask [rows, length]: EmbedLayerNormalization's mask_index,
// as ORT's CPU EP counts it), one thread a row.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32s { int v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t mask, counts;
    uint rows, row_length;
    GROUP_BASE;
} pc;

void main() {
    uint r = FLAT_ID(64);
    if (r >= pc.rows) return;
    int count = 0;
    for (uint i = 0u; i < pc.row_length; ++i) count += Int32s(pc.mask).v[r * pc.row_length + i] == 1 ? 1 : 0;
    Int32s(pc.counts).v[r] = count;
}
