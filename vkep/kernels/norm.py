"""Normalization: LayerNormalization, RMSNormalization, GroupNormalization, InstanceNormalization,
BatchNormalization (inference). All run norm.comp; see its header for the parameter indexing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vkep.kernels import host
from vkep.kernels.base import (
    FLOAT64_SUFFIX,
    Kernel,
    Tensor,
    UnsupportedError,
    axis_in,
    grid_1d,
    has_float64,
    shader_dtype,
    value_variant,
)
from vkep.kernels.softmax import row_workgroup

WG = 128  # norm.comp's workgroup size for BatchNormalization (a thread per element)
MODE_MEAN_VAR, MODE_RMS, MODE_BATCH = 0, 1, 2
# norm.comp's ORDER, in which a row's statistics are summed: the workgroup's tree, or as ORT's CPU EP does, to
# the last bit (which a DynamicQuantizeLinear after a norm can turn into a whole quantization step): its scalar
# loop, or MLAS's AVX2 kernel
ORDER_TREE, ORDER_SCALAR, ORDER_MLAS = 0, 1, 2
SERIAL_MAX = 32768  # the longest row ORDER_SCALAR walks (one lane, in lavapipe's loop budget)
MLAS_MAX = 65536  # ORDER_MLAS's (four lanes)
# ORT 1.32 on x86-64 with AVX2 and FMA: rows from this long take MLAS's kernel, shorter ones its scalar loop
# (measured over 2-89 elements: LayerNormalization from 8, the RMS norms from 16)
MLAS_MIN = {MODE_MEAN_VAR: 8, MODE_RMS: 16}


def scalar_order(length: int) -> int:
    """ORDER_SCALAR for a row one lane can walk in the loop budget, else ORDER_TREE."""
    return ORDER_SCALAR if length <= SERIAL_MAX else ORDER_TREE


def layer_norm_order(mode: int, length: int, dtype: str, info) -> int:
    """The order of a float32 LayerNormalization / RMS norm row on the device `info` (gpu.device's
    PhysicalDeviceInfo): as ORT's CPU EP on this host (its LayerNormImpl: MLAS's AVX2 kernel where the host has
    AVX2 and FMA, which sums the mean in double: norm.comp's FLOAT64 variant; its scalar loop elsewhere), where the
    device can follow it; else, and for float16, the workgroup's tree."""
    if dtype != "float32":
        return ORDER_TREE
    if host.mlas_fma3() and length >= MLAS_MIN[mode]:
        return ORDER_MLAS if length <= MLAS_MAX and info is not None and has_float64(info) else ORDER_TREE
    return scalar_order(length)


def param_index(shape: tuple[int, ...], param: tuple[int, ...]) -> tuple[int, int]:
    """(div, mod) such that a parameter broadcast (numpy rules) over a tensor of `shape` is read at
    (g / div) % mod for the element at flat index g: its non-broadcast dims must be one contiguous block."""
    if len(param) > len(shape):
        if any(d != 1 for d in param[:len(param) - len(shape)]):
            raise UnsupportedError(f"parameter of shape {param} does not broadcast to {shape}")
        param = param[len(param) - len(shape):]
    padded = (1,) * (len(shape) - len(param)) + tuple(param)
    real = [d for d, p in enumerate(padded) if p != 1]
    if any(padded[d] != shape[d] for d in real):
        raise UnsupportedError(f"parameter of shape {param} does not broadcast to {shape}")
    if not real:
        return 1, 1
    first, last = real[0], real[-1]
    if any(padded[d] == 1 and shape[d] != 1 for d in range(first, last + 1)):
        raise UnsupportedError(f"parameter of shape {param} broadcasts inside {shape}: not supported")
    return math.prod(shape[last + 1:]), math.prod(shape[first:last + 1])


@dataclass
class Skip:
    """What the skip norms add to x before normalising it (norm.comp's `skip` fields): skip broadcast over x
    (read at g % skip_mod), an optional bias over the last axis, and where the sum goes (None: nowhere)."""

    skip: Tensor
    skip_mod: int
    bias: Tensor | None
    sum: Tensor | None


