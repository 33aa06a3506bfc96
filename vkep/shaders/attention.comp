#version 450
// ONNX Attention (opset 23/24) and com.microsoft's GroupQueryAttention, one workgroup per query row
// (batch, head, query position).
//
// MODE 0: scores s_j = (q*sqrt(scale)) . (k_j*sqrt(scale)), softcap, plus the bias (attn_mask, causal
// frontier, local window, nonpad_kv_seqlen padding); softmax (with an extra sink logit: SINK); Y = sum_j p_j v_j. Keys come from past_key/past_value
// (j < past) or from the new K/V. Rows of up to CHUNK keys keep their scores in shared memory; longer
// rows recompute them chunk by chunk (the softmax statistics then come from an online pass).
// MODE 1: present = concat(past, new) along the sequence axis, one invocation per element (4 with VEC4);
// rows past the concatenation are zero.
// MODE 2: the score rows two products frame (vkep/kernels/attention.py: Q K^T * scale written at qk as
// [B, Hq, Sq, total], float32) biased as MODE 0 biases them and replaced by their softmax, one workgroup a row;
// MODE 3 the same, one invocation a row.
//
// DTYPE is the type of Q/K/V/Y, DTYPE_Y the type of attn_mask. With float16 tensors, ROUND16 rounds
// where ONNX's reference computes in float16 (accumulation stays float32); SOFTMAX16 also inside the
// softmax (softmax_precision unset or float16).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 2) const uint LAYOUT3D = 0;     // Q, K, V, Y are [B, S, heads*D] (else [B, heads, S, D])
// CAUSAL 1: query i attends keys j <= i + offset; 2 and 3: keys j <= offset (a padded prompt's rows past its
// length offset + 1, or bidirectional), the local window ending at i + offset + 1 (2) or at offset (3)
layout(constant_id = 3) const uint CAUSAL = 0;
layout(constant_id = 4) const uint MASK = 0;         // attn_mask given; 2: as pairs (bias_of)
layout(constant_id = 5) const uint QK_MODE = 4;      // qk_matmul_output: 0 q.k, 1 softcapped, 2 with bias, 3 softmax, 4 none
layout(constant_id = 6) const uint ROUND16 = 0;
layout(constant_id = 7) const uint SOFTMAX16 = 0;
layout(constant_id = 8) const uint SCALE_BITS = 0x3f800000u;  // sqrt(scale) as float bits
layout(constant_id = 9) const uint SOFTCAP_BITS = 0;          // softcap as float bits (0: none)
layout(constant_id = 10) const uint NONPAD = 0;                // nonpad_kv_seqlen given
layout(constant_id = 11) const uint VEC4 = 0;                  // head sizes are multiples of 4: vec4 loads
layout(constant_id = 12) const uint SINK = 0;  // softmax's extra logit: 0 none, 1 zero (smooth softmax), 2 aux[head]

// aux: nonpad_kv_seqlen (NONPAD) or head_sink (SINK 2). MODE 1 reads sq as past_k's sequence length and dv
// as present's (past <= sq: only the first past rows are copied)
layout(push_constant, scalar) uniform Push {
    uint64_t q, k, v, mask, past_k, past_v, aux, y, qk;
    uint rows, hq, group, sq, kv_new, past, d, dv, mask_len, mask_sb, mask_sh, mask_sq;
    int offset;   // the causal frontier (CAUSAL)
    uint window;  // local window (0: none): the last `window` keys up to the frontier (CAUSAL 2: up to i + offset + 1)
} pc;

#define NEG_INF uintBitsToFloat(0xff800000u)
#define CHUNK 2048
#define MAX_D 512
#define MAX_R 4

shared float probs[CHUNK];
shared vec4 qs[MAX_D / 4];
shared float red[256];
shared float red2[256];
shared vec4 redv[256];

float r16(float x) {
#if DTYPE == 1
    if (ROUND16 != 0) return float(float16_t(x));
#endif
    return x;
}

vec4 r16v(vec4 x) {
#if DTYPE == 1
    if (ROUND16 != 0) return vec4(f16vec4(x));
#endif
    return x;
}

