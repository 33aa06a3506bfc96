#version 450
// Conv (1-D, 2-D, 3-D; groups, strides, dilations, pads, optional bias) in NC[D]HW layout.
// Spatial shapes are read as 3-D: a 1-D or 2-D conv has leading dims of size 1.
//
// MODE 0: implicit GEMM per (batch, group): Y[m, p] = sum_k W[m, k] * im2col(X)[k, p] + bias[m], with
//         m an output channel, p an output pixel, k = (input channel, kernel offset); X is gathered on the
//         fly (no im2col buffer) and each thread accumulates a TM x TN block in registers (see gemm()).
// MODE 1: the same GEMM for 1x1 kernels with stride 1 and no padding: X is the GEMM's B matrix as is.
// MODE 2: direct: one thread per output, for convs with few output channels per group (depthwise).
// MODE 4: MODE 2 with a run of RUN outputs along a row per thread (direct_run()).
// MODE 3: the GEMM of MODE 0 for CPU devices with 8-wide subgroups (lavapipe), float32, 1-D and 2-D, one group
//         (broadcast_gemm()); 1x1 convs with stride 1 and no padding over an even pixel count go to matmul.comp's
//         broadcast mode instead (pair loads of X).
// The GEMM modes take the kernel's size and the workgroup's shape as push constants, so one pipeline serves
// every conv of a model (each pipeline costs lavapipe ~0.25 s to compile cold); their taps loop (unrolled,
// a 7x7 kernel took lavapipe 7.5 s to compile), except MODE 1's single one. The direct mode unrolls its taps
// (only its channel loop counts against lavapipe's loop budget), so the kernel's size is a specialization
// constant there. The register block is a specialization constant in every mode.
// Products and sums in MAC_T (common.glsl: float, float16_t in the ACC16 variant) in the modes float16 takes
// (0, 1, 2); MODE 3 is float32's.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define EPILOGUE_REREAD  // (epilogue.glsl says why)
#include "epilogue.glsl"
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_ballot : require

layout(local_size_x = 64) in;  // GEMM: pc.wn threads along output pixels x 64 / pc.wn along output channels
layout(local_size_x_id = 6) in;  // (MODE 3: 8)
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint KD = 1;   // direct mode only (the GEMM modes read pc.kd, pc.kh, pc.kw)
layout(constant_id = 2) const uint KH = 1;
layout(constant_id = 3) const uint KW = 1;
const uint KHW = KH * KW;
const uint KSZ = KD * KHW;
const uint WG = 64;
layout(constant_id = 4) const uint TM = 8;   // output channels per thread
layout(constant_id = 5) const uint TN = 8;   // output pixels per thread
layout(constant_id = 7) const uint A_PAIRS = 0;  // MODE 3: W read 2 elements a load (its rows of even length)

layout(push_constant, scalar) uniform Push {
    EPILOGUE_OPERAND         // (the EPILOGUE variant's: epilogue.glsl)
    uint64_t x, w, b, y;     // b: bias or 0
    uint cg, mg, groups;     // input channels per group, output channels per group, groups
    uint id, ih, iw;         // input spatial dims
    uint od, oh, ow;         // output spatial dims
    uint strides;            // d | h << 4 | w << 18 (vkep/kernels/conv.py's PACKED_D, PACKED_HW: packed, to leave
    uint dilations;          // ... room for the EPILOGUE variant's operand); dilations the same
    int pd, ph, pw;          // leading pads
    uint kd, kh, kw;         // kernel size (GEMM modes)
    uint wn;                 // GEMM: threads along output pixels (a power of two from 8 to 64); MODE 3: W's row
                             // length (K, or K + 1 where Conv.pack padded an odd K for pair loads)
    GROUP_BASE;              // (grids past the device's limit: common.glsl)
} pc;
#define STR_D (pc.strides & 15u)
#define STR_H ((pc.strides >> 4) & 16383u)
#define STR_W (pc.strides >> 18)
#define DIL_D (pc.dilations & 15u)
#define DIL_H ((pc.dilations >> 4) & 16383u)
#define DIL_W (pc.dilations >> 18)