def dispatch_norm(kernel: Kernel, call, mode: int, x: Tensor, scale: Tensor, bias: Tensor | None, y: Tensor,
                  extra: list[Tensor | None], rows: int, length: int, index: tuple[int, int, int, int], eps: float,
                  reads: list[Tensor], writes: list[Tensor], skip: Skip | None = None, order: int = ORDER_TREE) -> None:
    """One dispatch of norm.comp: `extra` its mean and inv tensors (the statistics written, or BatchNormalization's
    mean and variance read), `index` scale's and bias's (div, mod), `order` the rows' (ORDER_*). float64
    LayerNormalization walks its rows in pieces of SERIAL_MAX elements, a dispatch each (norm.comp's
    layer_norm_double)."""
    sdiv, smod, bdiv, bmod = index
    push = {"x": x, "scale": scale, "bias": bias, "y": y, "mean": extra[0], "inv": extra[1],
            "skip": skip.skip if skip else None, "skip_bias": skip.bias if skip else None,
            "sum": skip.sum if skip else None, "rows": rows, "len": length, "sdiv": sdiv, "smod": smod, "bdiv": bdiv,
            "bmod": bmod, "skip_mod": skip.skip_mod if skip else 1, "eps": eps, "state": None, "start": 0}
    if mode == MODE_BATCH:
        wg, groups = WG, grid_1d(rows * length, WG)
    else:
        wg, groups = row_workgroup(length, 3), grid_1d(rows, 1)
    constants = {"mode": mode, "local_size_x": wg, "order": order, "x64": int(x.dtype == "float64"), "sums": 0,
                 "piece": SERIAL_MAX}
    if x.dtype == "float64":
        if mode == MODE_MEAN_VAR:
            # (the CPU EP's LayerNormalization<double> sums x and x^2 where scale or bias has not the row's size)
            constants.update(order=ORDER_SCALAR, sums=int(scale.size != length or (bias is not None and
                                                                                    bias.size != length)))
            state = call.scratch((rows, 2), "float64") if length > SERIAL_MAX else None
            for start in range(0, length - SERIAL_MAX, SERIAL_MAX):  # (the pieces before the last)
                call.dispatch(kernel.spec.shader, value_variant(x), constants, {**push, "state": state, "start": start},
                              groups, [x] + ([state] if start else []), [state])
            push.update(state=state, start=max(0, (length - 1) // SERIAL_MAX * SERIAL_MAX))
            reads = reads + ([state] if state is not None else [])
        call.dispatch(kernel.spec.shader, value_variant(x), constants, push, groups, reads, writes)
        return
    dtype: str | tuple[str, str] = (shader_dtype(x), shader_dtype(y))
    if order != ORDER_TREE and x.dtype == y.dtype == "float32" and kernel.device_info is not None \
            and has_float64(kernel.device_info):
        dtype = "float32" + FLOAT64_SUFFIX  # (its sqrt and fused products exact; ORDER_MLAS's double sum)
    call.dispatch(kernel.spec.shader, dtype, constants, push, groups, reads, writes)


class LayerNorm(Kernel):
    """LayerNormalization (mode 0, outputs Y, Mean, InvStdDev) and RMSNormalization / com.microsoft's
    SimplifiedLayerNormalization (mode 1, outputs Y, InvStdDev): rows are the dims from `axis` on; Scale
    (and B) broadcast over X. float64 LayerNormalization in double (norm.comp's X64)."""

    computes_float64 = True

    def compute(self, call) -> None:
        x, scale = call.inputs[:2]
        bias = call.inputs[2] if len(call.inputs) > 2 else None
        rank = len(x.shape)
        axis = axis_in(self.attrs["axis"], rank, self.spec.op)
        rows, length = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
        index = affine_index(x, scale, bias)
        y = call.output(0, x.shape, scale.dtype)
        # outputs 1 and 2: Mean and InvStdDev in mode 0, InvStdDev alone in mode 1
        stats = stat_outputs(self, call, x.shape[:axis] + (1,) * (rank - axis),
                             [0, 1] if self.constants["mode"] == MODE_MEAN_VAR else [1])
        if rows == 0:
            return
        if length == 0:
            raise UnsupportedError(f"{self.spec.op} over an empty axis")
        mode = self.constants["mode"]
        normalize_rows(self, call, mode, x, scale, bias, y, stats, rows, length, index,
                       order=layer_norm_order(mode, length, x.dtype, self.device_info))


def stat_outputs(kernel: Kernel, call, shape: tuple[int, ...], kinds: list[int]) -> list[Tensor | None]:
    """The shader's [mean, inverse deviation] outputs the node has (float32, `shape`): output j + 1 is
    stats[kinds[j]]; None where the node has no such output."""
    stats: list[Tensor | None] = [None, None]
    for j, kind in enumerate(kinds[:max((kernel.output_count or 1) - 1, 0)]):
        t = call.output(j + 1, shape, "float32")
        stats[kind] = t if t is not None and t.addr else None  # an optional output named ""
    return stats


def affine_index(x: Tensor, scale: Tensor, bias: Tensor | None) -> tuple[int, int, int, int]:
    """norm.comp's (div, mod) of scale and of bias broadcast over x (see param_index)."""
    return param_index(x.shape, scale.shape) + (param_index(x.shape, bias.shape) if bias is not None else (1, 1))


def normalize_rows(kernel: Kernel, call, mode: int, x: Tensor, scale: Tensor, bias: Tensor | None, y: Tensor,
                   stats: list[Tensor | None], rows: int, length: int, index: tuple[int, int, int, int],
                   skip: Skip | None = None, order: int = ORDER_TREE) -> None:
    """y = each row of x (or of x + skip: Skip) normalised (mode 0 or 1) with the node's epsilon, its statistics
    summed in `order`, times scale plus bias broadcast over x (`index`: affine_index)."""
    params = [t for t in (scale, bias) if t is not None]
    added = [t for t in (skip.skip, skip.bias) if t is not None] if skip else []
    written = [t for t in (*stats, skip.sum if skip else None) if t is not None]
    dispatch_norm(kernel, call, mode, x, scale, bias, y, stats, rows, length, index, float(kernel.attrs["epsilon"]),
                  [x, *params, *added], [y] + written, skip, order)


class ChannelNorm(Kernel):
    """GroupNormalization (num_groups; per-group scale before opset 21, per-channel from 21) and
    InstanceNormalization (one group per channel): X is [N, C, spatial...]."""

    def compute(self, call) -> None:
        x, scale, bias = call.inputs[:3]
        if len(x.shape) < 2:
            raise UnsupportedError(f"{self.spec.op} needs X of rank >= 2, got {x.shape}")
        n, c = x.shape[:2]
        spatial = math.prod(x.shape[2:])
        groups = self.attrs.get("num_groups", c)
        if groups <= 0 or c % groups:
            raise UnsupportedError(f"{self.spec.op}: {c} channels do not split into {groups} groups")
        per_group = c // groups
        if self.spec.op == "GroupNormalization" and self.since_version < 21:
            index = (per_group * spatial, groups) * 2  # scale/bias [num_groups]
            want = groups
        else:
            index = (spatial, c) * 2  # scale/bias [C]
            want = c
        if scale.size != want or bias.size != want:
            raise UnsupportedError(f"{self.spec.op}: scale {scale.shape} / bias {bias.shape} need {want} elements")
        y = call.output(0, x.shape)
        if x.size == 0:
            return
        dispatch_norm(self, call, MODE_MEAN_VAR, x, scale, bias, y, [None, None], n * groups, per_group * spatial,
                  index, float(self.attrs["epsilon"]), [x, scale, bias], [y])


class BatchNorm(Kernel):
    """BatchNormalization in inference mode: y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + B[c] (float64 in
    double, as the CPU EP fuses it: norm.comp's X64)."""

    computes_float64 = True

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("training_mode"):
            return "training_mode=1 (statistics updates) is not implemented"
        return "spatial=0 (statistics per element of C x H x W) is not implemented" if attrs.get("spatial") == 0 else None

    def compute(self, call) -> None:
        x, scale, bias, mean, var = call.inputs[:5]
        if self.attrs.get("training_mode", 0) or (self.output_count or 1) > 1:  # (opsets 7-8: training outputs)
            raise UnsupportedError("BatchNormalization: training (statistics outputs) is not supported")
        if len({t.dtype for t in (x, scale, bias, mean, var)}) != 1:
            raise UnsupportedError("BatchNormalization: mixed element types are not supported")
        c = x.shape[1] if len(x.shape) > 1 else 1
        if any(t.size != c for t in (scale, bias, mean, var)):
            raise UnsupportedError(f"BatchNormalization: parameters must have {c} elements")
        y = call.output(0, x.shape)
        if x.size == 0:
            return
        spatial = math.prod(x.shape[2:])
        dispatch_norm(self, call, MODE_BATCH, x, scale, bias, y, [mean, var], x.size // spatial, spatial,
                  (spatial, c) * 2, float(self.attrs["epsilon"]), [x, scale, bias, mean, var], [y])


AXES_RUNS = 4  # axes_norm.comp's RUNS: runs of kept (and of reduced) axes


def axis_runs(shape: tuple[int, ...], reduced: set[int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(kept runs, reduced runs): each (size, element stride) of adjacent axes merged, outermost first, the
    dimensions of size 1 left out."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    runs: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
    last = None
    for d, size in enumerate(shape):
        if size == 1:
            continue
        side = d in reduced
        if last == side:  # (adjacent to the previous axis kept: a run of contiguous strides)
            prev_size, _ = runs[side][-1]
            runs[side][-1] = (prev_size * size, strides[d])
        else:
            runs[side].append((size, strides[d]))
        last = side
    return runs[False], runs[True]


class AxesNorm(Kernel):
    """MeanVarianceNormalization (over `axes`, default [0, 2, 3]; axes out of range dropped and repeats merged, as
    ORT's CPU EP does) and LpNormalization (p 1 or 2 along `axis`; float64 in double): one workgroup of axes_norm.comp
    a row."""

    computes_float64 = True

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if spec.op == "LpNormalization" and attrs.get("p") not in (1, 2):
            return f"LpNormalization with p={attrs.get('p')} (ORT's CPU EP takes 1 or 2)"
        if spec.op == "MeanVarianceNormalization" and since_version < 9 and input_ranks and input_ranks[0] != 4:
            return f"MeanVarianceNormalization 1 of rank {input_ranks[0]} (ORT's kernel takes [N, C, H, W])"
        return None

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape)
        if x.size == 0:
            return
        rank = len(x.shape)
        if self.spec.op == "LpNormalization":
            reduced, mode = {axis_in(self.attrs["axis"], rank, self.spec.op)}, self.attrs["p"]
        elif self.since_version < 9:  # statistics per channel over N, H and W, or over all of X (across_channels)
            if rank != 4:
                raise UnsupportedError(f"MeanVarianceNormalization 1 of rank {rank}")
            reduced = {0, 1, 2, 3} if self.attrs["across_channels"] else {0, 2, 3}
            mode = 0 if self.attrs["normalize_variance"] else 3
        else:
            reduced, mode = {a % rank for a in self.attrs["axes"] if -rank <= a < rank}, 0
            if not reduced:  # (the run fails, as on ORT's CPU EP)
                raise UnsupportedError("MeanVarianceNormalization: no valid axes are specified")
        kept, red = axis_runs(x.shape, reduced)
        length = math.prod(s for s, _ in red)
        wg = row_workgroup(length, 3)
        members = {"rows": x.size // length, "len": length}
        for name, runs in (("kept", kept), ("red", red)):
            runs = [(1, 0)] * (AXES_RUNS - len(runs)) + runs
            members |= {f"{name}_dims": [s for s, _ in runs], f"{name}_strides": [st for _, st in runs]}
        call.dispatch(self.spec.shader, value_variant(x), {"mode": mode, "local_size_x": wg},
                      {**members, "x": x, "y": y}, grid_1d(members["rows"], 1), [x], [y])
