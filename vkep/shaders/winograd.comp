#version 450
// Winograd F(R x R, 3 x 3) for Conv with a 3x3 kernel, stride 1, dilation 1, one group (vkep/kernels/winograd.py).
// The output is cut into R x R tiles, each read as an A x A input patch (A = R + 2); per tile and channel the
// patch d becomes V = B^T d B, the weights were transformed once when packed (U = G g G^T, [A*A][M][C]), and
//   Y'[t][m][p] = sum_c U[t][m][c] * V[t][c][p]    for each of the A*A transform points t,
// then y = A^T Y' A (+ bias) per tile. Three dispatches (MODE), over the tiles [p0, p0 + np) of the batch:
// MODE 0: input transform, one invocation per (4 channels, tile): X -> V ([A*A][C / 4][np][4], float32 scratch)
// MODE 1: the A*A GEMMs: an invocation sums over C for TM output channels x TN tiles of one point. Its channels
//         follow from the workgroup only: each U value is loaded by one lane and handed to the others of its
//         subgroup (gemm()); its tiles are WG apart (lanes read V contiguously).
// MODE 2: output transform, one invocation per (output channel, 4 tiles): Y' ([A*A][M][np rounded up to 4])
//         -> y (+ bias)
// X, the bias and y are in the model's type (float16 storage is read into float arithmetic); U, V and Y' are
// float32 whatever the model's type: rounded to float16, U alone put errors of 3e-3 into outputs near zero.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "epilogue.glsl"
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_ballot : require

layout(local_size_x_id = 4) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint R = 2;    // output tile size: F(2x2, 3x3) or F(4x4, 3x3)
layout(constant_id = 2) const uint TM = 8;   // MODE 1: output channels per invocation
layout(constant_id = 3) const uint TN = 2;   // MODE 1: tiles per invocation
const uint A = R + 2;                        // input patch (and transform) size
const uint T = A * A;                        // transform points
layout(constant_id = 4) const uint WG = 64;  // threads per workgroup (MODE 1: 8 on CPU devices, else 64)

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };

layout(push_constant, scalar) uniform Push {
    EPILOGUE_OPERAND            // (the EPILOGUE variant's, MODE 2: epilogue.glsl)
    uint64_t x, u, b, y, v, z;  // input, packed U, bias (or 0), output, V and Y' scratch
    uint c, m;                  // input and output channels
    uint ih, iw, oh, ow;        // spatial dims of X and y
    int ph, pw;                 // leading pads
    uint th, tw;                // tiles along y's height and width (per image)
    uint p0, np;                // the tiles of this pass: [p0, p0 + np) of batch * th * tw
} pc;