// X at (channel offset c_off, kernel offset r) for output pixel origin (d0, h0, w0); 0 in the padding
float gather(Tensor X, uint c_off, uint r, int d0, int h0, int w0) {
    uint kd = r / KHW, r2 = r % KHW;
    int d = d0 + int(kd * DIL_D), h = h0 + int((r2 / KW) * DIL_H), w = w0 + int((r2 % KW) * DIL_W);
    if (uint(d) >= pc.id || uint(h) >= pc.ih || uint(w) >= pc.iw) return 0.0;
    return LOAD(X, c_off + (uint(d) * pc.ih + uint(h)) * pc.iw + uint(w));
}

// One kernel tap r of input channel c (at cx) for the thread's TM x TN block: TM weights, TN inputs, TM x TN
// multiply-adds (a macro, so that the unrolled and the looped forms share it without copying the block).
#define TAP(r) {                                                                                              \
    uint k = c * ksz + (r);                                                                                   \
    MAC_T a[TM], b[TN];                                                                                       \
    [[unroll]] for (uint i = 0; i < TM; ++i) a[i] = LOAD_MAC(W, wrow[i] + k);                                 \
    if (MODE == 1) {                                                                                          \
        [[unroll]] for (uint j = 0; j < TN; ++j) b[j] = LOAD_MAC(X, cx + pix[j]);                             \
    } else {                                                                                                  \
        uint kd = (r) / khw, kh = ((r) % khw) / pc.kw, kw = (r) % pc.kw;                                      \
        [[unroll]] for (uint j = 0; j < TN; ++j) {                                                            \
            int d = d0[j] + int(kd * DIL_D), h = h0[j] + int(kh * DIL_H), w = w0[j] + int(kw * DIL_W);        \
            bool inside = uint(d) < pc.id && uint(h) < pc.ih && uint(w) < pc.iw;                              \
            MAC_T v = LOAD_MAC(X, inside ? cx + (uint(d) * pc.ih + uint(h)) * pc.iw + uint(w) : cx);          \
            b[j] = inside ? v : MAC_T(0.0);                                                                   \
        }                                                                                                     \
    }                                                                                                         \
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j]; \
}

// Register-blocked GEMM straight from memory: per reduction step a thread loads TM weights and TN input
// values and does TM x TN multiply-adds; a workgroup covers 64 / wn * TM channels x wn * TN pixels (a thread's
// pixels are wn apart, its channels adjacent). On a CPU driver (lavapipe) every load is costly and
// shared memory is no cheaper than global memory, so loads per multiply-add is what counts.
void gemm() {
    uint lane = gl_LocalInvocationIndex % pc.wn, row = gl_LocalInvocationIndex / pc.wn;
    uint khw = pc.kh * pc.kw, ksz = pc.kd * khw;
    uint bat = WORKGROUP_ID.z / pc.groups, g = WORKGROUP_ID.z % pc.groups;
    uint M = pc.mg, K = pc.cg * ksz, N = pc.od * pc.oh * pc.ow;
    uint m0 = (WORKGROUP_ID.y * (WG / pc.wn) + row) * TM, n0 = WORKGROUP_ID.x * (pc.wn * TN) + lane;
    uint isz = pc.id * pc.ih * pc.iw;
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = (bat * pc.groups + g) * pc.cg * isz;
    uint wrow[TM];
    [[unroll]] for (uint i = 0; i < TM; ++i) wrow[i] = (g * pc.mg + min(m0 + i, M - 1)) * K;
    int d0[TN], h0[TN], w0[TN];
    uint pix[TN];
    [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint p = min(n0 + pc.wn * j, N - 1);
        pix[j] = p;
        uint q = p / pc.ow;
        w0[j] = int((p % pc.ow) * STR_W) - pc.pw;
        h0[j] = int((q % pc.oh) * STR_H) - pc.ph;
        d0[j] = int((q / pc.oh) * STR_D) - pc.pd;
    }
    MAC_T acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = MAC_T(0.0);

    for (uint c = 0; c < pc.cg; ++c) {
        uint cx = xbase + c * isz;
        if (MODE == 1) {
            TAP(0)
        } else {
            [[dont_unroll]] for (uint r = 0; r < ksz; ++r) TAP(r)
        }
    }

    Tensor Y = Tensor(pc.y);
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        uint m = m0 + i;
        if (m < M) {
            uint oc = g * pc.mg + m;
            float bias = LOAD(Tensor(PRESENT_OR(pc.b, pc.w)), PRESENT_AT(pc.b, oc));
            bias = pc.b != 0 ? bias : 0.0;
            uint ybase = (bat * pc.groups * pc.mg + oc) * N;
            [[unroll]] for (uint j = 0; j < TN; ++j) {
                uint n = n0 + pc.wn * j;
                if (n < N) STORE_OR_KEEP(i * TN + j, Y, ybase + n, float(acc[i][j]) + bias);
            }
        }
    }
}

