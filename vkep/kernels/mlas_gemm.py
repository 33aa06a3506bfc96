"""Float32 MatMul, Gemm, FusedMatMul and ConvTranspose's columns in the CPU EP's own order of sums
(shaders/mlas_gemm.comp), so that their answers equal ORT's CPU EP's to the last bit on the hosts whose MLAS kernels
vkep follows (x86-64 with AVX2 and FMA).

A model whose later steps round or compare (a duration rounded to frames, an argmax, a quantization) can turn an
ulp into a different answer: Kokoro-82M's durations did. matmul.comp's tiles sum in their own order; MLAS's SGEMM
sums each element as one multiply-add chain per K block (docs/design.md, "MLAS's SGEMM, Softmax and Eigen's sums,
followed"). This path computes a block of y an invocation with exact multiply-adds (emulated in float: lavapipe's fma()
rounds the product apart), so it takes products up to MAX_MACS (below), where its cost stays small beside a run's;
larger ones take matmul.comp's tiles (within float32 rounding of the CPU EP)."""

from __future__ import annotations

from vkep.kernels import host
from vkep.kernels.base import LOOP_BUDGET, Kernel, Tensor, grid_1d

ENABLED = True  # the switch: False sends every product to matmul.comp
# Multiply-adds (batches x M x N x K) up to which a product takes this path: its cost. It runs ~0.2-0.4 G multiply-adds
# a second on Mesa 22.3 lavapipe, a fifth to a tenth of the tiles' (4 x 4 blocks an invocation; one element each ran
# 3x slower, bound by loads; 8 x 8 ran 2x faster but took 4.8 s against 1.7 s to compile cold). Products of two
# computed operands (attention's scores and weighted values, where a softmax or a rounding downstream turns an ulp
# into another answer) up to 2^24: at most ~70 ms more a node; products with a constant B (the weight layers, the
# most numerous products of a transformer) up to 2^20, ~5 ms at most: at 2^22 small transformers ran 70-170x the CPU
# EP's time on Mesa 22.3 (the fifth survey: unidic-lite-imitator's projections [256, 116] x [116, 116] 15 ms each,
# trueocr's Gemms 16-24 ms), and Kokoro-82M's durations stay the CPU EP's to the bit at 2^20 (seeds 0-6)
MAX_MACS = 1 << 24
MAX_MACS_CONSTANT_B = 1 << 20
# loop steps of an M1 element (mlas_sgemm.glsl) beyond its K as lavapipe counts them (measured; ml_linear.gemm_loops too)
M1_LOOPS = 23
SHADER = "mlas_gemm.comp"
WG = 64  # mlas_gemm.comp's workgroup
BLOCK = 4  # ... and the rows and columns of y an invocation computes (its RB, CB)
PACKED, TRANS_A, TRANS_B, INTERLEAVED, COLUMNS, A_PAIRS, B_PAIRS, FOLDED = 1, 2, 4, 8, 16, 32, 64, 128  # its flags


def variant(kernel: Kernel, a: Tensor, b: Tensor, members: dict, batches: int, *, packed: bool, trans_b: bool,
            interleaved: bool, weights: bool = False) -> str | None:
    """The dtype of the mlas_gemm.comp variant that computes this product as the CPU EP does, or None where vkep
    does not follow it: another host (MLAS adds in another order there), another type, a product past MAX_MACS or
    an invocation past lavapipe's loop budget (invocation_loops). `packed`, `trans_b`, `interleaved`: how the
    product reads B, as `record` is then told; `weights`: one operand is a constant (a weight layer's bound, as a
    constant B's: ConvTranspose's W)."""
    m, n, k = members["M"], members["N"], members["K"]
    bound = MAX_MACS_CONSTANT_B if weights or getattr(kernel, "b_constant", False) else MAX_MACS
    if (not ENABLED or kernel.device_info is None or a.dtype != "float32" or b.dtype != "float32" or k == 0
            or batches * m * n * k > bound or not host.mlas_fma3()):
        return None
    pairs = interleaved or _pairs(members, "a", "a_m") or _pairs(members, "b", "b_n")
    if invocation_loops(m, n, k, pairs=pairs, packed=packed, trans_b=trans_b) > LOOP_BUDGET:
        return None
    return "float32"


