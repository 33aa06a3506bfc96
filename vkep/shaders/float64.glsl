// Double math of the FLOAT64 variants (unary.comp, unary_mlas.comp, binary.comp, reduce.comp), as ORT's CPU EP computes
// it on x86-64 where the answer depends on rounding:
// - exp_double: fdlibm's exp (Exp, ReduceLogSumExp; also the last step of pow_double, with a tail)
// - eigen_exp, eigen_log, eigen_tanh: Eigen's pexp_double, plog_double and ptanh_double as ORT's Sigmoid, Log and Tanh
//   of doubles run them (SSE2, no FMA: every multiply-add rounded twice, hence 'precise'), bit for bit on Mesa 22.3
// - log_dd, pow_double: C's pow (glibc's, which ORT's Pow calls) within an ulp, the log carried in two doubles
// - fmod_double, mod_floor_double: Mod, exact
// - eigen_sin_cos: Eigen's psincos_double as the CPU EP's Sin and Cos; sin_cos_accurate_double: C's sin and cos (glibc's)
// Needs common.glsl with FLOAT64 defined.
#ifndef VKEP_FLOAT64_GLSL
#define VKEP_FLOAT64_GLSL

#define D_INF double(uintBitsToFloat(0x7f800000u))
#define D_NAN double(uintBitsToFloat(0x7fc00000u))

// 2^k for k in [-1022, 1023], from its bits
double two_to(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }

bool sign_bit(double v) { return (unpackDouble2x32(v).y >> 31) != 0u; }

// e^(x + tail) within an ulp, tail far below x's ulp (pow_double's; Exp passes 0, and the CPU EP's Eigen exp is within
// two): x = k ln2 + r with ln2 in two parts, e^r from fdlibm's rational form (Remez coefficients of the classic
// __ieee754_exp), times 2^k in two exact steps so that a subnormal result rounds once
double exp_dd(double x, double tail) {
    if (isnan(x)) return x;
    if (x > 709.782712893383973096LF) return D_INF;
    if (x < -745.13321910194110842LF) return 0.0LF;
    const double ln2_hi = 6.93147180369123816490e-01LF, ln2_lo = 1.90821492927058770002e-10LF;
    int k = int(roundEven(x * 1.44269504088896338700LF));
    double hi = x - double(k) * ln2_hi, lo = double(k) * ln2_lo - tail, r = hi - lo, rr = r * r;
    double c = r - rr * (1.66666666666666019037e-01LF + rr * (-2.77777777770155933842e-03LF
        + rr * (6.61375632143793436117e-05LF + rr * (-1.65339022054652515390e-06LF + rr * 4.13813679705723846039e-08LF))));
    double y = 1.0LF - ((lo - (r * c) / (2.0LF - c)) - hi);
    int k1 = k / 2;
    return y * two_to(k1) * two_to(k - k1);
}

double exp_double(double x) { return exp_dd(x, 0.0LF); }

// Eigen's pexp_double (Cephes' rational form), the exp of ORT's double Sigmoid: 0 below -709.784, NaN kept
precise double eigen_exp(double v) {
    if (isnan(v)) return v;
    if (v < -709.784LF) return 0.0LF;
    double x = min(v, 709.784LF);
    double fx = floor(1.4426950408889634073599LF * x + 0.5LF);
    x = x - fx * 0.693145751953125LF;
    x = x - fx * 1.42860682030941723212e-6LF;
    double x2 = x * x;
    double px = ((1.26177193074810590878e-4LF * x2 + 3.02994407707441961300e-2LF) * x2 + 9.99999999999999999910e-1LF) * x;
    double qx = ((3.00198505138664455042e-6LF * x2 + 2.52448340349684104192e-3LF) * x2 + 2.27265548208155028766e-1LF) * x2
        + 2.00000000000000000009e0LF;
    x = 2.0LF * (px / (qx - px)) + 1.0LF;
    int k = int(fx), k1 = k / 2;  // (k in [-1023, 1024]: 2^k in two exact steps, a subnormal rounded once)
    return max(x * two_to(k1) * two_to(k - k1), v);
}