void direct() {
    uint N = pc.od * pc.oh * pc.ow, per_batch = pc.groups * pc.mg * N;
    uint i = FLAT_ID(WG);
    if (i >= per_batch) return;
    uint bat = WORKGROUP_ID.z;
    uint oc = i / N, p = i % N, g = oc / pc.mg;
    uint q = p / pc.ow;
    int w0 = int((p % pc.ow) * STR_W) - pc.pw;
    int h0 = int((q % pc.oh) * STR_H) - pc.ph;
    int d0 = int((q / pc.oh) * STR_D) - pc.pd;
    uint isz = pc.id * pc.ih * pc.iw;
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = (bat * pc.groups + g) * pc.cg * isz;
    uint wbase = oc * pc.cg * KSZ;
    MAC_T acc = LOAD_MAC(Tensor(PRESENT_OR(pc.b, pc.w)), PRESENT_AT(pc.b, oc));
    acc = pc.b != 0 ? acc : MAC_T(0.0);
    for (uint c = 0; c < pc.cg; ++c) {
        // (unrolled: KSZ is a specialization constant, and only the channel loop counts against lavapipe's
        // loop budget, see vkep/kernels/conv.py)
        [[unroll]] for (uint r = 0; r < KSZ; ++r) acc += LOAD_MAC(W, wbase + c * KSZ + r) * MAC_T(gather(X, xbase + c * isz, r, d0, h0, w0));
    }
    STORE_OR_KEEP(0, Tensor(pc.y), bat * per_batch + i, float(acc));
}

// MODE 4: the direct mode with RUN neighbouring outputs of a row an invocation (depthwise convs over rows of at
// least RUN): the index math and the weights' loads once for RUN outputs, and where the row's stride and dilation
// are 1, each kernel row's RUN + KW - 1 inputs loaded once (lavapipe loads lane by lane: loads are its cost). Each
// output sums in MODE 2's order (the bias, then the channels' taps in order): the same values.
#define RUN 4u
void direct_run() {
    uint runs = (pc.ow + RUN - 1u) / RUN, rows = pc.od * pc.oh, N = rows * pc.ow;
    uint per_batch = pc.groups * pc.mg * rows * runs;
    uint i = FLAT_ID(WG);
    if (i >= per_batch) return;
    uint bat = WORKGROUP_ID.z;
    uint run = i % runs, t = i / runs;
    uint q = t % rows, oc = t / rows, g = oc / pc.mg;
    uint ow0 = run * RUN;
    int w0 = int(ow0 * STR_W) - pc.pw;
    int h0 = int((q % pc.oh) * STR_H) - pc.ph;
    int d0 = int((q / pc.oh) * STR_D) - pc.pd;
    uint isz = pc.id * pc.ih * pc.iw;
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = (bat * pc.groups + g) * pc.cg * isz;
    uint wbase = oc * pc.cg * KSZ;
    MAC_T bias = LOAD_MAC(Tensor(PRESENT_OR(pc.b, pc.w)), PRESENT_AT(pc.b, oc));
    bias = pc.b != 0 ? bias : MAC_T(0.0);
    MAC_T acc[RUN];
    [[unroll]] for (uint j = 0; j < RUN; ++j) acc[j] = bias;
    bool unit = STR_W == 1u && DIL_W == 1u;
    for (uint c = 0; c < pc.cg; ++c) {
        [[unroll]] for (uint kd = 0; kd < KD; ++kd) {
            [[unroll]] for (uint kh = 0; kh < KH; ++kh) {
                int d = d0 + int(kd * DIL_D), h = h0 + int(kh * DIL_H);
                bool inside = uint(d) < pc.id && uint(h) < pc.ih;
                uint row = xbase + c * isz + (uint(max(d, 0)) * pc.ih + uint(max(h, 0))) * pc.iw;
                uint tap = wbase + c * KSZ + (kd * KH + kh) * KW;
                if (unit) {
                    float window[RUN + KW - 1u];
                    [[unroll]] for (uint k = 0; k < RUN + KW - 1u; ++k) {
                        int w = w0 + int(k);
                        window[k] = inside && uint(w) < pc.iw ? LOAD(X, row + uint(w)) : 0.0;
                    }
                    [[unroll]] for (uint kw = 0; kw < KW; ++kw) {
                        MAC_T wv = LOAD_MAC(W, tap + kw);
                        [[unroll]] for (uint j = 0; j < RUN; ++j) acc[j] += wv * MAC_T(window[j + kw]);
                    }
                } else {
                    [[unroll]] for (uint kw = 0; kw < KW; ++kw) {
                        MAC_T wv = LOAD_MAC(W, tap + kw);
                        [[unroll]] for (uint j = 0; j < RUN; ++j) {
                            int w = w0 + int(j * STR_W + kw * DIL_W);
                            acc[j] += wv * MAC_T(inside && uint(w) < pc.iw ? LOAD(X, row + uint(w)) : 0.0);
                        }
                    }
                }
            }
        }
    }
    uint ybase = bat * pc.groups * pc.mg * N + oc * N + q * pc.ow + ow0;
    [[unroll]] for (uint j = 0; j < RUN; ++j)
        if (ow0 + j < pc.ow) STORE_OR_KEEP(j, Tensor(pc.y), ybase + j, float(acc[j]));
}

