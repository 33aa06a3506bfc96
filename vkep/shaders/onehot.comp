#version 450
// OneHot: y[outer, d, inner] = values[1] where indices[outer, inner] (truncated to an integer, depth added
// where negative) is d, else values[0]. Indices of any DTYPE, values and y of DTYPE_Y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#if IS_FLOAT
#define COMP_T_OF_K(v) int64_t(v)
#else
#define COMP_T_OF_K(v) COMP_T(v)
#endif

layout(push_constant, scalar) uniform Push {
    uint64_t indices, values, y;
    uint n, depth, inner;  // n: y's elements; inner: the elements of the dims after the one-hot axis
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    uint inner = i % pc.inner, d = (i / pc.inner) % pc.depth, outer = i / (pc.inner * pc.depth);
#if IS_FLOAT
    int64_t k = int64_t(LOAD(Tensor(pc.indices), outer * pc.inner + inner));  // (truncated, as ORT's cast)
#else
    // (int32 stays 32-bit: widened to int64 here, Mesa 22.3's lavapipe lost the sign; Mesa 25's did not)
    COMP_T k = LOAD(Tensor(pc.indices), outer * pc.inner + inner);
#endif
    if (k < 0) k += COMP_T_OF_K(pc.depth);
    STORE_Y(TensorY(pc.y), i, TensorY(pc.values).v[k == COMP_T_OF_K(d) ? 1 : 0]);
}