// Eigen's plog_double (Cephes: x = 2^e m, m in [sqrt(1/2), sqrt(2)), log(1 + f) = f - f^2/2 + f^3 P(f)/Q(f)), the CPU
// EP's double Log: 0 gives -inf, below 0 and NaN give NaN. Subnormals are scaled into the normal range first (Eigen's
// frexp is exact for them)
precise double eigen_log(double v) {
    if (v == 0.0LF) return -D_INF;
    if (!(v >= 0.0LF)) return D_NAN;
    if (isinf(v)) return v;
    double e = 0.0LF, a = v;
    if (a < 2.2250738585072014e-308LF) { a *= 18014398509481984.0LF; e = -54.0LF; }  // 2^54
    uvec2 b = unpackDouble2x32(a);
    e += double(int(b.y >> 20) - 1022);
    double m = packDouble2x32(uvec2(b.x, (b.y & 0x000fffffu) | 0x3fe00000u));  // frexp's [0.5, 1)
    bool low = m < 0.70710678118654752440LF;
    double x = (m - 1.0LF) + (low ? m : 0.0LF);
    e -= low ? 1.0LF : 0.0LF;
    double x2 = x * x, x3 = x2 * x;
    double y = 1.01875663804580931796e-4LF * x + 4.97494994976747001425e-1LF;
    double y1 = 1.44989225341610930846e1LF * x + 1.79368678507819816313e1LF;
    y = y * x + 4.70579119878881725854e0LF;
    y1 = y1 * x + 7.70838733755885391666e0LF;
    double num = y * x3 + y1;
    y = 1.0LF * x + 1.12873587189167450590e1LF;
    y1 = 8.29875266912776603211e1LF * x + 7.11544750618563894466e1LF;
    y = y * x + 4.52279145837532221105e1LF;
    y1 = y1 * x + 2.31251620126765340583e1LF;
    double den = y * x3 + y1;
    y = (num * x3) / den;
    y = -0.5LF * x2 + y;
    x = x + y;
    return e * 0.69314718055994530942LF + x;
}

// Eigen's ptanh_double (a [19/18] rational form on [-c, c], 1 beyond: c is where it evaluates to 1 without FMA), the CPU
// EP's double Tanh; NaN and -0 kept
precise double eigen_tanh(double v) {
    if (isnan(v)) return v;
    const double c = 17.714196154005176LF;
    double x = max(min(v, c), -c), x2 = x * x, x3 = x2 * x;
    double p = 2.6158007860482230e-23LF;
    p = p * x2 + 7.6534862268749319e-19LF;
    p = p * x2 + 3.1309488231386680e-15LF;
    p = p * x2 + 4.2303918148209176e-12LF;
    p = p * x2 + 2.4618379131293676e-09LF;
    p = p * x2 + 6.8644367682497074e-07LF;
    p = p * x2 + 9.3839087674268880e-05LF;
    p = p * x2 + 5.9809711724441161e-03LF;
    p = p * x2 + 1.5184719640284322e-01LF;
    double q = 6.463747022670968018e-21LF;
    q = q * x2 + 5.782506856739003571e-17LF;
    q = q * x2 + 1.293019623712687916e-13LF;
    q = q * x2 + 1.123643448069621992e-10LF;
    q = q * x2 + 4.492975677839633985e-08LF;
    q = q * x2 + 8.785185266237658698e-06LF;
    q = q * x2 + 8.295161192716231542e-04LF;
    q = q * x2 + 3.437448108450402717e-02LF;
    q = q * x2 + 4.851805297361760360e-01LF;
    q = q * x2 + 1.0LF;
    return (x3 * p + x) / q;
}

// ORT's double Sigmoid (activations.h, Eigen): 1 / (1 + e^-|x|) for x >= 0, else 1 - 1 / (1 + e^-|x|)
precise double eigen_sigmoid(double v) {
    double s = 1.0LF / (1.0LF + eigen_exp(-abs(v)));
    return v >= 0.0LF ? s : 1.0LF - s;
}

// ---- two-double arithmetic (hi, lo), every operation 'precise' -------------------------------------------------------
precise dvec2 two_sum_d(double a, double b) {  // a + b = s + e exactly
    double s = a + b, bb = s - a;
    return dvec2(s, (a - (s - bb)) + (b - bb));
}

precise dvec2 fast_two_sum_d(double a, double b) {  // |a| >= |b|
    double s = a + b;
    return dvec2(s, b - (s - a));
}

// a b = p + e, e within 2^-105 of p: the operands split into 26 and 27 bits by masking (no overflow, as Veltkamp's
// 2^27 + 1 scaling would past 2^996); an infinite product has no error term
precise dvec2 two_prod_d(double a, double b) {
    double p = a * b;
    if (isinf(p) || p == 0.0LF) return dvec2(p, 0.0LF);
    uvec2 ba = unpackDouble2x32(a), bb = unpackDouble2x32(b);
    double ah = packDouble2x32(uvec2(ba.x & 0xf8000000u, ba.y)), bh = packDouble2x32(uvec2(bb.x & 0xf8000000u, bb.y));
    double al = a - ah, bl = b - bh;
    return dvec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}

