#version 450
// RandomUniform, RandomNormal and their Like forms (vkep/kernels/random.py) as ORT's CPU EP draws them: libstdc++'s
// std::default_random_engine (minstd_rand0: x' = 16807 x mod 2^31 - 1), one draw a uniform float ((x - 1) / 2^31,
// below 1), and std::normal_distribution's polar method over pairs of draws. The engine lives on in the node from
// run to run: how many draws it has made is kept in `state` (the kernel's own device memory), which a run reads and
// advances, so that a plan replays without the host.
//
// MODE 0, uniform: y[i] = u(draw p + i + 1) * (high - low) + low, an invocation an element (the engine's state
//   after p + i + 1 draws: seeded * 16807^(p + i + 1), the power by squaring); MODE 2 then advances state by n.
// MODE 1, normal, one workgroup in rounds of WG x CHUNK pairs, a lane CHUNK consecutive pairs: (x, y) = (2u - 1,
//   2v - 1), kept where 0 < r2 = x^2 + y^2 <= 1, each kept pair giving y m and x m (m = sqrt(-2 log r2 / r2)),
//   times scale plus mean; a prefix sum over the lanes' counts places them in order. A pair's second value left
//   over at the end of a run is dropped (the CPU EP makes the distribution per run); state advances past the pair
//   that gave the last value.
// MODE 3, Multinomial (FLOAT64 only), an invocation a row of x [rows, classes] (logits): the CPU EP's cdf in double,
//   exp(x - the largest finite x) summed over the finite ones (Eigen's exp in packets of two, C's for an odd last
//   class), then `samples` draws a row, each a double of two draws (generate_canonical<double, 53>) times the total,
//   placed by upper_bound; a row takes its draws after the rows before it. MODE 2 then advances state.
// MODE 4, Dropout in training mode (the (X, bool) variants: DTYPE_Y is the mask's), an invocation an element: ORT's
//   CPU EP seeds a new engine each run with the node's seed plus its runs before (RandomGenerator::NextSeed; state
//   counts the runs, MODE 2 then advances it by 1); element i is kept where u(draw i + 1) >= ratio: mask[i], and
//   y[i] = (kept ? 1 : 0) * x[i] / (1 - ratio) in float (NaN and -0 as that product gives them; float16 rounded once).
// FLOAT64: the log in double, rounded once (within an ulp of glibc's logf, which the CPU EP calls); else GLSL's. With
//   y64, MODE 0 and 1 draw doubles as the CPU EP's uniform_real_distribution<double> and normal_distribution<double>:
//   each value a generate_canonical<double, 53> of two draws (a normal pair four), b - a and the polar method in
//   double, the log glibc's (log_double); MODE 0 is given a = low and b = high then, MODE 2 advances 2 n.
// Every float operation is 'precise': the CPU EP's are rounded one at a time.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FLOAT64
#include "float64.glsl"
#endif

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
const uint WG = 64;
const uint CHUNK = 16;  // pairs a lane takes a round (random.ROUND_PAIRS = WG x CHUNK)
const uint MULTIPLIER = 16807u;
const uint64_t MODULUS = 2147483647ul;

layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Drawn { uint64_t v; };

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Longs { int64_t v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t y, state;  // state: the draws the engine has made (uint64)
    uint64_t mask;      // MODE 4: the mask (bool)
    uint64_t x, cdf;    // MODE 3: the logits and a double a logit of scratch; MODE 4: X
    uint seeded;        // the engine's state once seeded, 1 .. 2^31 - 2
    uint n;             // the values y takes (MODE 3: its rows)
    float a, b;         // MODE 0: low, high - low; 1: mean, scale
    uint classes, samples, y64;  // y64: y's elements are 64-bit (MODE 3 int64, else int32; MODE 0/1 double)
    uvec2 seed;         // MODE 4: the seed attribute as uint64, low word first (a: ratio, b: 1 - ratio)
    GROUP_BASE;
} pc;

uint mul_mod(uint x, uint y) {  // x y mod 2^31 - 1 (a Mersenne prime: fold the high bits onto the low)
    uint64_t p = uint64_t(x) * uint64_t(y);
    uint64_t r = (p & MODULUS) + (p >> 31);
    return uint(r >= MODULUS ? r - MODULUS : r);
}

uint power(uint base, uint e) {  // base^e mod 2^31 - 1 (31 steps: a loop of constant length)
    uint r = 1u;
    for (uint bit = 0u; bit < 31u; ++bit) {
        if ((e & (1u << bit)) != 0u) r = mul_mod(r, base);
        base = mul_mod(base, base);
    }
    return r;
}

uint after(uint64_t draws) {  // the engine's state after `draws` draws (16807^(2^31 - 2) = 1: Fermat)
    return mul_mod(pc.seeded, power(MULTIPLIER, uint(draws % (MODULUS - 1ul))));
}