float s16(float x) { return SOFTMAX16 != 0 ? r16(x) : x; }

// four consecutive elements at any element-aligned address (scalar layout: element alignment suffices)
#if DTYPE == 1
layout(buffer_reference, scalar, buffer_reference_align = 2) buffer Quad { f16vec4 v; };
#define ELEM_BYTES 2
#define DTYPE_VEC4 f16vec4
#else
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Quad { vec4 v; };
#define ELEM_BYTES 4
#define DTYPE_VEC4 vec4
#endif

vec4 load4(uint64_t row, uint c) { return vec4(Quad(row + uint64_t(c) * ELEM_BYTES).v); }
float load1(uint64_t row, uint c) { return LOAD(Tensor(row), c); }

// element c of head kh, key j of [B, heads, S, dim] (4-D) or [B, S, heads*dim] (3-D)
uint seq_index(uint b, uint kh, uint heads, uint j, uint len, uint dim, uint c) {
    return LAYOUT3D != 0 ? ((b * len + j) * heads + kh) * dim + c : ((b * heads + kh) * len + j) * dim + c;
}

// the address of key (value) j of KV head kh: past_key/past_value below `past`, else the new K/V
uint64_t kv_row(uint64_t past_t, uint64_t new_t, uint dim, uint b, uint kh, uint j) {
    uint hkv = pc.hq / pc.group;
    uint index = j < pc.past ? ((b * hkv + kh) * pc.past + j) * dim
                             : seq_index(b, kh, hkv, j - pc.past, pc.kv_new, dim, 0);
    return (j < pc.past ? past_t : new_t) + uint64_t(index) * ELEM_BYTES;
}

// the additive bias of key j, in two parts added one after the other (biased): attn_mask (keys past its length are
// masked), or with MASK 2 its pairs (com.microsoft Attention's attention_bias, then the mask_index's filter value: its
// CPU EP adds the score and the bias, then the mask, which at -10000 rounds to 1e-3), then the causal frontier,
// local window and nonpad_kv_seqlen padding
vec2 bias_of(uint b, uint h, uint i, uint j, int offset, uint valid) {
    vec2 bias = vec2(0.0);
    if (MASK != 0) {
        // read at a key inside the mask whatever j (a driver may perform a load under a branch anyway: common.glsl
        // PRESENT_OR; an empty mask reads Q's first element), then choose: keys past its length are masked
        uint mi = b * pc.mask_sb + h * pc.mask_sh + i * pc.mask_sq + min(j, pc.mask_len - 1);
        TensorY M = TensorY(pc.mask_len != 0 ? pc.mask : pc.q);
        mi = pc.mask_len != 0 ? mi : 0u;
#if DTYPE_Y == 4
        bias.x = M.v[mi] != uint8_t(0) ? 0.0 : NEG_INF;
#else
        if (MASK == 2) {
            bias = vec2(float(M.v[2u * mi]), float(M.v[2u * mi + 1u]));
        } else {
            bias.x = float(M.v[mi]);
        }
#endif
        bias.x = j < pc.mask_len ? bias.x : NEG_INF;
    }
    int frontier = (CAUSAL == 1 ? int(i) : 0) + offset;
    if (CAUSAL != 0 && int(j) > frontier) bias.y += NEG_INF;
    if (pc.window != 0 && int(j) <= (CAUSAL == 2 ? int(i) + offset + 1 : frontier) - int(pc.window)) bias.y += NEG_INF;
    if (j >= valid) bias.y += NEG_INF;
    return bias;
}

// a score plus its bias: the first part, then the second (adding a zero second part changes nothing)
float biased(float s, vec2 bias) {
    precise float first = s + bias.x;
    return first + bias.y;
}

// the scaled score of key j (q k^T * scale), q already scaled in shared memory
float score(uint b, uint kh, uint j, float sqs) {
    uint64_t row = kv_row(pc.past_k, pc.k, pc.d, b, kh, j);
    float s = 0.0;
    if (VEC4 != 0) {
        for (uint c = 0; c < pc.d; c += 4) s += dot(qs[c / 4], r16v(load4(row, c) * sqs));
    } else {
        for (uint c = 0; c < pc.d; c++) s += qs[c / 4][c % 4] * r16(load1(row, c) * sqs);
    }
    return r16(s);
}

