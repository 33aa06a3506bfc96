#version 450
// com.microsoft GatherBlockQuantized: Gather of rows of a block-quantized table, dequantized as read, as ORT's CPU
// EP computes it: y = float(q - zp) * scale, in the scale's type (DTYPE: float32 or float16). q is 4-bit (two a
// byte, element 2k in the low nibble of byte k; SIGNED for int4) or 8-bit (BITS). Output element i = (m, j, e)
// of [outer, count, block] reads data element (m * axis_len + indices[j]) * block + e; an index outside
// [-axis_len, axis_len) gives zeros (the CPU EP's answer, not an error). Data element d = (x, y, z) of
// [.., qdim, qn] has scale x * blocks * qn + (y / bsize) * qn + z; its zero point is nibble (or byte) k of the
// zero points, k = (s / rowlen) * zp_stride + s % rowlen with rowlen = blocks * qn (zp_stride: nibbles a row of
// packed uint8 zero points, rowlen otherwise); absent, DEFAULT_ZP.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint IDX64 = 1;
layout(constant_id = 1) const uint BITS = 4;
layout(constant_id = 2) const uint SIGNED = 0;
layout(constant_id = 3) const uint DEFAULT_ZP = 0;

layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32Tensor { int v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t data, idx, scale, zp, y;
    uint n, block, count, axis_len, qdim, qn, blocks, bsize, zp_stride;
    GROUP_BASE;
} pc;

int element(uint64_t base, uint k) {  // element k of a 4- or 8-bit tensor
    if (BITS == 8) return int(Bytes(base).v[k]);
    int v = int(uint(Bytes(base).v[k / 2]) >> (4 * (k & 1))) & 15;
    return SIGNED == 1 ? (v ^ 8) - 8 : v;
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint e = i % pc.block, t = i / pc.block;
    uint j = t % pc.count, m = t / pc.count;
    // (int32 words at addresses valid for either type: a compiler may hoist a load out of its branch, and an int64
    // read of int32 indices would leave the buffer; an index out of range reads row 0 and gives 0 by a select)
    uint w = IDX64 == 1 ? 2 * j : j;
    int low = Int32Tensor(pc.idx).v[w], high = Int32Tensor(pc.idx).v[IDX64 == 1 ? w + 1 : w];
    int len = int(pc.axis_len);
    // (an int64 index: inside [-len, len) where its high word is that of its low word's sign extension)
    bool inside = low >= -len && low < len && (IDX64 == 0 || high == (low >> 31));
    uint d = (m * pc.axis_len + (inside ? uint(low < 0 ? low + len : low) : 0u)) * pc.block + e;
    uint plane = pc.qdim * pc.qn, rowlen = pc.blocks * pc.qn;
    uint s = (d / plane) * rowlen + (d % plane / pc.qn / pc.bsize) * pc.qn + d % pc.qn;
    int zp = element(PRESENT_OR(pc.zp, pc.data), PRESENT_AT(pc.zp, (s / rowlen) * pc.zp_stride + s % rowlen));
    zp = pc.zp != 0 ? zp : int(DEFAULT_ZP);
    float value = float(element(pc.data, d) - zp) * float(LOAD(Tensor(pc.scale), s));
    STORE(Tensor(pc.y), i, inside ? value : 0.0);
}
