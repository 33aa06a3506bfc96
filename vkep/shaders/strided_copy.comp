#version 450
// General N-d data movement: every output element i (row-major over `shape`) reads one input element.
//   MODE 0 gather: src = offset + sum(coord_d * a_d)            (Transpose, Slice, Expand, Split,
//                                                                DepthToSpace, SpaceToDepth)
//   MODE 1 tile:   src = row-major index of (coord_d % a_d) in an input of shape a
//   MODE 2 pad:    src coord = coord_d - b_d in a region of lengths a; outside it SUB picks:
//                  0 constant (the int64 in c[0..1]: float32 bits for float types; the input is
//                  contiguous of shape a), 1 reflect, 2 edge, 3 wrap (the region starts at `offset`
//                  with element strides c: negative pads crop the input before it is padded)
//   (MODE 0 and 1: b and c hold each dim's divisor magic and shift, common.glsl's fast_div)
//   MODE 3 trilu:  shape = [batch, rows, cols], y = x where (col - row >= k) (SUB 1: upper) or
//                  (col - row <= k) (SUB 0: lower), else 0; k = offset
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint SUB = 0;

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint n, rank;
    int offset;
    uint shape[MAX_RANK];
    int a[MAX_RANK];
    int b[MAX_RANK];
    int c[MAX_RANK];
} pc;

COMP_T pad_value() {
#if IS_FLOAT
    return COMP_T(uintBitsToFloat(uint(pc.c[0])));
#else
    return COMP_T(int64_t(uint(pc.c[0])) | (int64_t(pc.c[1]) << 32));
#endif
}

void main() {
    uint i = flat_index(64);
    if (i >= pc.n) return;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);
    if (MODE == 3) {
        uint cols = pc.shape[2];
        int col = int(i % cols), row = int((i / cols) % pc.shape[1]);
        bool keep = SUB == 1 ? col - row >= pc.offset : col - row <= pc.offset;
        STORE(Y, i, keep ? LOAD(X, i) : COMP_T(0));
        return;
    }
    uint src = uint(pc.offset), rem = i, step = 1;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint c;
        if (d == 0) {
            c = rem;  // (the outermost coordinate is what is left: i < n)
        } else if (MODE <= 1) {
            uint q = fast_div(rem, pc.shape[d], uint(pc.b[d]), uint(pc.c[d]));
            c = rem - q * pc.shape[d];
            rem = q;
        } else {
            c = rem % pc.shape[d];
            rem /= pc.shape[d];
        }
        if (MODE == 0) {
            src += c * uint(pc.a[d]);
        } else if (MODE == 1) {
            src += (c % uint(pc.a[d])) * step;
            step *= uint(pc.a[d]);
        } else {
            int n = pc.a[d], s = int(c) - pc.b[d];
            if (s < 0 || s >= n) {
                if (SUB == 0) {
                    STORE(Y, i, pad_value());
                    return;
                } else if (SUB == 1) {  // reflect without repeating the edge, period 2(n-1)
                    int period = max(2 * (n - 1), 1);
                    s = abs(s) % period;
                    if (s >= n) s = period - s;
                } else if (SUB == 2) {
                    s = clamp(s, 0, n - 1);
                } else {
                    s = ((s % n) + n) % n;
                }
            }
            if (SUB == 0) {
                src += uint(s) * step;
                step *= uint(n);
            } else {
                src += uint(s) * uint(pc.c[d]);
            }
        }
    }
    STORE(Y, i, LOAD(X, src));
}