float softcap(float s) {
    float cap = uintBitsToFloat(SOFTCAP_BITS);
    // tanh saturates at |x| = 10 in float; clamping keeps exp-based tanh away from inf/inf
    return cap > 0.0 ? r16(r16(tanh(clamp(r16(s / cap), -10.0, 10.0))) * cap) : s;
}

// the biased score of key j; keys the bias masks skip the dot product (-inf whatever the score, for
// finite scores), unless qk_matmul_output wants the score itself
float biased_score(uint b, uint h, uint kh, uint i, uint j, int offset, uint valid, uint qk_row, float sqs,
                   out float bias) {
    vec2 parts = bias_of(b, h, i, j, offset, valid);
    bias = parts.x + parts.y;
    if (bias == NEG_INF && QK_MODE > 1) {
        if (QK_MODE == 2) STORE(Tensor(pc.qk), qk_row + j, NEG_INF);
        return NEG_INF;
    }
    float s = score(b, kh, j, sqs);
    if (QK_MODE == 0) STORE(Tensor(pc.qk), qk_row + j, s);  // mode 0: before softcap (the spec; ORT agrees)
    s = softcap(s);
    if (QK_MODE == 1) STORE(Tensor(pc.qk), qk_row + j, s);
    s = r16(biased(s, parts));
    if (QK_MODE == 2) STORE(Tensor(pc.qk), qk_row + j, s);
    return s;
}

// the workgroup's max of a and of b (every invocation gets both)
vec2 max_over_workgroup(float a, float b) {
    uint t = gl_LocalInvocationID.x;
    red[t] = a;
    red2[t] = b;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) {
            red[t] = max(red[t], red[t + s]);
            red2[t] = max(red2[t], red2[t + s]);
        }
        barrier();
    }
    vec2 result = vec2(red[0], red2[0]);
    barrier();
    return result;
}

float sum_over_workgroup(float a) {
    uint t = gl_LocalInvocationID.x;
    red[t] = a;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        barrier();
    }
    float result = red[0];
    barrier();
    return result;
}

// the row of query i's keys (row of [B, Hq, Sq]), its valid keys (nonpad_kv_seqlen) and causal offset
void row_limits(uint b, out int offset, out uint valid) {
    uint total = pc.past + pc.kv_new;
    offset = pc.offset;
    valid = total;
    if (NONPAD != 0) {
        int n = int(Int64Tensor(pc.aux).v[b]);
        valid = uint(clamp(n, 0, int(total)));
        if (pc.past == 0) offset = n - int(pc.sq);
    }
}

void softmax_rows() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint i = row % pc.sq, h = (row / pc.sq) % pc.hq, b = row / (pc.sq * pc.hq);
    uint total = pc.past + pc.kv_new;
    int offset;
    uint valid;
    row_limits(b, offset, valid);
    Tensor S = Tensor(pc.qk);
    uint first = row * total;
    float m = NEG_INF, bmax = NEG_INF;
    for (uint j = t; j < total; j += WG) {
        vec2 bias = bias_of(b, h, i, j, offset, valid);
        bmax = max(bmax, bias.x + bias.y);
        m = max(m, biased(LOAD(S, first + j), bias));
    }
    vec2 maxes = max_over_workgroup(m, bmax);
    m = maxes.x;
    // a row whose bias masks every key gives zeros, as does a row whose scores are all -inf (MODE 0's guard)
    bool zero_row = maxes.y == NEG_INF || m == NEG_INF;
    float l = 0.0;
    for (uint j = t; j < total; j += WG) l += exp(biased(LOAD(S, first + j), bias_of(b, h, i, j, offset, valid)) - m);
    l = sum_over_workgroup(l);
    for (uint j = t; j < total; j += WG) {
        float p = exp(biased(LOAD(S, first + j), bias_of(b, h, i, j, offset, valid)) - m) / l;
        STORE(S, first + j, zero_row ? 0.0 : p);
    }
}