// MODE 3: a workgroup is one subgroup of 8 invocations (lavapipe runs a workgroup as 8-lane SIMD rows, dead lanes
// included); an invocation sums all of K for BR output channels x BC pixels. Lavapipe's time follows the number
// of loads (each a loop over the 8 lanes), so the 8 lanes share their channels: lane l loads W's rows
// m0 + 8 g + l (2 steps of K a load with A_PAIRS) and hands them to the others by subgroupBroadcast, one load per
// 8 channels; per 2 steps of K a lane makes BR / 8 (x2) loads of W and 2 BC of X for 2 BR BC multiply-adds,
// against MODE 0's 2 (TM + TN) for 2 TM TN. A lane's pixels are n0 + 8 j + lane. Its loop steps through the taps
// with counters, without divisions (lavapipe divides lane by lane).
layout(constant_id = 8) const uint BR = 16;  // output channels a workgroup covers (vkep/kernels/conv.py: BROADCAST_CHANNELS)
#define BC 8
const uint BG = BR / 8;
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Pairs { uint64_t v[]; };
vec2 pair_at(uint64_t base, uint index) {  // elements index, index + 1 of a float32 tensor (index even)
    uint64_t v = Pairs(base).v[index / 2];
    return uintBitsToFloat(uvec2(uint(v), uint(v >> 32)));
}
void broadcast_gemm() {
    uint lane = gl_SubgroupInvocationID, bat = WORKGROUP_ID.z;
    uint M = pc.mg, K = pc.cg * pc.kh * pc.kw, N = pc.oh * pc.ow, isz = pc.ih * pc.iw;
    uint m0 = WORKGROUP_ID.y * BR, n0 = WORKGROUP_ID.x * (8 * BC);
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = bat * pc.cg * isz;
    // channels and pixels past the output read the last one (always there) and are not stored
    uint wrow[BG];
    [[unroll]] for (uint g = 0; g < BG; ++g) wrow[g] = min(m0 + 8 * g + lane, M - 1) * pc.wn;
    int h0[BC], w0[BC];
    [[unroll]] for (uint j = 0; j < BC; ++j) {
        uint p = min(n0 + 8 * j + lane, N - 1);
        h0[j] = int((p / pc.ow) * STR_H) - pc.ph;
        w0[j] = int((p % pc.ow) * STR_W) - pc.pw;
    }
    float acc[BR][BC];
    [[unroll]] for (uint i = 0; i < BR; ++i) [[unroll]] for (uint j = 0; j < BC; ++j) acc[i][j] = 0.0;
    uint cx = xbase, kh = 0, kw = 0;  // the tap of the next step: channel offset in X, kernel row and column
    for (uint k0 = 0; k0 < K; k0 += 2) {
        uint k1 = min(k0 + 1, K - 1);  // (K odd: the last step's second half reads step K - 1, zeroed)
        bool has_k1 = k0 + 1 < K;  // (a select, not a product: 0 x inf is NaN)
        vec2 a[BG], b[BC];  // (x: step k0, y: step k0 + 1)
        [[unroll]] for (uint g = 0; g < BG; ++g) {
            a[g] = A_PAIRS != 0 ? pair_at(pc.w, wrow[g] + k0) : vec2(LOAD(W, wrow[g] + k0), LOAD(W, wrow[g] + k1));
            a[g].y = has_k1 ? a[g].y : 0.0;
        }
        [[unroll]] for (uint q = 0; q < 2; ++q) {
            int dh = int(kh * DIL_H), dw = int(kw * DIL_W);
            bool live = k0 + q < K;
            [[unroll]] for (uint j = 0; j < BC; ++j) {
                int h = h0[j] + dh, w = w0[j] + dw;
                bool inside = live && uint(h) < pc.ih && uint(w) < pc.iw;
                float v = LOAD(X, inside ? cx + uint(h) * pc.iw + uint(w) : xbase);
                b[j][q] = inside ? v : 0.0;
            }
            if (++kw == pc.kw) {
                kw = 0;
                if (++kh == pc.kh) {
                    kh = 0;
                    cx += isz;
                }
            }
        }
        [[unroll]] for (uint g = 0; g < BG; ++g)
            [[unroll]] for (uint l = 0; l < 8; ++l) {
                float x = subgroupBroadcast(a[g].x, l), y = subgroupBroadcast(a[g].y, l);
                [[unroll]] for (uint j = 0; j < BC; ++j) acc[8 * g + l][j] += x * b[j].x + y * b[j].y;
            }
    }
    Tensor Y = Tensor(pc.y);
    float bias[BR];
    [[unroll]] for (uint i = 0; i < BR; ++i) {
        bias[i] = LOAD(Tensor(PRESENT_OR(pc.b, pc.w)), PRESENT_AT(pc.b, min(m0 + i, M - 1)));
        bias[i] = pc.b != 0 ? bias[i] : 0.0;
    }
    [[unroll]] for (uint i = 0; i < BR; ++i) [[unroll]] for (uint j = 0; j < BC; ++j) {
        uint m = m0 + i, n = n0 + 8 * j + lane;
        if (m < M && n < N) STORE_OR_KEEP(i * BC + j, Y, (bat * M + m) * N + n, acc[i][j] + bias[i]);
    }
}