precise float canonical(uint x) {  // generate_canonical<float, 24>: (x - 1) / 2^31, 1 made the float below it
    float u = float(x - 1u) * (1.0 / 2147483648.0);
    return u >= 1.0 ? uintBitsToFloat(0x3F7FFFFFu) : u;
}

precise float log_of(float v) {
#ifdef FLOAT64
    return float(log_double(double(v)));
#else
    return log(v);
#endif
}

#ifdef FLOAT64
// generate_canonical<double, 53> of two draws: (x1 - 1) + (x2 - 1) R over R^2 (R = 2^31 - 2; R^2 rounded to double)
precise double canonical_double(uint x1, uint x2) {
    const double r = 2147483646.0LF;
    double u = (double(x1 - 1u) + double(x2 - 1u) * r) / 4611686009837453316.0LF;
    return u >= 1.0LF ? packDouble2x32(uvec2(0xFFFFFFFFu, 0x3FEFFFFFu)) : u;
}

#endif

shared uint counts[WG];
shared uint final_pair;  // the run's pair (counted from its first) that gave the last value

// the pair the engine gives from state `at` (advanced past it): float's of two draws, or (FLOAT64 with y64) double's
// of four, each value a generate_canonical<double, 53> of two; (2u - 1, 2v - 1), the pair's r2 out
#ifdef FLOAT64
#define PAIR dvec2
#else
#define PAIR vec2
#endif
precise PAIR next_pair(inout uint at) {
    uint first = mul_mod(at, MULTIPLIER);
    at = mul_mod(first, MULTIPLIER);
#ifdef FLOAT64
    if (pc.y64 != 0u) {
        uint third = mul_mod(at, MULTIPLIER), fourth = mul_mod(third, MULTIPLIER);
        precise dvec2 p = dvec2(2.0LF * canonical_double(first, at) - 1.0LF,
                                2.0LF * canonical_double(third, fourth) - 1.0LF);
        at = fourth;
        return p;
    }
#endif
    precise vec2 p = vec2(2.0 * canonical(first) - 1.0, 2.0 * canonical(at) - 1.0);
    return PAIR(p);
}

// whether a pair is kept (0 < r2 <= 1), in its type
bool kept_pair(PAIR q) {
#ifdef FLOAT64
    if (pc.y64 != 0u) {
        precise double r2 = q.x * q.x + q.y * q.y;
        return !(r2 > 1.0LF || r2 == 0.0LF);
    }
#endif
    precise vec2 p = vec2(q);
    precise float r2 = p.x * p.x + p.y * p.y;
    return !(r2 > 1.0 || r2 == 0.0);
}

// the two values of a kept pair, at y[k] and y[k + 1] (the second where k + 1 < n): y m and x m (m = sqrt(-2 log r2
// / r2)) times scale plus mean, in float, or double with glibc's log (log_double)
void store_pair(PAIR q, uint k) {
#ifdef FLOAT64
    if (pc.y64 != 0u) {
        precise double r2 = q.x * q.x + q.y * q.y;
        precise double m = sqrt(-2.0LF * log_double(r2) / r2);
        precise dvec2 v = dvec2(q.y * m, q.x * m) * double(pc.b) + double(pc.a);
        Doubles(pc.y).v[k] = v.x;
        if (k + 1u < pc.n) Doubles(pc.y).v[k + 1u] = v.y;
        return;
    }
#endif
    precise vec2 p = vec2(q);
    precise float r2 = p.x * p.x + p.y * p.y;
    precise float m = sqrt(-2.0 * log_of(r2) / r2);
    precise vec2 v = vec2(p.y * m, p.x * m) * pc.b + pc.a;
    STORE(Tensor(pc.y), k, v.x);
    if (k + 1u < pc.n) STORE(Tensor(pc.y), k + 1u, v.y);
}

void normal() {
    uint lane = gl_LocalInvocationID.x, needed = (pc.n + 1u) / 2u;  // pairs kept
    uint64_t drawn = Drawn(pc.state).v, per_pair = pc.y64 != 0u ? 4ul : 2ul;  // (draws a pair)
    uint jump = power(MULTIPLIER, uint(per_pair) * WG * CHUNK);  // a round's draws
    uint x = after(drawn + per_pair * lane * CHUNK), kept = 0u;
    for (uint round = 0u; kept < needed; ++round) {
        PAIR pairs[CHUNK];
        uint mask = 0u, count = 0u, at = x;
        for (uint c = 0u; c < CHUNK; ++c) {
            pairs[c] = next_pair(at);
            if (kept_pair(pairs[c])) {
                mask |= 1u << c;
                count++;
            }
        }
        x = mul_mod(x, jump);
        // the lanes' counts summed up to each (Hillis-Steele: log2 WG steps)
        counts[lane] = count;
        barrier();
        for (uint offset = 1u; offset < WG; offset <<= 1u) {
            uint add = lane >= offset ? counts[lane - offset] : 0u;
            barrier();
            counts[lane] += add;
            barrier();
        }
        uint before = kept + counts[lane] - count, total = counts[WG - 1u];
        for (uint c = 0u; c < CHUNK; ++c) {
            if ((mask & (1u << c)) == 0u) continue;
            if (before < needed) {
                store_pair(pairs[c], 2u * before);
                if (before == needed - 1u) final_pair = round * WG * CHUNK + lane * CHUNK + c;
            }
            before++;
        }
        kept += total;
        barrier();  // (counts is rewritten next round; final_pair is written)
    }
    if (lane == 0u) Drawn(pc.state).v = drawn + per_pair * (uint64_t(final_pair) + 1ul);
}