// MODE 3: as MODE 2, one invocation a row (many short rows: no workgroup per row, no barriers)
void softmax_row_serial() {
    uint row = flat_index(WG);
    if (row >= pc.rows) return;
    uint i = row % pc.sq, h = (row / pc.sq) % pc.hq, b = row / (pc.sq * pc.hq);
    uint total = pc.past + pc.kv_new;
    int offset;
    uint valid;
    row_limits(b, offset, valid);
    Tensor S = Tensor(pc.qk);
    uint first = row * total;
    float m = NEG_INF, bmax = NEG_INF;
    for (uint j = 0; j < total; j++) {
        vec2 bias = bias_of(b, h, i, j, offset, valid);
        bmax = max(bmax, bias.x + bias.y);
        m = max(m, biased(LOAD(S, first + j), bias));
    }
    // a row whose bias masks every key gives zeros, as does a row whose scores are all -inf (MODE 0's guard)
    bool zero_row = bmax == NEG_INF || m == NEG_INF;
    float l = 0.0;
    for (uint j = 0; j < total; j++) l += exp(biased(LOAD(S, first + j), bias_of(b, h, i, j, offset, valid)) - m);
    for (uint j = 0; j < total; j++) {
        float p = exp(biased(LOAD(S, first + j), bias_of(b, h, i, j, offset, valid)) - m) / l;
        STORE(S, first + j, zero_row ? 0.0 : p);
    }
}

void concat_present() {
    // present[b, kh, j, c] (pc.dv rows a head) for j < past from past, then kv_new rows from the new K or V
    // (left to another dispatch when k is 0), then zeros (pc.d is this tensor's head size); VEC4: one
    // invocation per 4 elements
    uint width = VEC4 != 0 ? 4 : 1;
    uint idx = flat_index(WG) * width;
    if (idx >= pc.rows) return;
    uint c = idx % pc.d, j = (idx / pc.d) % pc.dv, bh = idx / (pc.d * pc.dv);
    uint kh = bh % pc.hq, b = bh / pc.hq;
    bool is_new = j >= pc.past && j < pc.past + pc.kv_new;
    if (is_new && pc.k == 0) return;
    uint64_t src = j < pc.past ? pc.past_k + uint64_t((bh * pc.sq + j) * pc.d + c) * ELEM_BYTES
                               : pc.k + uint64_t(seq_index(b, kh, pc.hq, j - pc.past, pc.kv_new, pc.d, c)) * ELEM_BYTES;
    if (j >= pc.past && !is_new) {
        if (VEC4 != 0)
            Quad(pc.y + uint64_t(idx) * ELEM_BYTES).v = DTYPE_VEC4(0.0);
        else
            STORE(Tensor(pc.y), idx, 0.0);
    } else if (VEC4 != 0) {
        Quad(pc.y + uint64_t(idx) * ELEM_BYTES).v = Quad(src).v;
    } else {
        STORE(Tensor(pc.y), idx, load1(src, 0));
    }
}

