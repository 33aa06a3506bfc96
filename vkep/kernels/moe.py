"""com.microsoft MoE (float experts) and QMoE (experts quantized to 4 or 8 bits), as ORT's CPU EP (1.32) runs them
(moe.comp): routing, then FC1 with its activation for each token's k experts, then FC2 and the weighted sum.

What the CPU EP takes, found by running it: top-k of the router's softmax, an equal probability going to the higher
expert index; MoE divides the k weights by their sum only with normalize_routing_weights=1, QMoE always (its
attribute changes nothing); SwiGLU only fused and interleaved (swiglu_fusion=1; gate then linear), with
activation_alpha 1.0, activation_beta 0.0 and no limit by default; no FC3; k at most the number of experts (a run
error). QMoE: quant_type 'int', 4 or 8 bits, a scale per row or per block, uint8 zero points or none (8, 128)."""

from __future__ import annotations

import math

from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    UnsupportedError,
    device_supports,
    grid_1d,
    padded,
    shader_dtype,
)

WG = 64  # (moe.comp WG)
ACTIVATIONS = {"relu": 0, "gelu": 1, "silu": 2, "identity": 3, "swiglu": 4}
ROUTE, FC1, FC2 = 0, 1, 2  # moe.comp's MODE


class MoE(Kernel):
    """com.microsoft MoE (input, router_probs, fc1_experts_weights, fc1_experts_bias, fc2_experts_weights,
    fc2_experts_bias) and QMoE (input, router_probs, fc1 weights, fc1_scales, fc1 bias, fc2 weights, fc2_scales, fc2
    bias, [fc3: absent], fc1_zero_points, fc2_zero_points)."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        quantized = spec.op == "QMoE"
        ranks, types = padded(input_ranks, 14), padded(input_types, 14)
        act = attrs.get("activation_type", "relu")
        if act not in ACTIVATIONS:
            return f"activation_type={act!r} (the CPU EP refuses it)"
        if act == "swiglu" and attrs.get("swiglu_fusion", 0) != 1:
            return f"swiglu_fusion={attrs.get('swiglu_fusion', 0)}: the CPU EP takes only the interleaved layout (1)"
        if attrs.get("k", 1) < 1:
            return f"k={attrs.get('k')}"
        if attrs.get("use_sparse_mixer", 0):
            return "use_sparse_mixer=1 is not built"
        if attrs.get("swiglu_limit_after_activation", 0):
            return "swiglu_limit_after_activation=1 (CUDA only)"
        fc3 = (6, 7) if not quantized else (8, 9, 10, 13)
        if any(ranks[i] is not None for i in fc3):
            return "FC3 experts (the CPU EP does not implement them)"
        if len(input_ranks) > 14 and any(r is not None for r in input_ranks[14:]):
            return "router_weights, global or activation scales are not built"
        if not quantized:
            return None
        bits = attrs.get("expert_weight_bits", 4)
        if attrs.get("quant_type", "int") != "int":
            return f"quant_type={attrs.get('quant_type')!r} is not built"
        if bits not in (4, 8):
            return f"expert_weight_bits={bits} is not built (4 and 8 are)"
        for name in ("fc1_expert_weight_bits", "fc2_expert_weight_bits"):
            if attrs.get(name) is not None and attrs[name] != bits:
                return f"{name}={attrs[name]} differing from expert_weight_bits={bits}"
        if attrs.get("weights_prepacked", -1) not in (-1, 0):  # (-1, the default: raw on the CPU EP)
            return f"weights_prepacked={attrs['weights_prepacked']}: an EP's own layout"
        block = attrs.get("block_size", 0)
        if block and (block < 16 or block & (block - 1)):
            return f"block_size={block}: not a power of two from 16"
        # block-wise experts through MLAS's QNBit GEMM with int8 activations (8 bits at every accuracy level, 4 bits
        # at accuracy_level 4): the CPU EP quantizes each block of the activations, which this shader does not
        if block and (bits == 8 or attrs.get("accuracy_level", 0) == 4):
            return f"block-wise {bits}-bit experts at accuracy_level {attrs.get('accuracy_level', 0)}: the CPU EP " \
                   "multiplies them with int8-quantized activations (not built)"
        if ranks[3] is None or ranks[6] is None:
            return "experts without scales"
        if any(types[i] not in (None, types[0]) for i in (3, 6)):
            return f"scales of type {types[3]} / {types[6]} with input {types[0]}"
        if any(types[i] not in (None, "uint8") for i in (11, 12)):
            return "zero points not uint8"
        return None

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        if not device_supports(info.features, "uint8"):  # (moe.comp reads quantized experts as bytes)
            return "the device has no 8-bit storage"
        return None

    def compute(self, call) -> None:
        quantized = self.spec.op == "QMoE"
        ins = padded(call.inputs, 14)
        if quantized:
            x, router, w1, s1, b1, w2, s2, b2 = ins[:8]
            z1, z2 = ins[11], ins[12]
        else:
            x, router, w1, b1, w2, b2 = ins[:6]
            s1 = s2 = z1 = z2 = None
        key = tuple(t.shape if t is not None else None for t in (x, router, w1, s1, b1, w2, s2, b2, z1, z2))
        plan = self.planned(key, lambda: self._plan(x, router, w1, s1, b1, w2, s2, b2, z1, z2))
        tokens, experts, hidden, inter, rows, block = plan
        dtype = shader_dtype(x)
        y = call.output(0, x.shape, dtype)
        if not y.size:
            return
        k = self.attrs.get("k", 1)
        act = ACTIVATIONS[self.attrs.get("activation_type", "relu")]
        bits = self.attrs.get("expert_weight_bits", 4) if quantized else 0
        limit = self.attrs.get("swiglu_limit")
        common = {"tokens": tokens, "experts": experts, "k": k, "block": block,
                  "alpha": self.attrs.get("activation_alpha", 1.0), "beta": self.attrs.get("activation_beta", 0.0),
                  "limit": math.inf if limit is None else limit}
        normalize = quantized or self.attrs.get("normalize_routing_weights", 0) == 1
        constants = {"act": act, "bits": bits, "normalize": int(normalize)}
        route = call.scratch((2 * tokens * k,), "uint32")
        h = call.scratch((tokens * k * inter,), "float32")

        def dispatch(mode, n, a, w, scale, zp, bias, out, rows_, cols, reads):
            push = {**common, "a": a, "w": w, "scale": scale, "zp": zp, "bias": bias, "route": route, "out_": out,
                    "n": n, "rows": rows_, "cols": cols}
            call.dispatch(self.spec.shader, dtype, {**constants, "mode": mode}, push, grid_1d(n, WG),
                          [t for t in reads if t is not None], [out])

        dispatch(ROUTE, tokens, router, None, None, None, None, route, 0, 0, [router])
        dispatch(FC1, tokens * k * inter, x, w1, s1, z1, b1, h, rows, hidden, [x, w1, s1, z1, b1, route])
        dispatch(FC2, tokens * hidden, h, w2, s2, z2, b2, y, hidden, inter, [h, w2, s2, z2, b2, route])

    def _plan(self, x, router, w1, s1, b1, w2, s2, b2, z1, z2) -> tuple:
        op = self.spec.op
        quantized = op == "QMoE"
        if len(x.shape) not in (2, 3) or len(router.shape) != 2 or len(w1.shape) != 3 or len(w2.shape) != 3:
            raise UnsupportedError(f"{op}: input {x.shape}, router_probs {router.shape}, weights {w1.shape} "
                                   f"{w2.shape}")
        hidden = x.shape[-1]
        tokens = math.prod(x.shape[:-1])
        experts = router.shape[1]
        k = self.attrs.get("k", 1)
        if router.shape[0] != tokens:
            raise UnsupportedError(f"{op}: router_probs {router.shape} for {tokens} tokens")
        if k > experts:
            raise UnsupportedError(f"{op}: k={k} with {experts} experts (the CPU EP fails the run)")
        swiglu = self.attrs.get("activation_type", "relu") == "swiglu"
        per_byte = 8 // self.attrs.get("expert_weight_bits", 4) if quantized else 1
        rows = w1.shape[1]
        inter = w2.shape[2] * per_byte
        if w1.shape != (experts, (2 if swiglu else 1) * inter, hidden // per_byte) or hidden % per_byte \
                or w2.shape != (experts, hidden, inter // per_byte):
            raise UnsupportedError(f"{op}: expert weights {w1.shape} and {w2.shape} for hidden {hidden}, "
                                   f"{experts} experts")
        for bias, n, what in ((b1, rows, "fc1"), (b2, hidden, "fc2")):
            if bias is not None and bias.shape != (experts, n):
                raise UnsupportedError(f"{op}: {what}_experts_bias {bias.shape}")
        block = self.attrs.get("block_size", 0) if quantized else 0
        if quantized:
            bits = self.attrs.get("expert_weight_bits", 4)
            if block and (hidden % block or inter % block):
                raise UnsupportedError(f"{op}: block_size {block} does not divide hidden {hidden} and inter {inter}")
            for scale, zp, n, cols, what in ((s1, z1, rows, hidden, "fc1"), (s2, z2, hidden, inter, "fc2")):
                blocks = cols // block if block else 0
                want = (experts, n, blocks) if block else (experts, n)
                if scale.shape != want:
                    raise UnsupportedError(f"{op}: {what}_scales {scale.shape}, expected {want}")
                if zp is not None:
                    if block:
                        zp_want = (experts, n, -(-blocks * bits // 8))
                    else:
                        zp_want = (experts, -(-n * bits // 8))
                    if zp.shape != zp_want:
                        raise UnsupportedError(f"{op}: {what}_zero_points {zp.shape}, expected {zp_want}")
        longest = max(hidden * (2 if swiglu else 1), k * inter, experts * (k + 2))
        if longest > LOOP_BUDGET:
            raise UnsupportedError(f"{op}: loops of {longest} iterations past one invocation's budget")
        return tokens, experts, hidden, inter, rows, block
