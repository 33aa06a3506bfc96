#version 450
// Concat of up to 8 inputs in one dispatch (more inputs: one dispatch per group of 8). The output is
// read as [outer, axis_total, inner]; this dispatch fills axis positions [axis_base, axis_base + gaxis),
// where input j covers [ends[j-1], ends[j]) of the group's gaxis.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#define MAX_INPUTS 8
layout(push_constant, scalar) uniform Push {
    uint64_t y;
    uint64_t x[MAX_INPUTS];
    uint n, inner, gaxis, axis_total, axis_base;
    uint ends[MAX_INPUTS];
} pc;

void main() {
    uint i = flat_index(64);
    if (i >= pc.n) return;
    uint r = i % pc.inner, t = i / pc.inner;
    uint a = t % pc.gaxis, o = t / pc.gaxis;
    uint j = 0, start = 0;
    while (j < MAX_INPUTS - 1 && a >= pc.ends[j]) start = pc.ends[j++];
    uint len = pc.ends[j] - start;
    COMP_T v = LOAD(Tensor(pc.x[j]), (o * len + a - start) * pc.inner + r);
    STORE(Tensor(pc.y), (o * pc.axis_total + pc.axis_base + a) * pc.inner + r, v);
}