void main() {
    if (MODE == 1) {
        concat_present();
        return;
    }
    if (MODE == 2) {
        softmax_rows();
        return;
    }
    if (MODE == 3) {
        softmax_row_serial();
        return;
    }
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint i = row % pc.sq, h = (row / pc.sq) % pc.hq, b = row / (pc.sq * pc.hq);
    uint kh = h / pc.group;
    uint total = pc.past + pc.kv_new;
    float sqs = uintBitsToFloat(SCALE_BITS);
    uint qk_row = row * total;  // qk_matmul_output is [B, Hq, Sq, total]

    for (uint c = t; c < pc.d; c += WG)
        qs[c / 4][c % 4] = r16(LOAD(Tensor(pc.q), seq_index(b, h, pc.hq, i, pc.sq, pc.d, c)) * sqs);
    // causal frontier: key j is attended iff j <= i + offset
    int offset;
    uint valid;
    row_limits(b, offset, valid);
    barrier();

    // pass 1: max of the biased scores and of the bias; running sum of exp for rows that do not fit
    // keys past the causal frontier or nonpad_kv_seqlen are masked whatever their scores: not read at all
    // (unless qk_matmul_output lists every key), so a decode step on a padded cache reads the valid keys only
    uint kend = total;
    if (QK_MODE == 4) {
        if (CAUSAL != 0) kend = uint(clamp((CAUSAL == 1 ? int(i) : 0) + offset + 1, 0, int(total)));
        kend = min(kend, valid);
    }
    bool stored = kend <= CHUNK;
    float m = NEG_INF, l = 0.0, bmax = NEG_INF;
    for (uint j = t; j < kend; j += WG) {
        float bias;
        float s = biased_score(b, h, kh, i, j, offset, valid, qk_row, sqs, bias);
        bmax = max(bmax, bias);
        if (stored) {
            probs[j] = s;
            m = max(m, s);
        } else if (s > m) {
            l = (m == NEG_INF ? 0.0 : l * exp(m - s)) + 1.0;
            m = s;
        } else if (s != NEG_INF) {
            l += exp(s - m);
        }
    }
    float m_t = m;
    vec2 maxes = max_over_workgroup(m, bmax);
    m = maxes.x;
    bmax = maxes.y;
    // the sink logit joins the max and, below, the denominator (ORT's smooth softmax and head_sink)
    float sink = SINK == 2 ? float(LOAD(Tensor(pc.aux), h)) : 0.0;
    if (SINK != 0) m = max(m, sink);
    // a row whose bias masks every key gives zeros (the reference's fully-masked-row guard), as does a
    // row whose scores are all -inf (its softmax uses max 0: every exp is 0)
    bool zero_row = bmax == NEG_INF || m == NEG_INF;
    if (stored) {
        l = 0.0;
        for (uint j = t; j < kend; j += WG) l += s16(exp(s16(probs[j] - m)));
    } else {
        l = m_t == NEG_INF ? 0.0 : l * exp(m_t - m);
    }
    l = s16(sum_over_workgroup(l));
    if (SINK != 0) l += exp(sink - m);

    // pass 2, chunk by chunk: probabilities into shared memory, then threads accumulate output columns:
    // dw groups of 4 (VEC4) or 1 columns side by side, g key subsets each; MAX_R groups per thread
    uint width = VEC4 != 0 ? 4 : 1, groups = pc.dv / width;
    uint dw = min(groups, WG), g = WG / dw, split = t / dw, col = t % dw;
    vec4 acc[MAX_R] = vec4[MAX_R](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    for (uint base = 0; base < kend; base += CHUNK) {
        uint len = min(CHUNK, kend - base);
        for (uint jj = t; jj < len; jj += WG) {
            uint j = base + jj;
            float bias;
            float s = stored ? probs[jj] : biased_score(b, h, kh, i, j, offset, valid, qk_row, sqs, bias);
            float p = zero_row ? 0.0 : r16(s16(s16(exp(s16(s - m))) / l));
            probs[jj] = p;
            if (QK_MODE == 3) STORE(Tensor(pc.qk), qk_row + j, p);
        }
        barrier();
        if (split < g) {
            for (uint jj = split; jj < len; jj += g) {
                float p = probs[jj];
                uint64_t row = kv_row(pc.past_v, pc.v, pc.dv, b, kh, base + jj);
                for (uint r = 0; r < MAX_R; r++) {
                    uint cg = col + r * dw;
                    if (cg < groups) acc[r] += p * (VEC4 != 0 ? load4(row, cg * 4) : vec4(load1(row, cg), 0.0, 0.0, 0.0));
                }
            }
        }
        barrier();
    }
    uint rounds = (groups + dw - 1) / dw;  // uniform: every thread reaches the barriers
    for (uint r = 0; r < rounds; r++) {
        redv[t] = acc[r];
        barrier();
        uint cg = col + r * dw;
        if (split == 0 && cg < groups) {
            vec4 sum = vec4(0.0);
            for (uint s = 0; s < g; s++) sum += redv[s * dw + col];
            for (uint e = 0; e < width; e++)
                STORE(Tensor(pc.y), seq_index(b, h, pc.hq, i, pc.sq, pc.dv, cg * width + e), sum[e]);
        }
        barrier();
    }
}