def invocation_loops(m: int, n: int, k: int, *, pairs: bool, packed: bool, trans_b: bool) -> int:
    """The most loop steps of one mlas_gemm.comp invocation as lavapipe counts them (measured): its block's FMA3
    chain (mlas_fma3_block) costs rows + 2 a step of K (a step: 1 of K, 2 with pairs), its row loop's passes and
    leaving pass included; an element the M1 kernel computes alone (a column of y, or B transposed, where a thread's
    share may be one row: fewer rows than twice the CPU EP's threads) k + M1_LOOPS; a row of mlas_m1_block k / 4 +
    M1_LOOPS. One row is either; more rows may take both."""
    rows = min(BLOCK, m)
    fma3 = (rows + 2) * (-(-k // 2) if pairs else k) + 8 * -(-k // 128) + 64
    if packed:  # (no M1 kernels for a packed B)
        return fma3
    one_row_shares = m < 2 * host.cpu_ep_threads()
    if n == 1 or trans_b:
        m1 = rows * min(BLOCK, n) * (k + M1_LOOPS) if n == 1 or one_row_shares else 0
    else:
        m1 = rows * (-(-k // 4) + M1_LOOPS) if one_row_shares else 0
    return max(fma3, m1) if m == 1 else fma3 + m1


def record(kernel: Kernel, call, dtype: str, a: Tensor, b: Tensor, c: Tensor | None, out_shape: tuple[int, ...],
           members: dict, batches: int, *, packed: bool, trans_a: bool, trans_b: bool, interleaved: bool,
           folds: bool, calls: bool = False) -> None:
    """y = the product `members` describes (matmul.product_members, `batches` of them), in one dispatch of
    mlas_gemm.comp. `packed`: B is a 2-D constant (ORT packs it); `trans_a` / `trans_b`: how the CPU EP's SGEMM
    reads A and B; `interleaved`: B is MatMul.pack's pairs layout; `folds`: ORT folds A's batch into M (B of rank 2
    or less); `calls`: the CPU EP multiplies each batch in a call of its own (ConvTranspose's images), so each is
    split among the threads alone."""
    y = call.output(0, out_shape)
    if y.size == 0:
        return
    m, n, k = members["M"], members["N"], members["K"]
    rows, gemms = (batches * m, 1) if folds and not trans_a else (m, 1 if calls else batches)
    threads_m, threads_n = host.sgemm_threads(rows, n, k, gemms)
    flags = (PACKED * packed | TRANS_A * trans_a | TRANS_B * trans_b | INTERLEAVED * interleaved
             | COLUMNS * (threads_n > 1) | A_PAIRS * _pairs(members, "a", "a_m") | B_PAIRS * _pairs(members, "b", "b_n"))
    blocks = -(-m // BLOCK) * -(-n // BLOCK)
    # (a workgroup's lanes over several batches' blocks; their count in flags' high bits: the push block is full,
    # and batches x M x N x K <= MAX_MACS keeps it within 24 bits)
    folded = batches > 1 and blocks < WG
    push = {**members, "a": a, "b": b, "c": c, "y": y, "rows": rows, "threads": max(threads_m, threads_n),
            "flags": flags | (FOLDED | batches << 8) * folded}
    grid = grid_1d(batches * blocks, WG) if folded else (-(-blocks // WG), 1, batches)
    call.dispatch(SHADER, dtype, {}, push, grid, [a, b] + ([c] if c is not None else []), [y])


def _pairs(members: dict, t: str, row: str) -> bool:
    """Whether operand `t`'s elements k and k + 1 are side by side at even offsets (64-bit loads: vkep's tensors are
    8-byte aligned): contiguous along K, K and its other strides even."""
    return members[f"{t}_k"] == 1 and members["K"] % 2 == 0 and all(
        members[s] % 2 == 0 for s in (f"{t}_outer", f"{t}_inner", row))
