#version 450
// Batched y = alpha * op(A) x op(B) + beta * C.
// A, B are read through strides, so transposes and broadcast batch dimensions cost nothing;
// C (Gemm's bias, optional: address 0) is read through its own strides (0 where it broadcasts).
// A 16x16 workgroup computes a 64x64 tile of y, each invocation a 4x4 block held in registers, over
// K in steps of 16 staged through shared memory: 16 multiply-adds per shared load, few barriers.
// Products and sums in MAC_T (common.glsl: float, float16_t in the ACC16 variant) in the modes float16 takes
// (0, 1, 2); the float32-only paths (pairs, vec4, mode 3) sum in float. FLOAT64: float64_product, below.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "epilogue.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require

#define BM 64
#define BN 64
#define BK 16
#define RM 4
#define RN 4
layout(local_size_x = 16, local_size_y = 16) in;
layout(local_size_x_id = 6, local_size_y_id = 7) in;  // (mode 3: 8 x 1)
// 0: tiles as above; 1: few rows (M <= ROWS_MAX, e.g. a fully connected layer on one image): each
// invocation owns one column and sums all of K for every row, reading B once, with no shared memory
layout(constant_id = 0) const uint MODE = 0;
#define ROWS_MAX 8
layout(constant_id = 1) const uint ROWS = ROWS_MAX;  // mode 1: the rows of y
layout(constant_id = 2) const uint VEC4 = 0;         // mode 1: vec4 loads along K (see few_rows)
// mode 1: 64-bit loads along K, A shared by subgroup; 2: B packed as [N / 8][K / 2][8 lanes][2] (MatMul.pack)
layout(constant_id = 3) const uint PAIRS = 0;
// mode 3 (broadcast()): A read 2 elements along K a load (1) or 1 (0); B read 2 elements along N a load (1),
// 2 along K (2) or 1 (0)
layout(constant_id = 4) const uint A_PAIRS = 0;
layout(constant_id = 5) const uint B_PAIRS = 0;
layout(constant_id = 8) const uint C_KIND = 0;  // mode 3: no C (0), C per row (1: c_n 0), per column (2: c_m 0)
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Vec4Ref { vec4 v; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Pairs { uint64_t v[]; };
vec2 pair_at(uint64_t base, uint index) {  // elements index, index + 1 of a float32 tensor (index even)
    uint64_t v = Pairs(base).v[index / 2];
    return uintBitsToFloat(uvec2(uint(v), uint(v >> 32)));
}
vec4 load4(uint64_t base, uint index) { return Vec4Ref(base + uint64_t(index) * 4).v; }

#include "matmul_push.glsl"

shared MAC_T tile_a[BK][BM + 1];  // [k][m], padded against bank conflicts
shared MAC_T tile_b[BK][BN + 1];  // [k][n]

void few_rows() {
    uint n = WORKGROUP_ID.x * 256 + gl_LocalInvocationIndex;
    uint z = WORKGROUP_ID.z;
    uint row0 = WORKGROUP_ID.y * ROWS;  // (more than ROWS rows: more workgroup rows)
    // (PAIRS: lanes past N compute column N - 1, to keep their subgroup whole for subgroupBroadcast)
    if (n >= pc.N && PAIRS == 0) return;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_base = outer * pc.a_outer + inner * pc.a_inner + row0 * pc.a_m;
    uint b_col = outer * pc.b_outer + inner * pc.b_inner + min(n, pc.N - 1) * pc.b_n;
    Tensor A = Tensor(pc.a), B = Tensor(pc.b);
    MAC_T acc[ROWS_MAX];
    for (uint i = 0; i < ROWS_MAX; ++i) acc[i] = MAC_T(0.0);
    if (PAIRS != 0) {
        // float32, A and B contiguous along K, K and every row and batch stride even. On lavapipe (Mesa
        // 22.3) every load a lane makes, of any width up to 64 bits, is a loop over the 8 lanes with a
        // store-to-load stall each (seen in its JIT code), so loads are counted: B 2 elements a load, and a
        // subgroup's 8 lanes read 16 elements of each row of A in one load each and hand them to every lane
        // by subgroupBroadcast (a register move there): per 16 of K, 8 + ROWS loads against 32 + 16 ROWS
        // with vec4 loads (tools/bench_gemv.py: 1x512x4096 30 -> 11 ms; 1x4096x4096 250 -> 133 ms, 79 ms with
        // B interleaved: PAIRS 2)
        uint lane = gl_SubgroupInvocationID, n_c = min(n, pc.N - 1);
        uint rows_here = min(ROWS, pc.M - row0);
        for (uint k0 = 0; k0 < pc.K; k0 += 16) {
            vec2 a2[ROWS_MAX];
            for (uint i = 0; i < ROWS; ++i)  // A[row, k0 + 2 lane], A[row, k0 + 2 lane + 1]; 0 past K or M
                a2[i] = k0 + 2 * lane < pc.K && i < rows_here ? pair_at(pc.a, a_base + i * pc.a_m + k0 + 2 * lane)
                                                               : vec2(0.0);
            for (uint q = 0; q < 8; ++q) {  // (literal bounds: unrolled; the branch is uniform)
                if (k0 + 2 * q >= pc.K) continue;
                // (2: the subgroup's 8 lanes read 64 contiguous bytes, and the next step's follow)
                vec2 b = PAIRS == 2 ? pair_at(pc.b, (((n_c / 8) * (pc.K / 2) + k0 / 2 + q) * 8 + n_c % 8) * 2)
                                    : pair_at(pc.b, b_col + k0 + 2 * q);
                for (uint i = 0; i < ROWS; ++i)
                    acc[i] += MAC_T(subgroupBroadcast(a2[i].x, q) * b.x + subgroupBroadcast(a2[i].y, q) * b.y);
            }
        }
    } else if (VEC4 != 0) {  // float32 with A and B contiguous along K (K % 4 == 0): a quarter of the loads
        for (uint k = 0; k < pc.K; k += 4) {
            vec4 bv = load4(pc.b, b_col + k);
            for (uint i = 0; i < ROWS; ++i) acc[i] += MAC_T(dot(load4(pc.a, a_base + i * pc.a_m + k), bv));
        }
    } else for (uint k = 0; k < pc.K; ++k) {
        MAC_T bv = LOAD_MAC(B, b_col + k * pc.b_k);
        // ROWS (a specialization constant) = M: the loop has an exact, unrolled trip count; lavapipe
        // would otherwise issue all ROWS_MAX masked loads of A every step
        for (uint i = 0; i < ROWS; ++i) acc[i] += LOAD_MAC(A, a_base + i * pc.a_m + k * pc.a_k) * bv;
    }
    if (n >= pc.N) return;
    for (uint i = 0; i < ROWS; ++i) {
        uint m = row0 + i;
        if (m >= pc.M) break;
        float r = pc.alpha * float(acc[i]);
        float c = float(LOAD(Tensor(PRESENT_OR(pc.c, pc.a)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n)));
        if (pc.c != 0) r += pc.beta * c;
        STORE_OR_KEEP(i, Tensor(pc.y), z * pc.M * pc.N + m * pc.N + n, r);
    }
}

// 2: registers only, for CPU devices (lavapipe), where shared memory costs what device memory costs
// and barriers are expensive: an invocation sums all of K for an 8x8 block of y (4 multiply-adds per
// load); the first 64 invocations of a workgroup cover its 64x64 tile
#define RD 8
void direct() {
    uint tx = gl_LocalInvocationIndex % 8, ty = gl_LocalInvocationIndex / 8;
    uint m0 = WORKGROUP_ID.y * BM, n0 = WORKGROUP_ID.x * BN;
    uint z = WORKGROUP_ID.z;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_base = outer * pc.a_outer + inner * pc.a_inner;
    uint b_base = outer * pc.b_outer + inner * pc.b_inner;
    Tensor A = Tensor(pc.a), B = Tensor(pc.b);
    // rows and columns past the matrix read row / column 0 (always there) and are not stored
    uint arow[RD], bcol[RD];
    for (uint i = 0; i < RD; ++i) {
        uint m = m0 + ty + 8 * i, n = n0 + tx + 8 * i;
        arow[i] = a_base + (m < pc.M ? m : 0) * pc.a_m;
        bcol[i] = b_base + (n < pc.N ? n : 0) * pc.b_n;
    }
    MAC_T acc[RD][RD];
    for (uint i = 0; i < RD; ++i)
        for (uint j = 0; j < RD; ++j) acc[i][j] = MAC_T(0.0);
    for (uint k = 0; k < pc.K; ++k) {
        MAC_T av[RD], bv[RD];
        for (uint i = 0; i < RD; ++i) av[i] = LOAD_MAC(A, arow[i] + k * pc.a_k);
        for (uint j = 0; j < RD; ++j) bv[j] = LOAD_MAC(B, bcol[j] + k * pc.b_k);
        for (uint i = 0; i < RD; ++i)
            for (uint j = 0; j < RD; ++j) acc[i][j] += av[i] * bv[j];
    }
    for (uint i = 0; i < RD; ++i) {
        uint m = m0 + ty + 8 * i;
        if (m >= pc.M) continue;
        for (uint j = 0; j < RD; ++j) {
            uint n = n0 + tx + 8 * j;
            if (n >= pc.N) continue;
            float r = pc.alpha * float(acc[i][j]);
            float c = float(LOAD(Tensor(PRESENT_OR(pc.c, pc.a)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n)));
            if (pc.c != 0) r += pc.beta * c;
            STORE_OR_KEEP(i * RD + j, Tensor(pc.y), z * pc.M * pc.N + m * pc.N + n, r);
        }
    }
}

// 3: CPU devices with 8-wide subgroups (lavapipe), float32. A workgroup is one subgroup of 8 invocations (lavapipe
// runs a workgroup as 8-lane SIMD rows and its dead lanes through the whole shader); an invocation sums all of K
// for BR rows x BC columns of y. Lavapipe's time follows the number of loads (each is a loop over the 8 lanes),
// so: the 8 lanes share their rows, and lane l loads rows m0 + 8 g + l of A (g < BR / 8) and hands them to the
// others by subgroupBroadcast (one load per 8 rows); B is read 2 elements a load where its strides allow (64-bit
// words). Per 2 steps of K: BR / 8 loads of A (x2 without A_PAIRS) and BC of B (x2 with B_PAIRS 0) for
// 2 BR BC multiply-adds a lane, against the direct mode's 32 loads for 128. Columns of a lane: B_PAIRS 1:
// n0 + 16 j + 2 lane + (0, 1) (pairs of y's row, stored as pairs too); else n0 + 8 j + lane.
// mode 3: rows of a workgroup (a multiple of 8; matmul.py's BROADCAST_ROWS). 16 ran as fast as 32 (512^3 and
// resnet50's 1x1 products, Mesa 25) and compiles in half the time: lavapipe unrolls BR x BC sums
layout(constant_id = 10) const uint BR = 16;
// mode 3: columns per invocation (even). 8: 16 took 5 s to compile cold on Mesa 25 for 0.97x there, 1.16x on 22.3
layout(constant_id = 9) const uint BC = 8;
const uint BG = BR / 8;
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer PairsOut { vec2 v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer PairOut { vec2 v; };
uint broadcast_column(uint j, uint lane) { return B_PAIRS == 1 ? 16 * (j / 2) + 2 * lane + j % 2 : 8 * j + lane; }
void broadcast() {
    uint lane = gl_SubgroupInvocationID;
    uint m0 = WORKGROUP_ID.y * BR, n0 = WORKGROUP_ID.x * (8 * BC);
    uint z = WORKGROUP_ID.z;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_base = outer * pc.a_outer + inner * pc.a_inner;
    uint b_base = outer * pc.b_outer + inner * pc.b_inner;
    Tensor A = Tensor(pc.a), B = Tensor(pc.b);
    // rows and columns past the matrix read the last one (always there) and are not stored
    uint arow[BG], bcol[BC];
    [[unroll]] for (uint g = 0; g < BG; ++g) arow[g] = a_base + min(m0 + 8 * g + lane, pc.M - 1) * pc.a_m;
    // (B_PAIRS 1: a pair starts at an even column; N is even, or B's rows hold a column past an odd N, read into
    // a column that is not stored: vkep/kernels/matmul.py, broadcast_pairs)
    uint n_even = (pc.N + 1) & ~1u;
    [[unroll]] for (uint j = 0; j < BC; ++j)
        bcol[j] = b_base + min(n0 + broadcast_column(j, lane), B_PAIRS == 1 ? n_even - 2 + j % 2 : pc.N - 1) * pc.b_n;
    float acc[BR][BC];
    [[unroll]] for (uint i = 0; i < BR; ++i) [[unroll]] for (uint j = 0; j < BC; ++j) acc[i][j] = 0.0;
    for (uint k0 = 0; k0 < pc.K; k0 += 2) {
        // (k0 + 1 past K, K odd: its values are read at K - 1 and zeroed)
        uint k1 = min(k0 + 1, pc.K - 1);
        bool has_k1 = k0 + 1 < pc.K;  // (a select, not a product: 0 x inf is NaN)
        vec2 a[BG], b[BC];  // (x: step k0, y: step k0 + 1)
        [[unroll]] for (uint g = 0; g < BG; ++g) {
            a[g] = A_PAIRS != 0 ? pair_at(pc.a, arow[g] + k0)
                                : vec2(LOAD(A, arow[g] + k0 * pc.a_k), LOAD(A, arow[g] + k1 * pc.a_k));
            a[g].y = has_k1 ? a[g].y : 0.0;
        }
        if (B_PAIRS == 1) {
            [[unroll]] for (uint j = 0; j < BC; j += 2) {
                vec2 p0 = pair_at(pc.b, bcol[j] + k0 * pc.b_k), p1 = pair_at(pc.b, bcol[j] + k1 * pc.b_k);
                p1 = has_k1 ? p1 : vec2(0.0);
                b[j] = vec2(p0.x, p1.x);
                b[j + 1] = vec2(p0.y, p1.y);
            }
        } else if (B_PAIRS == 2) {
            [[unroll]] for (uint j = 0; j < BC; ++j) b[j] = pair_at(pc.b, bcol[j] + k0);
        } else {
            [[unroll]] for (uint j = 0; j < BC; ++j) {
                b[j] = vec2(LOAD(B, bcol[j] + k0 * pc.b_k), LOAD(B, bcol[j] + k1 * pc.b_k));
                b[j].y = has_k1 ? b[j].y : 0.0;
            }
        }
        [[unroll]] for (uint g = 0; g < BG; ++g)
            [[unroll]] for (uint l = 0; l < 8; ++l) {
                float x = subgroupBroadcast(a[g].x, l), y = subgroupBroadcast(a[g].y, l);
                [[unroll]] for (uint j = 0; j < BC; ++j) acc[8 * g + l][j] += x * b[j].x + y * b[j].y;
            }
    }
    // C (C_KIND): per row (Conv's bias) or per column (Gemm's), one load per row or column of the block
    Tensor C = Tensor(pc.c);
    float c_row[BR], c_column[BC];
    [[unroll]] for (uint i = 0; i < BR; ++i) c_row[i] = C_KIND == 1 ? pc.beta * LOAD(C, min(m0 + i, pc.M - 1) * pc.c_m) : 0.0;
    [[unroll]] for (uint j = 0; j < BC; ++j)
        c_column[j] = C_KIND == 2 ? pc.beta * LOAD(C, min(n0 + broadcast_column(j, lane), pc.N - 1) * pc.c_n) : 0.0;
    uint y0 = z * pc.M * pc.N;
    [[unroll]] for (uint i = 0; i < BR; ++i) [[unroll]] for (uint j = 0; j < BC; j += 2) {
        uint m = m0 + i, n = n0 + broadcast_column(j, lane), n1 = n0 + broadcast_column(j + 1, lane);
        vec2 r = pc.alpha * vec2(acc[i][j], acc[i][j + 1]) + c_row[i] + vec2(c_column[j], c_column[j + 1]);
#ifdef EPILOGUE
        STORE_OR_KEEP(i * BC + j, Tensor(pc.y), 0, r.x);
        STORE_OR_KEEP(i * BC + j + 1, Tensor(pc.y), 0, r.y);
#else
        if (B_PAIRS == 1) {  // (n1 = n + 1; a pair 4-byte aligned where N is odd, whose last column is alone)
            uint at = y0 + m * pc.N + n;
            if (m < pc.M && n1 < pc.N) PairOut(pc.y + 4ul * at).v = r;
            else if (m < pc.M && n < pc.N) STORE(Tensor(pc.y), at, r.x);
        } else {
            if (m < pc.M && n < pc.N) STORE(Tensor(pc.y), y0 + m * pc.N + n, r.x);
            if (m < pc.M && n1 < pc.N) STORE(Tensor(pc.y), y0 + m * pc.N + n1, r.y);
        }
#endif
    }
}

void tiled() {
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint tid = ty * 16 + tx;
    uint m0 = WORKGROUP_ID.y * BM, n0 = WORKGROUP_ID.x * BN;
    uint z = WORKGROUP_ID.z;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_base = outer * pc.a_outer + inner * pc.a_inner;
    uint b_base = outer * pc.b_outer + inner * pc.b_inner;
    Tensor A = Tensor(pc.a), B = Tensor(pc.b);

    MAC_T acc[RM][RN];
    for (uint i = 0; i < RM; ++i)
        for (uint j = 0; j < RN; ++j) acc[i][j] = MAC_T(0.0);

    for (uint k0 = 0; k0 < pc.K; k0 += BK) {
        // 256 invocations stage 64x16 of A and 16x64 of B: 4 elements each
        for (uint e = tid; e < BM * BK; e += 256) {
            uint mm = e / BK, kk = e % BK;
            uint m = m0 + mm, k = k0 + kk;
            tile_a[kk][mm] = (m < pc.M && k < pc.K) ? LOAD_MAC(A, a_base + m * pc.a_m + k * pc.a_k) : MAC_T(0.0);
        }
        for (uint e = tid; e < BK * BN; e += 256) {
            uint kk = e / BN, nn = e % BN;
            uint k = k0 + kk, n = n0 + nn;
            tile_b[kk][nn] = (n < pc.N && k < pc.K) ? LOAD_MAC(B, b_base + k * pc.b_k + n * pc.b_n) : MAC_T(0.0);
        }
        barrier();
        for (uint kk = 0; kk < BK; ++kk) {
            MAC_T av[RM], bv[RN];
            for (uint i = 0; i < RM; ++i) av[i] = tile_a[kk][ty + 16 * i];
            for (uint j = 0; j < RN; ++j) bv[j] = tile_b[kk][tx + 16 * j];
            for (uint i = 0; i < RM; ++i)
                for (uint j = 0; j < RN; ++j) acc[i][j] += av[i] * bv[j];
        }
        barrier();
    }

    for (uint i = 0; i < RM; ++i) {
        uint m = m0 + ty + 16 * i;
        if (m >= pc.M) continue;
        for (uint j = 0; j < RN; ++j) {
            uint n = n0 + tx + 16 * j;
            if (n >= pc.N) continue;
            float r = pc.alpha * float(acc[i][j]);
            float c = float(LOAD(Tensor(PRESENT_OR(pc.c, pc.a)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n)));
            if (pc.c != 0) r += pc.beta * c;
            STORE_OR_KEEP(i * RN + j, Tensor(pc.y), z * pc.M * pc.N + m * pc.N + n, r);
        }
    }
}

#ifdef EPILOGUE
// the values this invocation stored, as each mode's stores lay them out
EpilogueBlock stored_block() {
    uint base = WORKGROUP_ID.z * pc.M * pc.N;
    if (MODE == 3) {
        uint m0 = WORKGROUP_ID.y * BR, n0 = WORKGROUP_ID.x * (8 * BC), lane = gl_SubgroupInvocationID;
        return B_PAIRS == 1 ? EpilogueBlock(base, pc.N, 0, 1, m0, 1, BR, pc.M, n0 + 2 * lane, 16, BC, pc.N, 2)
                            : EpilogueBlock(base, pc.N, 0, 1, m0, 1, BR, pc.M, n0 + lane, 8, BC, pc.N, 1);
    }
    if (MODE == 1) {
        uint n = WORKGROUP_ID.x * 256 + gl_LocalInvocationIndex;
        return EpilogueBlock(base, pc.N, 0, 1, WORKGROUP_ID.y * ROWS, 1, ROWS, pc.M, n, 1, 1, pc.N, 1);
    }
    uint m0 = WORKGROUP_ID.y * BM, n0 = WORKGROUP_ID.x * BN;
    if (MODE == 2) {  // (the first 64 invocations)
        uint tx = gl_LocalInvocationIndex % 8, ty = gl_LocalInvocationIndex / 8;
        return EpilogueBlock(base, pc.N, 0, 1, m0 + ty, 8, gl_LocalInvocationIndex < 64 ? RD : 0, pc.M, n0 + tx, 8,
                             RD, pc.N, 1);
    }
    return EpilogueBlock(base, pc.N, 0, 1, m0 + gl_LocalInvocationID.y, 16, RM, pc.M, n0 + gl_LocalInvocationID.x,
                         16, RN, pc.N, 1);
}
#endif

#ifdef FLOAT64
// FLOAT64 (float64 MatMul and Gemm, as scikit-learn's double models hold them): an invocation an element of y on a
// 16 x 16 grid, its K products summed in order with double multiply-adds
void float64_product() {
    uint n = WORKGROUP_ID.x * 16u + gl_LocalInvocationID.x, m = WORKGROUP_ID.y * 16u + gl_LocalInvocationID.y;
    uint z = WORKGROUP_ID.z, outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    if (m >= pc.M || n >= pc.N) return;
    uint a_at = outer * pc.a_outer + inner * pc.a_inner + m * pc.a_m;
    uint b_at = outer * pc.b_outer + inner * pc.b_inner + n * pc.b_n;
    double acc = 0.0LF;
    for (uint k = 0u; k < pc.K; ++k) acc = fma(Doubles(pc.a).v[a_at + k * pc.a_k], Doubles(pc.b).v[b_at + k * pc.b_k], acc);
    double r = double(pc.alpha) * acc;
    double c = Doubles(PRESENT_OR(pc.c, pc.y)).v[PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n)];  // (common.glsl)
    if (pc.c != 0ul) r += double(pc.beta) * c;
    Doubles(pc.y).v[(z * pc.M + m) * pc.N + n] = r;
}
#endif

void main() {
#ifdef FLOAT64
    float64_product();
    return;
#endif
    if (MODE == 3) broadcast();
    else if (MODE == 1) few_rows();
    else if (MODE == 2) {
        if (gl_LocalInvocationIndex < 64) direct();
    } else tiled();
#ifdef EPILOGUE
    epilogue_block(pc.y, pc.epilogue_operand, stored_block(), 0);
#endif
}