precise dvec2 dd_mul(dvec2 a, dvec2 b) {
    dvec2 p = two_prod_d(a.x, b.x);
    return fast_two_sum_d(p.x, p.y + (a.x * b.y + a.y * b.x));
}

precise dvec2 dd_add(dvec2 a, dvec2 b) {
    dvec2 s = two_sum_d(a.x, b.x);
    return fast_two_sum_d(s.x, s.y + (a.y + b.y));
}

// log(v) as hi + lo within ~2^-63 relative, v > 0 finite: v = 2^k m, m in [sqrt(1/2), sqrt(2)], s = (m - 1) / (m + 1)
// in two doubles, log m = 2 atanh(s) = 2s + 2s^3/3 (in two doubles) + s^5 (2/5 + 2/7 s^2 + ...) (|s| < 0.172: 11 terms
// of the series leave 2^-64)
precise dvec2 log_dd(double v) {
    int k = 0;
    if (v < 2.2250738585072014e-308LF) { v *= 18014398509481984.0LF; k = -54; }  // subnormal: times 2^54
    uvec2 b = unpackDouble2x32(v);
    k += int(b.y >> 20) - 1023;
    double m = packDouble2x32(uvec2(b.x, (b.y & 0x000fffffu) | 0x3ff00000u));  // [1, 2)
    if (m > 1.4142135623730951LF) { m *= 0.5LF; k += 1; }
    double f = m - 1.0LF;  // (exact)
    dvec2 den = two_sum_d(2.0LF, f);
    double s = f / den.x;
    dvec2 sp = two_prod_d(s, den.x);
    dvec2 sd = fast_two_sum_d(s, (((f - sp.x) - sp.y) - s * den.y) / den.x);
    dvec2 s2 = dd_mul(sd, sd), s3 = dd_mul(s2, sd);
    dvec2 t3 = dd_mul(s3, dvec2(0.6666666666666666LF, 3.700743415417188e-17LF));  // 2/3 in two doubles
    // (the series' 2 / (2j + 1), j = 11 .. 2, by hand: a loop here counts against lavapipe's loop budget wherever the
    // compiler leaves it rolled, as in random.comp's rounds of normal pairs)
    double z = s2.x, r = 2.0LF / 25.0LF;
    r = r * z + 2.0LF / 23.0LF;
    r = r * z + 2.0LF / 21.0LF;
    r = r * z + 2.0LF / 19.0LF;
    r = r * z + 2.0LF / 17.0LF;
    r = r * z + 2.0LF / 15.0LF;
    r = r * z + 2.0LF / 13.0LF;
    r = r * z + 2.0LF / 11.0LF;
    r = r * z + 2.0LF / 9.0LF;
    r = r * z + 2.0LF / 7.0LF;
    r = r * z + 2.0LF / 5.0LF;
    dvec2 lm = dd_add(dvec2(2.0LF * sd.x, 2.0LF * sd.y), t3);
    lm = fast_two_sum_d(lm.x, lm.y + s3.x * s2.x * r);
    const double ln2_hi = 6.93147180369123816490e-01LF, ln2_lo = 1.90821492927058770002e-10LF;  // (hi: 32 zero bits)
    return dd_add(dvec2(double(k) * ln2_hi, double(k) * ln2_lo), lm);
}

// log within ~half an ulp (log_dd rounded: glibc's log, which ORT's reduce_log calls, is correctly rounded nearly always);
// 0 gives -inf, below 0 and NaN give NaN
double log_double(double v) {
    if (v == 0.0LF) return -D_INF;
    if (!(v >= 0.0LF)) return D_NAN;
    return isinf(v) ? v : log_dd(v).x;
}

// x^n for an integer 1 < |n| <= 64 in two doubles (squarings), rounded once: the correctly rounded power but within
// 2^-100 of a tie. Out of [2^-968, 1e306] (where the tails would be subnormal, or the power or 1 / power overflow) it
// gives 0, and pow_double takes exp and log instead
precise double int_pow(double ax, int n) {
    dvec2 r = dvec2(1.0LF, 0.0LF), p = dvec2(ax, 0.0LF);
    for (int k = abs(n); k != 0; k >>= 1) {
        if ((k & 1) != 0) r = dd_mul(r, p);
        if (k > 1) p = dd_mul(p, p);
    }
    if (!(r.x >= 4.0e-292LF && r.x <= 1.0e306LF)) return 0.0LF;
    if (n > 0) return r.x + r.y;
    double q = 1.0LF / r.x;
    dvec2 e = two_prod_d(q, r.x);
    return q + (((1.0LF - e.x) - e.y) - q * r.y) / r.x;
}

