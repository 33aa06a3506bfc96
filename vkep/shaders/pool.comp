#version 450
// MaxPool (also int8/uint8), AveragePool, LpPool and their Global forms in NC[D]HW layout (spatial shapes
// read as 3-D): one thread per output scans its window (dilated; leading pads shift it, taps in the padding are skipped).
// MaxPool's optional Indices output (int64, address 0 if absent) is the flat index of the first maximum,
// row-major, or column-major over the spatial dims when STORAGE_ORDER = 1.
// AveragePool with COUNT_PAD divides by the taps inside the padded input (ORT's CPU EP convention).
// The FLOAT64 variant: float64 MaxPool in double, as the CPU EP's MaxPool<double> (pool_functors.h): the window's
// first tap taken whatever it is (NaN, -inf), then any greater one (a NaN first stays; a window of -inf gives -inf).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;  // 0 max, 1 average, 2 Lp
layout(constant_id = 1) const uint COUNT_PAD = 0;
layout(constant_id = 2) const uint P = 2;
layout(constant_id = 3) const uint STORAGE_ORDER = 0;
// MaxPool over a 1-D or 2-D window of KH x KW taps without an Indices output (pool.py: 0, the loops below): every
// tap unrolled, a tap outside the input read at a clamped address and left out by a select. lavapipe runs the
// loops' 8-tap steps as 8 masked loads each, each a loop over the lanes (resnet50's 3x3 stride-2 MaxPool: 3 x 8)
layout(constant_id = 4) const uint KH_FIXED = 0;
layout(constant_id = 5) const uint KW_FIXED = 0;

#ifdef FLOAT64
#define POOL_T double
#define LOWEST (-1.7976931348623157e308LF)
const bool FIRST_TAKEN = true;
#else
#define POOL_T float
#define LOWEST -3.402823466e38
const bool FIRST_TAKEN = false;
#endif

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, indices;
    uint n;                 // outputs: N * C * od * oh * ow
    uint id, ih, iw;
    uint od, oh, ow;
    uint kd, kh, kw;
    uint sd, sh, sw;
    uint dd, dh, dw;
    int pd, ph, pw;         // leading pads
    int ped, peh, pew;      // trailing pads (AveragePool's count_include_pad)
    GROUP_BASE;
} pc;

// taps of one axis that fall inside the padded input, as ORT counts them
uint padded_taps(int start, uint k, uint dil, uint size, int pad_end) {
    int end = min(start + int(k * dil), int(size) + pad_end);
    return uint(1 + (end - start - 1) / int(dil));
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint osz = pc.od * pc.oh * pc.ow, isz = pc.id * pc.ih * pc.iw;
    uint nc = i / osz, p = i % osz, q = p / pc.ow;
    int w0 = int((p % pc.ow) * pc.sw) - pc.pw;
    int h0 = int((q % pc.oh) * pc.sh) - pc.ph;
    int d0 = int((q / pc.oh) * pc.sd) - pc.pd;
    Tensor X = Tensor(pc.x);
    uint base = nc * isz;
    if (OP == 0 && KH_FIXED != 0) {  // (1-D or 2-D: d0 is 0)
        float m = -3.402823466e38;  // (as below: NaN is skipped, a window of -inf gives -FLT_MAX)
        [[unroll]] for (uint b = 0; b < KH_FIXED; ++b) {
            int h = h0 + int(b * pc.dh);
            bool h_in = uint(h) < pc.ih;
            uint row = base + uint(clamp(h, 0, int(pc.ih) - 1)) * pc.iw;
            [[unroll]] for (uint c = 0; c < KW_FIXED; ++c) {
                int w = w0 + int(c * pc.dw);
                float v = LOAD(X, row + uint(clamp(w, 0, int(pc.iw) - 1)));
                m = h_in && uint(w) < pc.iw && v > m ? v : m;
            }
        }
        STORE(Tensor(pc.y), i, m);
        return;
    }
    // max starts at the lowest float and takes only what is greater, as ORT's CPU EP: NaN is skipped
    // (a window of NaN and -inf gives -FLT_MAX); the index is the first tap's until something is greater
    // (FLOAT64: the first tap's value too)
    POOL_T acc = OP == 0 ? LOWEST : POOL_T(0);
    uint best = 0, count = 0;
    bool found = false;
    for (uint a = 0; a < pc.kd; ++a) {
        int d = d0 + int(a * pc.dd);
        if (uint(d) >= pc.id) continue;
        for (uint b = 0; b < pc.kh; ++b) {
            int h = h0 + int(b * pc.dh);
            if (uint(h) >= pc.ih) continue;
            // rows in steps of 8 unrolled taps: lavapipe ends an invocation's loops after 65,535
            // iterations in all, and unrolled iterations do not count (vkep/kernels/pool.py checks the rest)
            for (uint c0 = 0; c0 < pc.kw; c0 += 8) {
                [[unroll]] for (uint j = 0; j < 8; ++j) {
                    uint c = c0 + j;
                    int w = w0 + int(c * pc.dw);
                    if (c >= pc.kw || uint(w) >= pc.iw) continue;
                    uint at = (uint(d) * pc.ih + uint(h)) * pc.iw + uint(w);
                    POOL_T v = LOAD_VAL(pc.x, base + at);
                    if (OP == 0) {
                        uint index = STORAGE_ORDER == 0 ? at : (uint(w) * pc.ih + uint(h)) * pc.id + uint(d);
                        bool first = !found;
                        if (!found) {
                            best = index;
                            found = true;
                        }
                        if (v > acc || (FIRST_TAKEN && first)) {
                            acc = v;
                            best = index;
                        }
                    } else if (OP == 1) {
                        acc += v;
                    } else {
                        acc += P == 1 ? abs(v) : (P == 2 ? v * v : POOL_T(pow_nonnegative(float(abs(v)), float(P))));
                    }
                    ++count;
                }
            }
        }
    }
    if (OP == 1 && count > 0) {
        if (COUNT_PAD == 1) {
            count = padded_taps(d0, pc.kd, pc.dd, pc.id, pc.ped) * padded_taps(h0, pc.kh, pc.dh, pc.ih, pc.peh)
                  * padded_taps(w0, pc.kw, pc.dw, pc.iw, pc.pew);
        }
        acc /= POOL_T(count);
    } else if (OP == 2) {
        acc = P == 1 ? acc : (P == 2 ? sqrt(acc) : POOL_T(pow_nonnegative(float(acc), 1.0 / float(P))));
    }
    STORE_VAL(pc.y, i, acc);
    if (OP == 0 && pc.indices != 0) Int64Tensor(pc.indices).v[i] = int64_t(nc) * int64_t(isz) + int64_t(best);
}
