#version 450
// com.microsoft MatMulNBits: Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k / block]) * scale[n, k / block]
// (+ bias[n]), the weights quantized to BITS (2, 4 or 8; 2 with LANES = 0 only) in blocks of `block` along K as ORT packs them:
// B is [N][blocks][block * BITS / 8] bytes, a byte's low nibble first; scales [N * blocks] of A's type;
// zero points absent (2^(BITS-1)) or bytes packed like B, ceil(blocks * BITS / 8) per row of B; or (FLOAT_ZP,
// ORT's HQQ quantizer) of A's type, [N * blocks], each weight then q * scale + (-scale * zp) as the CPU EP
// dequantizes it (DequantizeBlockwise<float, float>, before its float SGEMM).
// Accumulates in float32 (A's type: DTYPE = DTYPE_Y).
// INT8_A (accuracy_level 4, as ORT's CPU EP computes it: MLAS's CompInt8): each block of A's row is quantized
// to int8 (scale max|a| / 127, round to nearest even), its integer dot product with the weights' block is
// scaled by both scales.
//
// LANES = 0: one invocation per output element, reading B as ORT packs it (any device).
// LANES = 1 (CPU devices with 8-wide subgroups: lavapipe; vkep/kernels/contrib.py packs B for it): a subgroup
// owns 8 x COLS columns (COLS per lane) and ROWS rows. Mesa 22.3's lavapipe turns every load a lane makes,
// whatever its width up to 64 bits, into a loop over the 8 lanes with a store-to-load stall per lane (seen in
// its JIT code), so this mode counts loads, not bytes: B is re-laid at prepack time as [N / (8 COLS)][chunks]
// [8 lanes][COLS] of 64 bits (16 4-bit or 8 8-bit weights of one column), one load per column per chunk,
// dequantized in registers; the scales as float32 [N / (8 COLS)][blocks][8 lanes][COLS], two per load; A read
// 16 (or 8) elements per load across the subgroup and handed to every lane by subgroupBroadcast, one load of
// A serving all COLS columns (tools/bench_gemv.py). SPLIT subgroups of a workgroup share its columns, each
// summing a contiguous range of blocks (split-K), added in shared memory at the end.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint BITS = 4;
layout(constant_id = 1) const uint INT8_A = 0;
layout(constant_id = 2) const uint LANES = 0;
layout(constant_id = 3) const uint ROWS = 1;   // LANES: rows of Y per subgroup (1..ROWS_MAX)
layout(constant_id = 4) const uint SPLIT = 1;  // LANES: subgroups per column group (1, 2, 4, 8)
layout(constant_id = 5) const uint COLS = 1;   // LANES: columns per lane (1..COLS_MAX)
layout(constant_id = 6) const uint A64 = 0;    // LANES: A read 2 elements per load (K even, float32 A)
layout(constant_id = 7) const uint HAS_ZP = 1; // LANES: zero points given (else 2^(BITS-1), no loads)
layout(constant_id = 8) const uint SCALES_PACKED = 1;  // LANES: scales re-laid at prepack (else as given)
layout(constant_id = 9) const uint FLOAT_ZP = 0;  // zero points of A's type (LANES = 0, INT8_A = 0)
#define ROWS_MAX 8
#define COLS_MAX 4
#define KC (64 / BITS)  // weights per 64-bit chunk (a block holds whole chunks: block >= 16)

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, scales, zp, bias, y;
    uint m, n, k, block, blocks;
    GROUP_BASE;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Words64 { uint64_t v[]; };

uint nibble_or_byte(Bytes t, uint row_start, uint j) {  // (2 bits: four to a byte, the lowest first; LANES = 0)
    if (BITS == 8) return uint(t.v[row_start + j]);
    if (BITS == 2) return (uint(t.v[row_start + j / 4]) >> (2 * (j & 3u))) & 3u;
    uint byte = uint(t.v[row_start + j / 2]);
    return (j & 1u) != 0 ? byte >> 4 : byte & 15u;
}