// C's pow (C99 Annex F) as ORT's double Pow calls it: pow(x, 0) = 1 and pow(1, y) = 1 even for NaN, a negative finite
// x and a fractional y give NaN, a negative x (-0 and -inf too) keeps its sign for an odd y, zeros and infinities as
// the standard lists. Integer exponents up to 64 correctly rounded (int_pow), others as e^(y log x) with the log and
// the product in two doubles: within an ulp (glibc's pow, within 0.52). `scalar`: ORT's loop for an exponent that is
// one value per row of the base, which gives x * x for 2 and x * x * x for 3
precise double pow_double(double x, double y, bool scalar) {
    if (y == 0.0LF || x == 1.0LF) return 1.0LF;
    if (isnan(x) || isnan(y)) return x + y;
    if (scalar && y == 2.0LF) return x * x;
    if (scalar && y == 3.0LF) return x * x * x;
    bool integral = floor(y) == y;  // (infinities count, and are even)
    double ax = abs(x);
    if (isinf(y)) return ax == 1.0LF ? 1.0LF : ((ax > 1.0LF) == (y > 0.0LF) ? D_INF : 0.0LF);
    if (x < 0.0LF && !isinf(x) && !integral) return D_NAN;
    bool odd = integral && abs(y) < 9007199254740992.0LF && floor(y * 0.5LF) != y * 0.5LF;
    double r;
    if (ax == 0.0LF || isinf(ax)) {
        r = (ax == 0.0LF) == (y < 0.0LF) ? D_INF : 0.0LF;
    } else {
        r = integral && abs(y) <= 64.0LF ? int_pow(ax, int(y)) : 0.0LF;
        if (r == 0.0LF) {
            dvec2 l = log_dd(ax), p = two_prod_d(y, l.x);
            p = fast_two_sum_d(p.x, p.y + y * l.y);
            r = isinf(p.x) ? (p.x > 0.0LF ? D_INF : 0.0LF) : exp_dd(p.x, p.y);
        }
    }
    return odd && sign_bit(x) ? -r : r;
}

// C's fmod (the CPU EP's double Mod, fmod=1), exact: long division on the integer significands (subnormals included,
// which Mesa 26 would flush in arithmetic), 11 bits a step (r < 2^53). The sign of the dividend, also for a zero result;
// x mod ±inf = x, NaN for x infinite or z zero (fmod_c of binary_ops.glsl in double)
double fmod_double(double x, double z) {
    if (isnan(x) || isnan(z) || isinf(x) || z == 0.0LF) return D_NAN;
    if (isinf(z)) return x;
    const uint64_t hidden = 0x10000000000000UL, fraction = hidden - 1UL;
    uint64_t bx = packUint2x32(unpackDouble2x32(x)), bz = packUint2x32(unpackDouble2x32(z));
    uint64_t sign = bx & 0x8000000000000000UL, mx = bx & fraction, mz = bz & fraction;
    int ex = int((bx >> 52) & 0x7ffUL), ez = int((bz >> 52) & 0x7ffUL);
    if (ex != 0) mx |= hidden; else ex = 1;  // (a subnormal's exponent is 1)
    if (ez != 0) mz |= hidden; else ez = 1;
    if (ex < ez || (ex == ez && mx < mz)) return x;  // |x| < |z|
    uint64_t r = mx % mz;
    for (int k = ex - ez; k > 0; k -= 11) r = (r << min(k, 11)) % mz;
    int e = ez;
    while (r != 0UL && r < hidden && e > 1) { r <<= 1; --e; }  // normalise down to exponent 1 (a subnormal stays so)
    uint64_t bits = r < hidden ? r : ((uint64_t(e) << 52) | (r & fraction));
    return packDouble2x32(unpackUint2x32(bits | sign));  // (r 0: a zero of x's sign)
}