#ifdef EPILOGUE
// the values this invocation stored, as each mode's stores lay them out
EpilogueBlock stored_block() {
    uint N = pc.od * pc.oh * pc.ow;
    if (MODE == 3) {
        uint m0 = WORKGROUP_ID.y * BR, n0 = WORKGROUP_ID.x * (8 * BC);
        return EpilogueBlock(WORKGROUP_ID.z * pc.mg * N, N, 0, 1, m0, 1, BR, pc.mg,
                             n0 + gl_SubgroupInvocationID, 8, BC, N, 1);
    }
    if (MODE == 2) {
        uint i = FLAT_ID(WG), per_batch = pc.groups * pc.mg * N;
        return EpilogueBlock(WORKGROUP_ID.z * per_batch, N, 0, 1, i / N, 1, 1, pc.groups * pc.mg, i % N, 1, 1, N, 1);
    }
    if (MODE == 4) {  // (its run of a row: the row's end bounds it)
        uint runs = (pc.ow + RUN - 1u) / RUN, rows = pc.od * pc.oh, i = FLAT_ID(WG);
        uint run = i % runs, t = i / runs, q = t % rows, start = q * pc.ow;
        return EpilogueBlock(WORKGROUP_ID.z * pc.groups * pc.mg * N, N, 0, 1, t / rows, 1, 1, pc.groups * pc.mg,
                             start + run * RUN, 1, RUN, start + pc.ow, 1);
    }
    uint lane = gl_LocalInvocationIndex % pc.wn, row = gl_LocalInvocationIndex / pc.wn;
    uint bat = WORKGROUP_ID.z / pc.groups, g = WORKGROUP_ID.z % pc.groups;
    uint m0 = (WORKGROUP_ID.y * (WG / pc.wn) + row) * TM, n0 = WORKGROUP_ID.x * (pc.wn * TN) + lane;
    return EpilogueBlock((bat * pc.groups + g) * pc.mg * N, N, g * pc.mg, 1, m0, 1, TM, pc.mg, n0, pc.wn, TN, N, 1);
}
#endif

void main() {
    if (MODE == 3) broadcast_gemm();
    else if (MODE == 4) direct_run();
    else if (MODE == 2) direct();
    else gemm();
#ifdef EPILOGUE
    epilogue_block(pc.y, pc.epilogue_operand, stored_block(), 0);
#endif
}