// B^T (rows: the transform points along one axis), G's counterpart for inputs; and A^T for outputs
const float BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
const float AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
const float BT4[6][6] = {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                         {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
const float AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
// (the unselected table is indexed within its bounds too: both may be evaluated before specialization)
float bt(uint i, uint j) { return R == 2 ? BT2[min(i, 3)][min(j, 3)] : BT4[i][j]; }
float at(uint i, uint j) { return R == 2 ? AT2[min(i, 1)][min(j, 3)] : AT4[i][j]; }

// (image, first output row, first output column) of tile p
uvec3 tile_origin(uint p) {
    uint per_image = pc.th * pc.tw, q = p % per_image;
    return uvec3(p / per_image, (q / pc.tw) * R, (q % pc.tw) * R);
}

// 4 floats as two 64-bit words: lavapipe (Mesa 22.3) loads and stores a vector lane by lane and component by
// component, so two 64-bit components cost half of four floats
layout(buffer_reference, scalar, buffer_reference_align = 16) buffer Words4 { u64vec2 v[]; };
vec4 as_floats(u64vec2 q) {
    return vec4(uintBitsToFloat(unpackUint2x32(q.x)), uintBitsToFloat(unpackUint2x32(q.y)));
}
u64vec2 as_words(vec4 f) {
    return u64vec2(packUint2x32(floatBitsToUint(f.xy)), packUint2x32(floatBitsToUint(f.zw)));
}

// B^T d B of the A x A patch d (in place)
void transform_input(inout float d[A][A]) {
    float e[A][A];  // B^T d
    [[unroll]] for (uint r = 0; r < A; ++r) [[unroll]] for (uint s = 0; s < A; ++s) {
        float sum = 0.0;
        [[unroll]] for (uint k = 0; k < A; ++k) if (bt(r, k) != 0.0) sum += bt(r, k) * d[k][s];
        e[r][s] = sum;
    }
    [[unroll]] for (uint r = 0; r < A; ++r) [[unroll]] for (uint s = 0; s < A; ++s) {
        float sum = 0.0;
        [[unroll]] for (uint k = 0; k < A; ++k) if (bt(s, k) != 0.0) sum += e[r][k] * bt(s, k);
        d[r][s] = sum;
    }
}

// one tile, 4 channels (those past C are zeros): V[t][c / 4][p] holds the 4 channels of a point together
void input_transform() {
    uint i = gl_GlobalInvocationID.x, cq = gl_WorkGroupID.y, c4 = (pc.c + 3) / 4;
    if (i >= pc.np) return;
    uvec3 o = tile_origin(pc.p0 + i);
    Tensor X = Tensor(pc.x);
    int h0 = int(o.y) - pc.ph, w0 = int(o.z) - pc.pw;
    vec4 v[T];
    [[unroll]] for (uint ch = 0; ch < 4; ++ch) {
        uint c = cq * 4 + ch;
        uint base = (o.x * pc.c + min(c, pc.c - 1)) * pc.ih * pc.iw;
        float d[A][A];
        [[unroll]] for (uint r = 0; r < A; ++r) {
            int h = h0 + int(r);
            [[unroll]] for (uint s = 0; s < A; ++s) {
                int w = w0 + int(s);
                bool inside = c < pc.c && uint(h) < pc.ih && uint(w) < pc.iw;
                float value = LOAD(X, inside ? base + uint(h) * pc.iw + uint(w) : base);
                d[r][s] = inside ? value : 0.0;
            }
        }
        transform_input(d);
        [[unroll]] for (uint r = 0; r < A; ++r) [[unroll]] for (uint s = 0; s < A; ++s) v[r * A + s][ch] = d[r][s];
    }
    Words4 V = Words4(pc.v);
    [[unroll]] for (uint t = 0; t < T; ++t) V.v[(t * c4 + cq) * pc.np + i] = as_words(v[t]);
}

// U values reach the lanes by subgroupBroadcast: lane l of each subgroup loads row m0 + 8 g + l (l < 8) and
// hands it to the others, one load per 8 rows instead of one per row (lavapipe loads lane by lane)
#define SG 8
#define ROW(g, l) {                                                                                            \
    vec4 a = subgroupBroadcast(ua[g], l);                                                                     \
    [[unroll]] for (uint j = 0; j < TN; ++j) acc[(g) * SG + (l)][j] += dot(a, b[j]);                          \
}

void gemm() {
    uint t = gl_WorkGroupID.z, m0 = gl_WorkGroupID.y * TM, c4 = (pc.c + 3) / 4;
    uint n0 = gl_WorkGroupID.x * (WG * TN) + gl_LocalInvocationIndex;
    Words4 U = Words4(pc.u);
    Words4 V = Words4(pc.v);
    // rows past M read row M - 1 and tiles past np read tile np - 1 (both there), and are not stored
    const uint TG = TM / SG;
    uint urow[TG], vcol[TN];
    [[unroll]] for (uint g = 0; g < TG; ++g)
        urow[g] = (t * pc.m + min(m0 + g * SG + gl_SubgroupInvocationID % SG, pc.m - 1)) * c4;
    [[unroll]] for (uint j = 0; j < TN; ++j) vcol[j] = t * c4 * pc.np + min(n0 + WG * j, pc.np - 1);
    float acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;
    for (uint k = 0; k < c4; ++k) {
        vec4 ua[TG], b[TN];
        [[unroll]] for (uint g = 0; g < TG; ++g) ua[g] = as_floats(U.v[urow[g] + k]);
        [[unroll]] for (uint j = 0; j < TN; ++j) b[j] = as_floats(V.v[vcol[j] + k * pc.np]);
        [[unroll]] for (uint g = 0; g < TG; ++g) {
            ROW(g, 0) ROW(g, 1) ROW(g, 2) ROW(g, 3) ROW(g, 4) ROW(g, 5) ROW(g, 6) ROW(g, 7)
        }
    }
    Floats Z = Floats(pc.z);
    uint zs = (pc.np + 3) & ~3u;  // Y' rows: 4 tiles per word pair for the output transform
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        uint m = m0 + i;
        if (m >= pc.m) break;
        [[unroll]] for (uint j = 0; j < TN; ++j) {
            uint n = n0 + WG * j;
            if (n < pc.np) Z.v[(t * pc.m + m) * zs + n] = acc[i][j];
        }
    }
}

