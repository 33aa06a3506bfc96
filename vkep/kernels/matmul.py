"""MatMul (numpy semantics, broadcast batch dimensions) and Gemm (alpha, beta, transposes, broadcast C)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np

from vkep.kernels import coopmat, mlas_gemm, tuning
from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    Redirect,
    Tensor,
    UnsupportedError,
    grid_1d,
    holds_constant,
    shader_dtype,
    tensor_bytes,
    value_variant,
)
from vkep.kernels.elementwise import Float32Outputs, as_float32, broadcast_shape, broadcast_strides, collapse

TILE = 64  # output tile of matmul.comp (BM = BN)
MAX_LOOP = 60_000  # loop steps per invocation, under lavapipe's 65,535 loop iterations
FEW_ROWS = 8  # up to this many rows, matmul.comp's column-per-invocation mode
# ... and up to this many (8 a workgroup row) where it reads pairs (PAIRS): per 16 of K and 8 columns,
# 8 + 8 loads for 8 x 16 x 8 multiply-adds against the direct mode's 16 loads for 16 x 16 x 8 (M = 16 in
# its 64-row tile)
PAIR_ROWS = 16
PAIRS = True  # the few-rows mode's pair loads where they apply (see _Tiled._pair_mode)
# matmul.comp's registers-only mode on CPU devices (lavapipe: ~5x the tiled mode's speed there)
DIRECT_ON_CPU_DEVICES = True
# ... and, float32 with 8-wide subgroups, its broadcast mode instead (rows shared by subgroupBroadcast, pair
# loads; see matmul.comp's broadcast())
BROADCAST = True
BROADCAST_ROWS = 16  # a broadcast workgroup's rows of y (matmul.comp's BR) ...
BROADCAST_LANE_COLUMNS = 8  # ... and columns of one invocation (its BC; the workgroup's: 8 x that)
MODE_TILED, MODE_FEW_ROWS, MODE_DIRECT, MODE_BROADCAST = 0, 1, 2, 3
# Split-K (float32): K cut into slices whose partial products run as one dispatch (the slice is the batch's outer
# index), then summed by splitk.comp (SPLIT_WG invocations a workgroup) with alpha, C and any fused epilogue. Where
# one dispatch cannot sum K (past MAX_LOOP steps in every mode), and where the product has fewer 64 x 64 tiles of
# y than `tiles` (the workgroups the device runs at once; 0: never for that) with K of at least `min_k`: the
# defaults of a class tuning.json does not measure (a CPU device's `tiles`: its cores, one workgroup each).
SPLIT_WG = 256
SPLIT_K = {"min_k": 4096, "tiles": 32, "max_slices": 16}
# lavapipe's loop steps of matmul.comp's tiled mode a step of 16 of K: the step, and the A and B staging loops' 4
# passes and leaving pass each (measured: K 95,300 summed right, 96,000 cut short; 1 a step was counted)
TILED_STEP_LOOPS = 11


def tiled_loops(k: int) -> int:
    """Loop steps of one invocation of matmul.comp's tiled mode over K = k, as lavapipe counts them."""
    return -(-k // 16) * TILED_STEP_LOOPS + 1


def _on_cpu_device(kernel: Kernel) -> bool:
    return kernel.device_info is not None and kernel.device_info.device_type == "cpu"


def _pairs_apply(kernel: Kernel, float32: bool) -> bool:
    """Whether the few-rows mode's pair loads can serve this kernel at all (PAIRS): float32 on a CPU device
    with 8-wide subgroups (the loads they save are lavapipe's)."""
    return PAIRS and float32 and _on_cpu_device(kernel) and kernel.device_info.subgroup_size == 8


def broadcast_applies(kernel: Kernel, float32: bool) -> bool:
    """Whether matmul.comp's broadcast mode serves this kernel's many-row products (and Conv's 1x1 ones): float32
    on a CPU device with 8-wide subgroups, as the pair loads (the loads it saves are lavapipe's)."""
    return BROADCAST and _pairs_apply(kernel, float32) and kernel.device_info.features.get("subgroupBallotCompute",
                                                                                          False)


def product_members(m: int, n: int, k: int, *, batch_inner: int = 1, a: tuple[int, int, int, int],
                    b: tuple[int, int, int, int], c: tuple[int, int] = (0, 0), alpha: float = 1.0,
                    beta: float = 0.0) -> dict:
    """matmul.comp's (and matmul_coop.comp's) push members but the tensors (matmul_push.glsl): y [batches, m, n]
    = alpha A x B + beta C over K = k, the batch index z read as (z / batch_inner, z % batch_inner); `a`: A's
    element strides (outer, inner, m, k), `b`: B's (outer, inner, k, n), `c`: C's (m, n)."""
    return {"M": m, "N": n, "K": k, "batch_inner": batch_inner,
            "a_outer": a[0], "a_inner": a[1], "a_m": a[2], "a_k": a[3],
            "b_outer": b[0], "b_inner": b[1], "b_k": b[2], "b_n": b[3],
            "c_m": c[0], "c_n": c[1], "alpha": alpha, "beta": beta}


def broadcast_pairs(p: Mapping[str, int], b_padded: bool = False) -> tuple[int, int]:
    """matmul.comp's (A_PAIRS, B_PAIRS) for a product's push members (see broadcast()): 64-bit loads of A along K,
    of B along N (1) or K (2), where every stride they step by and the dimension they pair are even. `b_padded`:
    B's rows (b_k apart, b_n 1) hold a readable column past an odd N (im2col's padded patches), so that pairs
    along N read it, into a column that is not stored."""
    a_pairs = p["a_k"] == 1 and p["K"] % 2 == 0 and p["a_m"] % 2 == 0 and p["a_outer"] % 2 == 0 \
        and p["a_inner"] % 2 == 0
    b_even = p["b_outer"] % 2 == 0 and p["b_inner"] % 2 == 0
    n_pairs = p["N"] % 2 == 0 or (b_padded and p["b_k"] > p["N"])
    if p["b_n"] == 1 and n_pairs and p["b_k"] % 2 == 0 and b_even:
        return int(a_pairs), 1
    if p["b_k"] == 1 and p["K"] % 2 == 0 and p["b_n"] % 2 == 0 and b_even:
        return int(a_pairs), 2
    return int(a_pairs), 0


def broadcast_dispatch(call, dtype: str, push: Mapping[str, object], batches: int, reads: list,
                       b_padded: bool = False) -> None:
    """One dispatch of matmul.comp's broadcast mode for the product `push` describes (matmul.comp's members by
    name: tensors a, b, c (or None), y and product_members); Conv's 1x1 convolutions come here too. `b_padded`:
    as broadcast_pairs."""
    a_pairs, b_pairs = broadcast_pairs(push, b_padded)
    bc = BROADCAST_LANE_COLUMNS
    groups = (-(-push["N"] // (8 * bc)), -(-push["M"] // BROADCAST_ROWS), batches)  # (past the limit: in pieces)
    with_c = push["c"] is not None
    if with_c and push["c_m"] and push["c_n"]:
        raise UnsupportedError("matmul.comp's broadcast mode takes C per row or per column")
    c_kind = 0 if not with_c else 1 if push["c_n"] == 0 else 2
    constants = {"mode": MODE_BROADCAST, "a_pairs": a_pairs, "b_pairs": b_pairs, "local_size_x": 8,
                 "local_size_y": 1, "c_kind": c_kind, "bc": bc, "br": BROADCAST_ROWS}
    call.dispatch("matmul.comp", dtype, constants, push, groups, reads, [push["y"]])


def slice_members(members: dict, batches: int, slices: int) -> dict:
    """product_members of one of `slices` equal runs of K of the product `members` describes, the slice the batch
    index's outer part (its A and B start K / slices elements along K further on): split-K's partial products,
    [slices][batches][M][N]. A's and B's own outer strides must be 0."""
    p, ks = members, members["K"] // slices
    return product_members(p["M"], p["N"], ks, batch_inner=batches, a=(ks * p["a_k"], p["a_inner"], p["a_m"], p["a_k"]),
                           b=(ks * p["b_k"], p["b_inner"], p["b_k"], p["b_n"]))


def sliced_product(kernel: Kernel, call, a: Tensor, b: Tensor, partials: Tensor, members: dict, batches: int,
                   slices: int) -> None:
    """partials [slices * batches, M, N] = A x B over each of `slices` equal runs of K (slice_members), float32,
    through the MatMul kernel `kernel` composes; the caller sums them (quantize.py's integer products)."""
    mm = kernel.composed("MatMul")
    mm._product(Redirect(call, [a, b, None], partials), a, b, None, lambda: partials,
                slice_members(members, batches, slices), slices * batches)


def product(kernel: Kernel, call, a: Tensor, b: Tensor, out: Tensor, members: dict, batches: int) -> None:
    """out [batches, M, N] = A x B as product_members' `members` describe them, recorded through the MatMul kernel
    `kernel` composes (its modes, tiles and split-K): for kernels whose work includes a product (recurrent.py's
    steps, ConvTranspose's columns); float64 (Einsum's) through its FLOAT64 variant."""
    mm, redirected = kernel.composed("MatMul"), Redirect(call, [a, b, None], out)
    record = mm._record_float64 if a.dtype == "float64" else mm._record
    record(redirected, a, b, None, out.shape, members, batches)


def _interleave(nk: np.ndarray) -> np.ndarray:
    """B as [N, K] (K even) laid out [ceil(N / 8)][K / 2][8][2], zero columns past N: what the few-rows mode
    reads with PAIRS = 2."""
    n, k = nk.shape
    padded = np.zeros((-(-n // 8) * 8, k), np.float32)
    padded[:n] = nk
    return np.ascontiguousarray(padded.reshape(-1, 8, k // 2, 2).transpose(0, 2, 1, 3))


class _Tiled(Kernel):
    """Shared by MatMul and Gemm: one dispatch of matmul.comp per call, planned once per shape."""

    computes_float64 = True
    b_interleaved = False  # B packed [N / 8][K / 2][8][2] for the few-rows mode's pair loads (MatMul.pack)
    declared_n = 0  # ... and its N
    b_constant = False  # B is a 2-D constant (pack saw it), which ORT's CPU EP packs: MLAS's K blocks of 256

    def _record_node(self, call, a, b, c, out_shape, members: dict, batches: int, folds: bool) -> None:
        """The node's own product: in the CPU EP's order where mlas_gemm takes it, else as _record."""
        if a.dtype == "float64":
            return self._record_float64(call, a, b, c, out_shape, members, batches)
        packed, trans_b = self._cpu_ep_reads_b(b)
        dtype = mlas_gemm.variant(self, a, b, members, batches, packed=packed, trans_b=trans_b,
                                  interleaved=self.b_interleaved)
        if dtype is None:
            return self._record(call, a, b, c, out_shape, members, batches)
        mlas_gemm.record(self, call, dtype, a, b, c, out_shape, members, batches, packed=packed,
                         trans_a=bool(self.attrs.get("transA")) and len(a.shape) > 1, trans_b=trans_b,
                         interleaved=self.b_interleaved, folds=folds)

    def _cpu_ep_reads_b(self, b) -> tuple[bool, bool]:
        """(packed, transposed): how the CPU EP's SGEMM takes B, whose kernels (and order of sums) follow."""
        return self.b_constant, bool(self.attrs.get("transB")) and len(b.shape) > 1

    def _record_float64(self, call, a, b, c, out_shape, members: dict, batches: int) -> None:
        """float64: matmul.comp's FLOAT64 variant, an invocation an element of y (K in its one loop)."""
        if members["K"] > LOOP_BUDGET:
            raise UnsupportedError(f"a float64 inner dimension of {members['K']} exceeds what one dispatch sums")
        y = call.output(0, out_shape)
        if y.size:
            reads = [a, b] + ([c] if c is not None else [])
            call.dispatch(self.spec.shader, value_variant(a), {"mode": MODE_TILED},
                          {**members, "a": a, "b": b, "c": c, "y": y},
                          (-(-members["N"] // 16), -(-members["M"] // 16), batches), reads, [y])

    def _record(self, call, a, b, c, out_shape, members: dict, batches: int) -> None:
        """The node's product: `members` its push members but the tensors (product_members), planned per shape."""
        slices = self._slices(a, members, batches)
        if slices > 1:
            return self._record_split(call, a, b, c, out_shape, members, batches, slices)
        self._product(call, a, b, c, lambda: call.output(0, out_shape), members, batches)

    def _slices(self, a, members: dict, batches: int) -> int:
        """How many slices of K split-K cuts this product into (1: none; see SPLIT_K): float32, B as the node
        gives it (not interleaved), the batch in one index (its outer index is the slice's), K a multiple of
        the count (the slices' pair loads want an even length: chosen first)."""
        m, n, k = members["M"], members["N"], members["K"]
        if a.dtype != "float32" or self.b_interleaved or k < 2 or self.device_info is None:
            return 1
        if tiled_loops(k) > MAX_LOOP:  # past what the tiled mode of one dispatch can sum: slices of at most MAX_LOOP
            want = -(-k // MAX_LOOP)  # (with outer strides too: a dispatch a slice, see _record_split)
        elif members["a_outer"] or members["b_outer"]:
            return 1
        else:
            default = {**SPLIT_K, "tiles": os.cpu_count() or 2} if _on_cpu_device(self) else SPLIT_K
            split = tuning.choice(self.device_info, "splitk", default)
            tiles, parallel = batches * -(-m // TILE) * -(-n // TILE), split["tiles"]
            if k < split["min_k"] or tiles >= parallel:
                return 1
            want = min(-(-parallel // tiles), split["max_slices"], k // (split["min_k"] // 2))
            if want < 2:
                return 1
        counts = [s for s in range(want, min(k, 4 * want) + 1) if k % s == 0 and k // s <= MAX_LOOP]
        return min(counts, key=lambda s: ((k // s) % 2, s), default=1)

    def _record_split(self, call, a, b, c, out_shape, members: dict, batches: int, slices: int) -> None:
        """The product as `slices` float32 partial products over K / slices each (one dispatch: the slice is its
        batch's outer index), summed in slice order by splitk.comp with alpha and beta C."""
        y = call.output(0, out_shape)
        if y.size == 0:
            return
        p = members
        m, n = p["M"], p["N"]
        partials = call.scratch((slices * batches, m, n), "float32")
        if p["a_outer"] or p["b_outer"]:  # (the batch's outer index is taken: a dispatch a slice, A and B viewed
            ks = p["K"] // slices        # from the slice's start)
            sliced = {**p, "K": ks}
            for s in range(slices):
                a_s, b_s, part = (t.view(tensor_bytes(start, t.dtype), (t.size - start,)) for t, start in (
                    (a, s * ks * p["a_k"]), (b, s * ks * p["b_k"]), (partials, s * batches * m * n)))
                self._product(call, a_s, b_s, None, lambda part=part: part, sliced, batches)
        else:
            self._product(call, a, b, None, lambda: partials, slice_members(members, batches, slices),
                          slices * batches)
        count = batches * m * n
        call.dispatch("splitk.comp", shader_dtype(y), {},
                      {"partials": partials, "c": c, "y": y, "count": count, "slices": slices, "M": m, "N": n,
                       "c_m": p["c_m"], "c_n": p["c_n"], "alpha": p["alpha"], "beta": p["beta"]},
                      grid_1d(count, SPLIT_WG), [partials] + ([c] if c is not None else []), [y])

    def _product(self, call, a, b, c, make_y, members: dict, batches: int) -> None:
        """One dispatch of the product `members` describes into make_y()'s tensor (the node's output, or split-K's
        partial products), in the mode that serves it."""
        m, n, k = members["M"], members["N"], members["K"]
        pairs = self._pair_mode(a, members)
        # (loop steps of an invocation: K, or K / 16 with pairs)
        few_rows = (m <= FEW_ROWS or pairs and m <= PAIR_ROWS or self.b_interleaved) and (
            k <= MAX_LOOP or pairs and -(-k // 16) <= MAX_LOOP)
        if self.b_interleaved and not few_rows:  # (only that mode reads the interleaved B: K past 960,000)
            raise UnsupportedError(f"an inner dimension of {k} exceeds what one dispatch can sum ({MAX_LOOP * 16})")
        # (broadcast: K / 2 loop steps; C per row or column, a C per element costs it seconds of compiling)
        broadcast = (not few_rows and broadcast_applies(self, a.dtype == "float32") and -(-k // 2) <= MAX_LOOP
                     and not (c is not None and members["c_m"] and members["c_n"]))
        direct = not few_rows and not broadcast and DIRECT_ON_CPU_DEVICES and k <= MAX_LOOP and _on_cpu_device(self)
        if not few_rows and not direct and not broadcast and tiled_loops(k) > MAX_LOOP:
            # lavapipe runs at most 65,535 loop iterations per invocation and then stops silently
            raise UnsupportedError(f"an inner dimension of {k} exceeds what one dispatch can sum")
        y = make_y()
        if y.size == 0:
            return
        rows = min(m, FEW_ROWS)
        groups = (-(-n // 256), -(-m // rows), batches) if few_rows else (-(-n // TILE), -(-m // TILE), batches)
        reads = [a, b] + ([c] if c is not None else [])
        push = {**members, "a": a, "b": b, "c": c, "y": y}  # (c None: address 0, the shader skips C)
        coop = None if few_rows or a.dtype != "float16" else coopmat.product(self)  # (the device's matrix units)
        if coop is not None and -(-k // coop[2]) <= MAX_LOOP:
            return coopmat.dispatch(call, self, coop, push, batches, reads)
        if broadcast:
            return broadcast_dispatch(call, shader_dtype(a), push, batches, reads)
        mode = MODE_FEW_ROWS if few_rows else MODE_DIRECT if direct else MODE_TILED
        # few rows with A and B contiguous along K: vec4 loads (B is kept [N, K] for this on CPU devices)
        vec4 = few_rows and a.dtype == "float32" and members["a_k"] == 1 and members["b_k"] == 1 and k % 4 == 0
        constants = {"mode": mode, "rows": rows, "vec4": int(vec4), "pairs": pairs} if few_rows else {"mode": mode}
        call.dispatch(self.spec.shader, self.product_dtype(a), constants, push, groups, reads, [y])

    def _pair_mode(self, a, members: dict) -> int:
        """How the few-rows mode reads (its PAIRS constant): 2 where B was interleaved for it (MatMul.pack);
        1, 2 elements a load with A shared across each subgroup, for float32 on a device with 8-wide
        subgroups, A and B contiguous along K, K and every other stride of A and B even (64-bit loads of
        whole pairs; on a CPU device only: the loads it saves are lavapipe's); else 0."""
        if self.b_interleaved:
            return 2
        if not _pairs_apply(self, a.dtype == "float32"):
            return 0
        p = members
        return int(p["a_k"] == 1 and p["b_k"] == 1 and p["K"] % 2 == 0 and all(
            p[s] % 2 == 0 for s in ("a_outer", "a_inner", "a_m", "b_outer", "b_inner", "b_n")))


class MatMul(_Tiled):
    b_packed_nk = False  # a 2-D constant B arrives transposed to [N, K] (see pack)

    def pack(self, index: int, weight):
        """On CPU devices a 2-D constant B is stored [N, K], so that rows of A meet it contiguously along K
        (pair or vec4 loads in matmul.comp's few-rows mode), unless the graph declares A with more rows than
        that mode takes: the direct mode reads B faster as it is ([K, N]: 9.6 against 13.8 GFLOPS at 512^3; the
        broadcast mode reads either in pairs)."""
        self.b_constant = self.b_constant or (index == 1 and weight.ndim == 2)
        few = weight.ndim == 2 and _on_cpu_device(self) and not self._many_rows(PAIR_ROWS)
        if index == 1 and few and _pairs_apply(self, weight.dtype == np.float32) and weight.shape[0] % 2 == 0 \
                and weight.size:
            # [N / 8][K / 2][8][2]: a subgroup's 8 columns read 64 contiguous bytes a step (tools/bench_gemv.py,
            # 1x4096x4096: 133 -> 79 ms; [N, K] gives each lane its own stream, 4 KiB pages apart)
            self.b_interleaved, self.b_packed_nk, self.declared_n = True, True, weight.shape[1]
            return _interleave(weight.T), "matmul-b-pairs8"
        if index == 1 and few:
            self.b_packed_nk = True
            return weight.T.copy(), "matmul-b-nk"
        return weight, "raw"

    def _many_rows(self, few: int) -> bool:
        declared = self.declared_inputs
        shape = declared[0][0] if declared else None
        return shape is not None and math.prod(shape[:-1]) > few

    def _plan(self, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple:
        if self.b_interleaved:
            sb = (sb[1] * 2, self.declared_n)
        elif self.b_packed_nk:
            sb = sb[::-1]  # the packed [N, K] is read as the node's [K, N] through its strides (below)
        if not sa or not sb:
            raise UnsupportedError("MatMul of a scalar")
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        m, k = a2[-2:]
        k2, n = b2[-2:]
        if k != k2:
            raise UnsupportedError(f"MatMul inner dimensions differ: {sa} x {sb}")
        batch = broadcast_shape(a2[:-2], b2[:-2]) if len(a2) > 2 or len(b2) > 2 else ()
        out = batch + (m, n)
        if len(sa) == 1:
            out = out[:-2] + (n,)
        if len(sb) == 1:
            out = out[:-1]
        strides_a = [s * m * k for s in broadcast_strides(a2[:-2], batch)] if batch else []
        strides_b = [s * k * n for s in broadcast_strides(b2[:-2], batch)] if batch else []
        dims, (st_a, st_b) = collapse(batch, strides_a, strides_b) if batch else ([1], ([0], [0]))
        if len(dims) > 2:
            raise UnsupportedError(f"batch dimensions of {sa} x {sb} do not fold into two")
        dims, st_a, st_b = [1] * (2 - len(dims)) + dims, [0] * (2 - len(st_a)) + st_a, [0] * (2 - len(st_b)) + st_b
        b_k, b_n = (1, k) if self.b_packed_nk else (n, 1)
        members = product_members(m, n, k, batch_inner=dims[1], a=(st_a[0], st_a[1], k, 1),
                                  b=(st_b[0], st_b[1], b_k, b_n))
        return out, members, math.prod(dims)

    def compute(self, call) -> None:
        a, b = call.inputs[:2]
        key = (a.shape, b.shape)
        out, members, batches = self.planned(key, lambda: self._plan(a.shape, b.shape))
        self._record_node(call, a, b, None, out, members, batches, folds=len(b.shape) <= 2)


class Gemm(_Tiled):
    b_packed_kn = False  # B arrives already transposed to [K, N] (see pack)

    def pack(self, index: int, weight):
        """B is stored as [K, N] row-major, whatever transB says: the kernel then reads it with unit stride.
        On CPU devices a transB weight stays [N, K]: rows of A meet it contiguously along K (vec4 loads
        in matmul.comp's few-rows mode, where a fully connected layer on one sample spends its time); with
        8-wide subgroups and few rows declared, B is interleaved for that mode's pair loads (_interleaves)."""
        self.b_constant = self.b_constant or index == 1
        if index == 1 and self._interleaves(weight):  # (as MatMul's: see MatMul.pack)
            self.b_interleaved, self.declared_n = True, weight.shape[0 if self.attrs["transB"] else 1]
            return _interleave(weight if self.attrs["transB"] else weight.T), "gemm-b-pairs8"
        if index == 1 and self.attrs["transB"] and weight.ndim == 2 and not _on_cpu_device(self):
            self.b_packed_kn = True
            return weight.T.copy(), "gemm-b-kn"
        return weight, "raw"

    def _interleaves(self, weight) -> bool:
        """B interleaved for the few-rows mode's pair loads: float32 on a CPU device with 8-wide subgroups,
        A not transposed (read along K in pairs) with up to PAIR_ROWS rows declared, K even and not 0."""
        declared = self.declared_inputs
        shape = declared[0][0] if declared else None
        k = weight.shape[1 if self.attrs["transB"] else 0] if weight.ndim == 2 else 0
        return (_pairs_apply(self, weight.dtype == np.float32) and not self.attrs["transA"] and shape is not None
                and len(shape) == 2 and shape[0] <= PAIR_ROWS and k % 2 == 0 and weight.size > 0)

    def _plan(self, sa, sb, sc) -> tuple:
        ta, tb = self.attrs["transA"], self.attrs["transB"] and not self.b_packed_kn
        if self.b_interleaved:  # (B's strides below go unused: PAIRS 2 reads it)
            sb, tb = (sb[1] * 2, self.declared_n), False
        if len(sa) != 2 or len(sb) != 2:
            raise UnsupportedError(f"Gemm takes 2-D A and B, got {sa} and {sb}")
        m, k = (sa[1], sa[0]) if ta else sa
        k2, n = (sb[1], sb[0]) if tb else sb
        if k != k2:
            raise UnsupportedError(f"Gemm inner dimensions differ: {sa} x {sb} (transA={ta}, transB={tb})")
        a_m, a_k = (1, m) if ta else (k, 1)
        b_k, b_n = (1, k) if tb else (n, 1)
        c_m = c_n = 0
        if sc is not None:
            c_m, c_n = broadcast_strides(sc, (m, n))
            if broadcast_shape(sc, (m, n)) != (m, n):
                raise UnsupportedError(f"Gemm C of shape {sc} does not broadcast to {(m, n)}")
        alpha, beta = float(self.attrs["alpha"]), float(self.attrs["beta"])
        members = product_members(m, n, k, a=(0, 0, a_m, a_k), b=(0, 0, b_k, b_n), c=(c_m, c_n), alpha=alpha,
                                  beta=beta)
        return (m, n), members, 1

    def compute(self, call) -> None:
        a, b = call.inputs[:2]
        c = call.inputs[2] if len(call.inputs) > 2 else None
        key = (a.shape, b.shape, c.shape if c is not None else None)
        out, members, batches = self.planned(key, lambda: self._plan(*key))
        self._record_node(call, a, b, c, out, members, batches, folds=True)


class FusedMatMul(MatMul):
    """com.microsoft FusedMatMul (ORT's optimizer folds a Transpose of either operand's last two dims and a scale
    into a MatMul; saved optimized models keep it): alpha x op(A) x op(B), the transposes read through strides.
    transBatchA / transBatchB (batch dims moved past the matrix) are declined."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("transBatchA") or attrs.get("transBatchB"):
            return "FusedMatMul with transBatchA or transBatchB"
        for rank, trans in zip(input_ranks, ("transA", "transB"), strict=False):
            if attrs.get(trans) and rank is not None and 0 <= rank < 2:
                return f"FusedMatMul with {trans} on a {rank}-D operand"
        return None

    def pack(self, index: int, weight):
        self.b_constant = self.b_constant or (index == 1 and weight.ndim == 2)
        return weight, "raw"  # (B as the node gives it: transB says how to read it)

    def _plan(self, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple:
        ta, tb = self.attrs.get("transA", 0), self.attrs.get("transB", 0)
        if (ta and len(sa) < 2) or (tb and len(sb) < 2):
            raise UnsupportedError("FusedMatMul: a transposed operand of rank below 2")
        swap = lambda s: s[:-2] + (s[-1], s[-2])  # noqa: E731
        out, members, batches = super()._plan(swap(sa) if ta else sa, swap(sb) if tb else sb)
        m, k = members["M"], members["K"]
        if ta:  # A is [.., k, m] in memory
            members["a_m"], members["a_k"] = 1, m
        if tb:  # B is [.., n, k] in memory
            members["b_k"], members["b_n"] = 1, k
        members["alpha"] = float(self.attrs.get("alpha", 1.0))
        return out, members, batches


# the 4-bit codes' values of MatMulBnb4 (bitsandbytes' FP4 and NF4), as float32 bit patterns read back from ORT
# 1.32's CPU EP (a MatMulBnb4 of identity A and absmax 1; FP4's code 8 is -0)
BNB4_CODES = {
    0: [0x00000000, 0x3BAAAAAB, 0x3F2AAAAB, 0x3F800000, 0x3EAAAAAB, 0x3F000000, 0x3E2AAAAB, 0x3E800000],
    1: [0xBF800000, 0xBF3239B1, 0xBF066B30, 0xBECA32A0, 0xBE91A24D, 0xBE3D353F, 0xBDBA7871, 0x00000000,
        0x3DA2FAFF, 0x3E24CAE3, 0x3E7C04DD, 0x3EAD033A, 0x3EE1A4B8, 0x3F1007AB, 0x3F3913B3, 0x3F800000],
}
BNB4_BLOCK_SIZES = (16, 32, 64, 128, 256)  # (the CPU EP has no other)


def bnb4_table(quant_type: int) -> np.ndarray:
    bits = BNB4_CODES[quant_type]
    if quant_type == 0:  # the negative half: the positive with the sign bit set
        bits = bits + [b | 0x80000000 for b in bits]
    return np.array(bits, np.uint32).view(np.float32)


class MatMulBnb4(MatMul):
    """com.microsoft MatMulBnb4 (onnxruntime.quantization's MatMulBnb4Quantizer; transformers.js's bnb4 models):
    B [N, K] as 4-bit FP4 or NF4 codes, two a byte (the first element in the high nibble), in blocks of
    `block_size` elements over the flattened B, each times its absmax. The CPU EP dequantizes B to float32 (one
    product an element) and runs an SGEMM with B transposed; vkep dequantizes the same way once, when the two
    constants are packed, and runs MatMul on the float weight (its layouts, order and speed)."""

    held: np.ndarray | None = None  # B's codes, until absmax arrives (ORT packs in input order)

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs["quant_type"] not in BNB4_CODES:
            return f"MatMulBnb4: quant_type {attrs['quant_type']} (the CPU EP has 0, FP4, and 1, NF4)"
        if attrs["block_size"] not in BNB4_BLOCK_SIZES:
            return f"MatMulBnb4: block_size {attrs['block_size']} (the CPU EP has {list(BNB4_BLOCK_SIZES)})"
        if not attrs.get("transB", 1):  # (the CPU EP's product transposes B whatever transB says)
            return "MatMulBnb4 with transB 0"
        return None

    @classmethod
    def declines_dims(cls, attrs: dict, input_dims: list[tuple[int, ...] | None]) -> str | None:
        count = attrs["N"] * attrs["K"]
        for index, want in ((1, (count + 1) // 2), (2, -(-count // max(attrs["block_size"], 1)))):
            dims = input_dims[index] if index < len(input_dims) else None
            if dims is not None and -1 not in dims and math.prod(dims) != want:  # (the CPU EP reads past it)
                return f"MatMulBnb4: input {index} of {math.prod(dims)} elements for N {attrs['N']}, K {attrs['K']}"
        return None

    def pack(self, index: int, weight):
        if index == 1:
            self.held = weight
            return np.zeros(1, np.uint8), "held-for-packing"
        n, k, block = int(self.attrs["N"]), int(self.attrs["K"]), int(self.attrs["block_size"])
        codes, self.held = self.held, None
        count = n * k
        if codes is None or codes.size != (count + 1) // 2 or weight.size != -(-count // block):
            raise UnsupportedError(f"MatMulBnb4: B of {None if codes is None else codes.size} bytes and absmax of "
                                   f"{weight.size} for N {n}, K {k}, block_size {block}")
        nibbles = np.stack([codes.reshape(-1) >> 4, codes.reshape(-1) & 15], 1).reshape(-1)[:count]
        scales = np.repeat(weight.reshape(-1).astype(np.float32), block)[:count]
        dequantized = (bnb4_table(int(self.attrs["quant_type"]))[nibbles] * scales).reshape(n, k)
        return super().pack(1, dequantized.T)

    def compute(self, call) -> None:
        a, b = call.inputs[0], call.inputs[2]  # (the float weight, packed in absmax's place)
        if b is not None and b.io != Tensor.PERSISTENT and holds_constant(call, b):
            b = Tensor(b.addr, (int(self.attrs["K"]), int(self.attrs["N"])), "float32", b.io)  # (a dry run: unpacked)
        elif b is None or b.io != Tensor.PERSISTENT:
            raise UnsupportedError("MatMulBnb4: B and absmax not packed (they must be constant initializers)")
        # float16 A: the CPU EP's product is float32's (A widened, the same float32 weight), rounded once at the end
        wide = Float32Outputs(call) if a.dtype == "float16" else None
        a = as_float32(call, a)
        out, members, batches = self.planned((a.shape, b.shape), lambda: self._plan(a.shape, b.shape))
        self._record_node(wide or call, a, b, None, out, members, batches, folds=True)
        if wide is not None:
            wide.finish()

    def _cpu_ep_reads_b(self, b) -> tuple[bool, bool]:
        return False, True  # (the dequantized B, not packed, through CblasTrans)