// numpy's mod (ONNX Mod fmod=0, which the CPU EP runs for doubles from opset 28): the sign of the divisor
double mod_floor_double(double x, double z) {
    double r = fmod_double(x, z);
    if (r == 0.0LF) return packDouble2x32(uvec2(0u, z < 0.0LF ? 0x80000000u : 0u));  // (from bits: unary.comp's Sign)
    return (r < 0.0LF) != (z < 0.0LF) ? r + z : r;
}

// ---- sin and cos ----------------------------------------------------------------------------------------------------
// 2/pi's first 1216 bits after the point (TWO_OVER_PI of unary_ops.glsl, longer), behind two zero words: the window of
// |x| >= pi/4 starts at table bit 9, that of the largest double at 1033
const uint TWO_OVER_PI_D[40] = uint[40](
    0u, 0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u,
    0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u,
    0xe99c7026u, 0xb45f7e41u, 0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, 0x1ff897ffu, 0xde05980fu,
    0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du, 0x7527bac7u, 0xebe5f17bu,
    0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u, 0x56033046u, 0xfc7b6babu);

// x = q pi/2 + r for finite |x| >= pi/4: q modulo 4, and r (|r| <= pi/4) in two doubles within ~2^-105 relative. Payne
// and Hanek's reduction as unary_ops.glsl's reduce_half_pi, in 32-bit limbs: |x| = m 2^k, and 2/pi's bits b_i (worth
// 2^-i) before b_(k-1) give multiples of 4, so m times the 192 bits from b_(k-1) on (table bit k + 62), modulo 2^192, is
// x 2/pi modulo 4 with 190 bits of fraction (the bits left off add below 2^-137)
precise dvec2 reduce_half_pi_dd(double x, out uint q) {
    uvec2 b = unpackDouble2x32(abs(x));
    int k = int(b.y >> 20) - 1075;
    uint m_lo = b.x, m_hi = (b.y & 0xfffffu) | 0x100000u, o = uint(k + 62), w = o >> 5, s = o & 31u;
    uint p[6], hi[6];  // m_lo W and m_hi W, least significant limb first (modulo 2^192)
    uint64_t c_lo = 0UL, c_hi = 0UL;
    for (int t = 0; t < 6; ++t) {
        uint a = TWO_OVER_PI_D[w + 5u - uint(t)], next = TWO_OVER_PI_D[w + 6u - uint(t)];
        uint g = s == 0u ? a : (a << s) | (next >> (32u - s));
        uint64_t pl = uint64_t(g) * m_lo + c_lo, ph = uint64_t(g) * m_hi + c_hi;
        p[t] = uint(pl);
        hi[t] = uint(ph);
        c_lo = pl >> 32;
        c_hi = ph >> 32;
    }
    uint64_t c = 0UL;  // p += hi 2^32
    for (int t = 1; t < 6; ++t) {
        uint64_t sum = uint64_t(p[t]) + hi[t - 1] + c;
        p[t] = uint(sum);
        c = sum >> 32;
    }
    q = p[5] >> 30;  // (bits 190 and 191; the fraction's first 128 bits below them)
    uint64_t f0 = (packUint2x32(uvec2(p[4], p[5])) << 2) | (p[3] >> 30);
    uint64_t f1 = (packUint2x32(uvec2(p[2], p[3])) << 2) | (p[1] >> 30);
    bool negative = (f0 >> 63) != 0UL;  // a fraction of 1/2 or more: q rounds up, r is 1 - it below 0
    if (negative) {
        q += 1u;
        f1 = ~f1 + 1UL;
        f0 = ~f0 + (f1 == 0UL ? 1UL : 0UL);
    }
    int shift = 0;  // normalise the 128 bits (x 2/pi is never within 2^-64 of an integer) to two 53-bit doubles
    if (f0 == 0UL) { f0 = f1; f1 = 0UL; shift = 64; }
    uint top = uint(f0 >> 32);
    int lz = top != 0u ? 31 - findMSB(top) : 63 - findMSB(uint(f0));
    if (lz > 0) { f0 = (f0 << lz) | (f1 >> (64 - lz)); f1 <<= lz; }
    shift += lz;
    double d0 = double(f0 >> 11) * two_to(-53 - shift);
    double d1 = double(((f0 & 0x7ffUL) << 42) | (f1 >> 22)) * two_to(-106 - shift);
    dvec2 r = dd_mul(fast_two_sum_d(d0, d1), dvec2(1.5707963267948966LF, 6.123233995736766e-17LF));  // pi/2
    r = negative ? -r : r;
    if (x < 0.0LF) {
        q = 0u - q;
        r = -r;
    }
    return r;
}