// 4 tiles of one output channel: Y'[t][m] is read 4 tiles at a time (its rows are padded to 4 tiles)
void output_transform() {
    uint i = gl_GlobalInvocationID.x * 4, m = gl_WorkGroupID.y, zs = (pc.np + 3) & ~3u;
    if (i >= pc.np) return;
    Words4 Z = Words4(pc.z);
    vec4 q4[T];
    [[unroll]] for (uint t = 0; t < T; ++t) q4[t] = as_floats(Z.v[((t * pc.m + m) * zs + i) / 4]);
    float bias = LOAD(Tensor(PRESENT_OR(pc.b, pc.x)), PRESENT_AT(pc.b, m));
    bias = pc.b != 0 ? bias : 0.0;
    Tensor Y = Tensor(pc.y);
    [[unroll]] for (uint tile = 0; tile < 4; ++tile) {
        if (i + tile >= pc.np) break;
        float e[R][A];  // A^T q
        [[unroll]] for (uint r = 0; r < R; ++r) [[unroll]] for (uint s = 0; s < A; ++s) {
            float sum = 0.0;
            [[unroll]] for (uint k = 0; k < A; ++k) if (at(r, k) != 0.0) sum += at(r, k) * q4[k * A + s][tile];
            e[r][s] = sum;
        }
        uvec3 o = tile_origin(pc.p0 + i + tile);
        uint base = (o.x * pc.m + m) * pc.oh * pc.ow;
        [[unroll]] for (uint r = 0; r < R; ++r) {
            uint h = o.y + r;
            [[unroll]] for (uint s = 0; s < R; ++s) {
                uint w = o.z + s;
                float sum = bias;  // (A^T q) A
                [[unroll]] for (uint k = 0; k < A; ++k) if (at(s, k) != 0.0) sum += e[r][k] * at(s, k);
                if (h < pc.oh && w < pc.ow) STORE_OR_KEEP((tile * R + r) * R + s, Y, base + h * pc.ow + w, sum);
            }
        }
    }
#ifdef EPILOGUE
    [[dont_unroll]] for (uint tile = 0; tile < 4; ++tile) {  // (one expansion of the steps: epilogue.glsl)
        if (i + tile >= pc.np) break;
        uvec3 o = tile_origin(pc.p0 + i + tile);
        epilogue_block(pc.y, pc.epilogue_operand, EpilogueBlock((o.x * pc.m + m) * pc.oh * pc.ow, pc.ow, m, 0,
                                                                o.y, 1, R, pc.oh, o.z, 1, R, pc.ow, 1), tile * R * R);
    }
#endif
}

void main() {
    if (MODE == 0) input_transform();
    else if (MODE == 1) gemm();
    else output_transform();
}