float zero_point(uint col, uint kb) {
    // (every load through PRESENT_OR: lavapipe's compiler runs a branch's loads whatever the branch, a constant
    // one too, and an absent input's address is 0: a plain LOAD(Tensor(pc.zp)) here crashed the process)
    if (FLOAT_ZP != 0) return LOAD(Tensor(PRESENT_OR(pc.zp, pc.scales)), PRESENT_AT(pc.zp, col * pc.blocks + kb));
    float zp = float(nibble_or_byte(Bytes(PRESENT_OR(pc.zp, pc.b)), PRESENT_AT(pc.zp, col * ((pc.blocks * BITS + 7) / 8)),
                                    PRESENT_AT(pc.zp, kb)));
    return pc.zp != 0 ? zp : float(1u << (BITS - 1));
}

void per_element() {
    uint i = FLAT_ID(64);
    if (i >= pc.m * pc.n) return;
    uint row = i / pc.n, col = i % pc.n;
    Tensor A = Tensor(pc.a);
    Tensor S = Tensor(pc.scales);
    Bytes B = Bytes(pc.b);
    uint blob = pc.block * BITS / 8;
    float acc = 0.0;
    for (uint kb = 0; kb < pc.blocks; ++kb) {
        float scale = LOAD(S, col * pc.blocks + kb);
        float zp = zero_point(col, kb);
        uint k0 = kb * pc.block, kend = min(k0 + pc.block, pc.k);
        uint base = (col * pc.blocks + kb) * blob;
        if (INT8_A != 0) {
            float amax = 0.0;
            for (uint k = k0; k < kend; ++k) amax = max(amax, abs(LOAD(A, row * pc.k + k)));
            float inverse = amax != 0.0 ? precise_div(127.0, amax) : 0.0;
            int izp = int(zp), dot = 0;
            for (uint k = k0; k < kend; ++k) {
                precise float scaled = LOAD(A, row * pc.k + k) * inverse;
                dot += int(roundEven(scaled)) * (int(nibble_or_byte(B, base, k - k0)) - izp);
            }
            acc += float(dot) * (precise_div(amax, 127.0) * scale);
        } else if (FLOAT_ZP != 0) {
            float adjust = -scale * zp;
            for (uint k = k0; k < kend; ++k) {
                precise float w = float(nibble_or_byte(B, base, k - k0)) * scale + adjust;
                acc += LOAD(A, row * pc.k + k) * w;
            }
        } else {
            for (uint k = k0; k < kend; ++k)
                acc += LOAD(A, row * pc.k + k) * ((float(nibble_or_byte(B, base, k - k0)) - zp) * scale);
        }
    }
    float bias = LOAD(Tensor(PRESENT_OR(pc.bias, pc.a)), PRESENT_AT(pc.bias, col));
    if (pc.bias != 0) acc += bias;
    STORE_Y(TensorY(pc.y), i, acc);
}

shared float partial[8][ROWS_MAX * COLS_MAX][8];  // LANES with SPLIT > 1: [subgroup][row, column][lane]

// A64 (4-bit weights, K even): A's rows are read 2 elements per 64-bit load, lane l holding k + 2l and
// k + 2l + 1 of a chunk; else one per load, lane l holding k + l (and k + 8 + l with 4-bit weights). a_pair: this lane's two; past K: 0 (the
// last block's weights past K are padding)
vec2 a_pair(uint row, uint k) {
    if (A64 != 0) {
        if (k + 2 * gl_SubgroupInvocationID >= pc.k) return vec2(0.0);
        uint64_t v = Words64(pc.a + 4 * (uint64_t(row) * pc.k + k)).v[gl_SubgroupInvocationID];
        return uintBitsToFloat(uvec2(uint(v), uint(v >> 32)));
    }
    uint k0 = k + gl_SubgroupInvocationID, k1 = k0 + 8;
    Tensor A = Tensor(pc.a);
    return vec2(k0 < pc.k ? LOAD(A, row * pc.k + k0) : 0.0, KC > 8 && k1 < pc.k ? LOAD(A, row * pc.k + k1) : 0.0);
}
// the chunk's j-th element of A (j a constant after unrolling) from the lane holding it
#define A_AT(p, j) (A64 != 0 ? subgroupBroadcast((j) % 2 == 0 ? p.x : p.y, (j) / 2) \
                             : subgroupBroadcast((j) < 8 ? p.x : p.y, (j) % 8))