precise dvec2 dd_div_d(dvec2 a, double d) {
    double q1 = a.x / d;
    dvec2 p = two_prod_d(q1, d);
    return fast_two_sum_d(q1, (((a.x - p.x) - p.y) + a.y) / d);
}

// sin or cos of x (finite) within ~2^-100 relative before the last rounding: C's sin and cos (glibc's, which the CPU EP's
// Eigen calls past 1e14 and for a packet's odd element), equal to them but where the value is that close to a tie. The
// reduction above, then Taylor's series of r in two doubles, nested (14 terms: 2^-112 at pi/4)
precise double sin_cos_accurate_double(double x, bool cosine) {
    if (x == 0.0LF) return cosine ? 1.0LF : x;  // (keeps -0)
    uint q = 0u;
    dvec2 r = abs(x) < 0.78539816339744830962LF ? dvec2(x, 0.0LF) : reduce_half_pi_dd(x, q);
    q += cosine ? 1u : 0u;
    bool odd = (q & 1u) != 0u;  // cos of r, else sin
    dvec2 r2 = dd_mul(r, r), t = dvec2(1.0LF, 0.0LF);
    for (int j = 14; j >= 1; --j) {
        t = dd_add(dvec2(1.0LF, 0.0LF), -dd_div_d(dd_mul(r2, t), double(odd ? (2 * j - 1) * 2 * j : 2 * j * (2 * j + 1))));
    }
    double v = odd ? t.x : dd_mul(r, t).x;
    return (q & 2u) != 0u ? -v : v;
}

// c4 z^4 + ... + c0 by Horner's rule as Eigen's pmadd chains take it (each product rounded, then the sum)
precise double eigen_poly4(double z, double c4, double c3, double c2, double c1, double c0) {
    return (((c4 * z + c3) * z + c2) * z + c1) * z + c0;
}

// Eigen's psincos_double, the CPU EP's double Sin and Cos (SSE2 packets of two, no FMA: 'precise'): |x| = q pi/2 + s with
// pi/2 in 2 parts while both lanes of the packet are below 15, else in 4 with q split at 2^24 (`medium`: the packet's
// lanes decide together); Pade forms of sin and cos by q's parity, the sign from q's second bit (and x's for sin). Finite
// |x| <= 1e14 (beyond, Eigen calls C's)
precise double eigen_sin_cos(double x, bool medium, bool cosine) {
    const double two_over_pi = 0.63661977236758134307553505349006LF;
    const double a = -1.570796325802803LF, b = -9.920935184482005e-10LF;
    double xa = abs(x), s;
    int64_t q;
    if (medium) {
        double q_high = floor(xa * (two_over_pi / 16777216.0LF)) * 16777216.0LF;
        double q_low_noround = xa * two_over_pi - q_high;
        q = int64_t(q_low_noround + 0.5LF);
        double q_low = double(q);
        const double c = -6.123234014771656e-17LF, d = 1.903488962019325e-25LF;
        s = a * q_high + xa;
        s = a * q_low + s;
        s = b * q_high + s;
        s = b * q_low + s;
        s = c * q_high + s;
        s = c * q_low + s;
        s = d * (q_low + q_high) + s;
    } else {
        q = int64_t(xa * two_over_pi + 0.5LF);
        double qd = double(q);
        s = a * qd + xa;
        s = b * qd + s;
    }
    double ss = s * s;
    double cn = eigen_poly4(ss, 80737373.0LF, -13853547000.0LF, 727718024880.0LF, -11275015752000.0LF, 23594700729600.0LF);
    double cd = eigen_poly4(ss, 147173.0LF, 39328920.0LF, 5772800880.0LF, 522334612800.0LF, 23594700729600.0LF);
    double sn = eigen_poly4(ss, 4585922449.0LF, -1066023933480.0LF, 83284044283440.0LF, -2303682236856000.0LF,
                            15605159573203200.0LF);
    double sd = eigen_poly4(ss, 1029037.0LF, 345207016.0LF, 61570292784.0LF, 6603948711360.0LF, 346781323848960.0LF);
    bool even = (q & 1L) == 0L;
    double v = cosine == even ? cn / cd : (s * sn) / (45.0LF * sd);
    uint sign = cosine ? uint(q + 1L) << 30 : unpackDouble2x32(x).y ^ (uint(q) << 30);
    uvec2 bits = unpackDouble2x32(v);
    return packDouble2x32(uvec2(bits.x, bits.y ^ (sign & 0x80000000u)));
}

#endif