#ifdef FLOAT64
void multinomial(uint row) {
    uint base = row * pc.classes;
    float largest = uintBitsToFloat(0xFF7FFFFFu);  // (the lowest float)
    for (uint j = 0u; j < pc.classes; ++j) {
        float v = Floats(pc.x).v[base + j];
        if (!isnan(v) && !isinf(v) && largest < v) largest = v;
    }
    precise double total = 0.0LF;
    for (uint j = 0u; j < pc.classes; ++j) {
        float v = Floats(pc.x).v[base + j];
        double d = double(v) - double(largest);
        // (Eigen evaluates the exps in packets of two from the row's start; an odd last one alone, through C's exp)
        double e = (pc.classes % 2u == 1u && j == pc.classes - 1u) ? exp_double(d) : eigen_exp(d);
        if (!isnan(v) && !isinf(v)) total += e;
        Doubles(pc.cdf).v[base + j] = total;
    }
    uint x = after(Drawn(pc.state).v + 2ul * uint64_t(row) * uint64_t(pc.samples));
    for (uint s = 0u; s < pc.samples; ++s) {
        uint x1 = mul_mod(x, MULTIPLIER);
        x = mul_mod(x1, MULTIPLIER);
        precise double wanted = canonical_double(x1, x) * total;
        uint lo = 0u, hi = pc.classes;  // upper_bound: the first class whose cdf exceeds it
        while (lo < hi) {
            uint mid = (lo + hi) / 2u;
            if (Doubles(pc.cdf).v[base + mid] > wanted) hi = mid;
            else lo = mid + 1u;
        }
        uint at = row * pc.samples + s;
        if (pc.y64 != 0u) Longs(pc.y).v[at] = int64_t(lo);
        else Ints(pc.y).v[at] = int(lo);
    }
}
#endif

#if DTYPE_Y == 4
void dropout(uint i) {
    uint64_t seeded = (pack64(pc.seed) + Drawn(pc.state).v) % MODULUS;  // (uint64 as the engine's seed: wraps past 2^64)
    uint x0 = seeded == 0ul ? 1u : uint(seeded);
    precise float u = canonical(mul_mod(x0, power(MULTIPLIER, uint((uint64_t(i) + 1ul) % (MODULUS - 1ul)))));
    bool kept = u >= pc.a;
    float x = LOAD(Tensor(pc.x), i);
    // a dropped element is 0 * x: NaN for NaN and infinities, else a zero of x's sign; written out as bits, as Mesa
    // 26's compiler folds (kept ? 1 : 0) * x into kept ? x : 0 ('precise' or not)
    uint bits = floatBitsToUint(x);
    float dropped = (bits & 0x7F800000u) == 0x7F800000u ? uintBitsToFloat(0x7FC00000u)
                                                         : uintBitsToFloat(bits & 0x80000000u);
    precise float v = kept ? x / pc.b : dropped / pc.b;
    STORE(Tensor(pc.y), i, v);
    TensorY(pc.mask).v[i] = uint8_t(kept ? 1u : 0u);
}
#endif

void main() {
#if DTYPE_Y == 4
    if (MODE == 4u) {
        uint i = FLAT_ID(WG);
        if (i < pc.n) dropout(i);
        return;
    }
#endif
    if (MODE == 1u) {
        normal();
        return;
    }
#ifdef FLOAT64
    if (MODE == 3u) {
        uint row = FLAT_ID(WG);
        if (row < pc.n) multinomial(row);
        return;
    }
#endif
    uint i = FLAT_ID(WG);
    if (MODE == 2u) {  // (after MODE 0's or 3's dispatch has read state)
        if (i == 0u) Drawn(pc.state).v += uint64_t(pc.n);
        return;
    }
    if (i >= pc.n) return;
#ifdef FLOAT64
    if (pc.y64 != 0u) {  // (uniform_real_distribution<double>: two draws a value, b - a in double)
        uint first = after(Drawn(pc.state).v + 2ul * uint64_t(i) + 1ul);
        precise double d = canonical_double(first, mul_mod(first, MULTIPLIER)) * (double(pc.b) - double(pc.a))
                         + double(pc.a);
        Doubles(pc.y).v[i] = d;
        return;
    }
#endif
    precise float u = canonical(after(Drawn(pc.state).v + uint64_t(i) + 1ul));
    STORE(Tensor(pc.y), i, u * pc.b + pc.a);
}