uint weight(uvec2 w, uint j) {  // the j-th weight of a chunk (j a constant after unrolling)
    return ((j < KC / 2 ? w.x : w.y) >> ((j % (KC / 2)) * BITS)) & ((1u << BITS) - 1u);
}

void lanes() {
    uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    uint group = WORKGROUP_ID.x * (8 / SPLIT) + sg / SPLIT, slice = sg % SPLIT;
    uint cols[COLS_MAX];  // this lane's columns (clamped to N - 1: there; past N nothing is stored)
    for (uint c = 0; c < COLS; ++c) cols[c] = min((group * 8 + lane) * COLS + c, pc.n - 1);
    uint row0 = WORKGROUP_ID.y * ROWS;
    uint rows[ROWS_MAX];
    for (uint i = 0; i < ROWS; ++i) rows[i] = min(row0 + i, pc.m - 1);
    uint chunks_per_block = pc.block / KC, chunks = pc.blocks * chunks_per_block;
    uint per_slice = (pc.blocks + SPLIT - 1) / SPLIT;
    uint kb_begin = min(slice * per_slice, pc.blocks), kb_end = min(kb_begin + per_slice, pc.blocks);
    Words64 W = Words64(pc.b);
    float acc[ROWS_MAX][COLS_MAX];
    for (uint i = 0; i < ROWS; ++i)
        for (uint c = 0; c < COLS; ++c) acc[i][c] = 0.0;
    for (uint kb = kb_begin; kb < kb_end; ++kb) {
        float scale[COLS_MAX], zp[COLS_MAX];
        if (SCALES_PACKED != 0) {
            for (uint c = 0; c < COLS; c += 2) {
                uint64_t v = Words64(pc.scales).v[((group * pc.blocks + kb) * 8 + lane) * (COLS / 2) + c / 2];
                scale[c] = uintBitsToFloat(uint(v));
                scale[c + 1] = uintBitsToFloat(uint(v >> 32));
            }
        } else {  // (scales that were not constant: as the node has them)
            for (uint c = 0; c < COLS; ++c) scale[c] = LOAD(Tensor(pc.scales), cols[c] * pc.blocks + kb);
        }
        for (uint c = 0; c < COLS; ++c) zp[c] = HAS_ZP != 0 ? zero_point(cols[c], kb) : float(1u << (BITS - 1));
        uint k_block = kb * pc.block;
        if (INT8_A != 0) {
            // A's block quantized to int8 as MLAS does (see per_element), its max |a| over the subgroup
            float inverse[ROWS_MAX], a_scale[ROWS_MAX];
            int dot[ROWS_MAX][COLS_MAX], qsum[ROWS_MAX];
            for (uint i = 0; i < ROWS; ++i) {
                float amax = 0.0;
                for (uint k = k_block; k < k_block + pc.block; k += KC) {
                    vec2 p = a_pair(rows[i], k);
                    amax = max(amax, max(abs(p.x), abs(p.y)));
                }
                amax = subgroupMax(amax);
                inverse[i] = amax != 0.0 ? precise_div(127.0, amax) : 0.0;
                a_scale[i] = precise_div(amax, 127.0);
                qsum[i] = 0;
                for (uint c = 0; c < COLS; ++c) dot[i][c] = 0;
            }
            for (uint ch = kb * chunks_per_block; ch < (kb + 1) * chunks_per_block; ++ch) {
                uvec2 w[COLS_MAX];
                for (uint c = 0; c < COLS; ++c) {
                    uint64_t v = W.v[((group * chunks + ch) * 8 + lane) * COLS + c];
                    w[c] = uvec2(uint(v), uint(v >> 32));
                }
                for (uint i = 0; i < ROWS; ++i) {
                    precise vec2 scaled = a_pair(rows[i], ch * KC) * inverse[i];
                    vec2 qa = roundEven(scaled);
                    qsum[i] += int(qa.x) + int(qa.y);
                    float av[16];  // (broadcast once for all columns: each is a cross-lane move)
                    for (uint j = 0; j < 16; ++j) av[j] = j < KC ? A_AT(qa, j) : 0.0;  // (literal bounds: unrolled)
                    for (uint c = 0; c < COLS; ++c) {
                        // a chunk's integer products summed in float32, exactly (|sum| <= 16 * 15 * 127 or
                        // 8 * 255 * 127, far below 2^24), then added in integers: float multiply-adds are
                        // the fast ones here (lavapipe, Mesa 25: 3x the int32 ones)
                        float d = 0.0;
                        for (uint j = 0; j < 16; ++j)
                            if (j < KC) d += av[j] * float(weight(w[c], j));
                        dot[i][c] += int(d);
                    }
                }
            }
            for (uint i = 0; i < ROWS; ++i) {
                int qs = subgroupAdd(qsum[i]);
                for (uint c = 0; c < COLS; ++c)  // sum (q - zp) qa = sum q qa - zp sum qa, exactly in integers
                    acc[i][c] += float(dot[i][c] - int(zp[c]) * qs) * (a_scale[i] * scale[c]);
            }
        } else {
            float dot[ROWS_MAX][COLS_MAX], asum[ROWS_MAX];
            for (uint i = 0; i < ROWS; ++i) {
                asum[i] = 0.0;
                for (uint c = 0; c < COLS; ++c) dot[i][c] = 0.0;
            }
            for (uint ch = kb * chunks_per_block; ch < (kb + 1) * chunks_per_block; ++ch) {
                uvec2 w[COLS_MAX];
                for (uint c = 0; c < COLS; ++c) {
                    uint64_t v = W.v[((group * chunks + ch) * 8 + lane) * COLS + c];
                    w[c] = uvec2(uint(v), uint(v >> 32));
                }
                for (uint i = 0; i < ROWS; ++i) {
                    vec2 p = a_pair(rows[i], ch * KC);
                    asum[i] += p.x + p.y;
                    float av[16];
                    for (uint j = 0; j < 16; ++j) av[j] = j < KC ? A_AT(p, j) : 0.0;
                    for (uint c = 0; c < COLS; ++c) {
                        float d = dot[i][c];
                        for (uint j = 0; j < 16; ++j)
                            if (j < KC) d += av[j] * float(weight(w[c], j));
                        dot[i][c] = d;
                    }
                }
            }
            for (uint i = 0; i < ROWS; ++i) {
                float as = subgroupAdd(asum[i]);
                for (uint c = 0; c < COLS; ++c) acc[i][c] += (dot[i][c] - zp[c] * as) * scale[c];
            }
        }
    }
    if (SPLIT > 1) {
        for (uint i = 0; i < ROWS; ++i)
            for (uint c = 0; c < COLS; ++c) partial[sg][i * COLS + c][lane] = acc[i][c];
        barrier();
        if (slice != 0) return;
        for (uint s = 1; s < SPLIT; ++s)
            for (uint i = 0; i < ROWS; ++i)
                for (uint c = 0; c < COLS; ++c) acc[i][c] += partial[sg + s][i * COLS + c][lane];
    }
    for (uint c = 0; c < COLS; ++c) {
        uint col = (group * 8 + lane) * COLS + c;
        if (col >= pc.n) continue;
        float bias = LOAD(Tensor(PRESENT_OR(pc.bias, pc.a)), PRESENT_AT(pc.bias, col));
        bias = pc.bias != 0 ? bias : 0.0;
        for (uint i = 0; i < ROWS; ++i)
            if (row0 + i < pc.m) STORE_Y(TensorY(pc.y), (row0 + i) * pc.n + col, acc[i][c] + bias);
    }
}

void main() {
    if (LANES != 0)
        lanes();
    else
        per_element();
}
