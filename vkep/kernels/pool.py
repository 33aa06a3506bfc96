"""MaxPool (with optional Indices), AveragePool, LpPool, their Global forms (shaders/pool.comp), LRN
(shaders/lrn.comp) and MaxUnpool (shaders/max_unpool.comp), over NC[D]HW tensors with 1 to 3 spatial
dimensions; com.microsoft NhwcMaxPool through transposes."""

from __future__ import annotations

import math

from vkep.kernels.base import LOOP_BUDGET, Kernel, UnsupportedError, grid_1d, shader_dtype, value_variant
from vkep.kernels.conv import MAX_SPATIAL, as_3d, check_size
from vkep.kernels.movement import contiguous_strides, dispatch_gather, host_values
from vkep.kernels.reduce import reduce_geometry, reduce_op_code, reduce_plan

WORKGROUP = 64  # pool.comp's and lrn.comp's WG
OP_MAX, OP_AVERAGE, OP_LP = 0, 1, 2
FIXED_WINDOW_TAPS = 49  # MaxPool windows of up to this many taps are unrolled (pool.comp's KH_FIXED, KW_FIXED)


def _cdiv(a: int, b: int) -> int:
    """C++'s integer division (truncates toward zero; b > 0)."""
    return -(-a // b) if a < 0 else a // b


def pool_geometry(in_dims, kernel, strides, dilations, pads, auto_pad: str,
                  ceil_mode: int = 0) -> tuple[list[int], list[int], list[int]]:
    """(output dims, leading pads, trailing pads) of a pool's window as ORT 1.32's CPU EP computes them
    (PoolAttributes::ComputeSizePadDilations / ComputeOutputSize): C++'s truncating division, so a window longer
    than its padded input still gives an output where (size + pads - window) / stride truncates to 0 (a window of
    3 over 2 elements, stride 3: one output, the mean or max of the 2 that exist); auto_pad SAME pads for the
    undilated kernel (a dilated window then reaches past the pads); ceil_mode drops a last window that starts past
    the input and its leading pad. A negative size is the CPU EP's error: raised here too."""
    n = len(in_dims)
    pads = list(pads) if pads else [0] * 2 * n
    begin, end, out = list(pads[:n]), list(pads[n:]), []
    for i, size in enumerate(in_dims):
        k, s, d = kernel[i], strides[i], dilations[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            need = (-(-size // s) - 1) * s + k - size
            begin[i] = _cdiv(need, 2) if auto_pad == "SAME_UPPER" else _cdiv(need + 1, 2)
            end[i] = need - begin[i]
        elif auto_pad == "VALID":
            begin[i] = end[i] = 0
        elif auto_pad not in ("NOTSET", ""):
            raise UnsupportedError(f"auto_pad {auto_pad!r}")
        span = size + begin[i] + end[i] - d * (k - 1) - 1
        o = _cdiv(span, s) + 1
        if ceil_mode:
            o = math.ceil(span / s) + 1
            if (o - 1) * s >= size + begin[i]:  # the last window must start inside the input or its leading pad
                o -= 1
        if o < 0:
            raise UnsupportedError(f"a window of {k} (dilated by {d}) over {size} elements padded by {begin[i]} + "
                                   f"{end[i]}, stride {s}: the output size is negative (the CPU EP fails too)")
        out.append(o)
    return out, begin, end


def window_loops(kd: int, kh: int, kw: int) -> int:
    """pool.comp's loop steps over one window, as lavapipe counts them (a loop's leaving pass too): its planes,
    each plane's rows, each row's taps 8 at a time. (Counted without the leaving passes, a MaxPool window of
    25,000 x 1 passed as 50,001 steps and was cut short: its last rows' maximum missed.)"""
    return kd * (2 + kh * (2 + -(-kw // 8)))


class Pool(Kernel):
    """The manifest's `op` constant (pool.comp's OP) picks max / average / Lp; float64 MaxPool in double (pool.comp's
    FLOAT64 variant)."""

    is_global = False
    computes_float64 = True

    def __init__(self, *args):
        super().__init__(*args)
        self.op = self.spec.constants["op"]

    def _plan(self, xs: tuple[int, ...]) -> tuple:
        n = len(xs) - 2
        if n < 1 or n > MAX_SPATIAL:
            raise UnsupportedError(f"{self.spec.op}: input {xs} must have 1 to 3 spatial dims")
        attrs = self.attrs
        if self.is_global:
            kernel, strides, dilations, out, begin, end = list(xs[2:]), [1] * n, [1] * n, [1] * n, [0] * n, [0] * n
        else:
            kernel = list(attrs["kernel_shape"])
            if len(kernel) != n:
                raise UnsupportedError(f"{self.spec.op}: kernel_shape {kernel} does not fit input {xs}")
            strides = list(attrs.get("strides") or [1] * n)
            dilations = list(attrs.get("dilations") or [1] * n)
            out, begin, end = pool_geometry(xs[2:], kernel, strides, dilations, attrs.get("pads"),
                                              attrs["auto_pad"], attrs.get("ceil_mode", 0))
            if self.spec.op == "MaxPool" and min(begin + end) < 0 and (self.output_count or 1) == 1 \
                    and not attrs.get("storage_order") and max(dilations) == 1 \
                    and (self.input_types or ["float32"])[0] in ("float32", "float16"):
                # (the CPU EP's MLAS MaxPool, which it runs there for float, fails on the negative pads of auto_pad
                # SAME with a stride past the kernel; its other MaxPool path (8-bit, Indices, dilations) and
                # NhwcMaxPool take them, as pool.comp does)
                raise UnsupportedError(f"{self.spec.op}: auto_pad SAME gives negative pads {begin} + {end}")
        out_shape = (*xs[:2], *out)
        check_size(xs, out_shape)
        total = math.prod(out_shape)
        p = attrs.get("p", 2)
        if self.op == OP_LP and (not isinstance(p, int) or p < 1):
            raise UnsupportedError(f"{self.spec.op}: p = {p} (an integer >= 1 is supported)")
        constants = {"op": self.op, "count_pad": int(attrs.get("count_include_pad", 0) != 0),
                     "p": p if self.op == OP_LP else 2, "storage_order": int(attrs.get("storage_order", 0) != 0)}
        members = {"n": total}
        for names, values, fill in (("id ih iw", xs[2:], 1), ("od oh ow", out, 1), ("kd kh kw", kernel, 1),
                                    ("sd sh sw", strides, 1), ("dd dh dw", dilations, 1), ("pd ph pw", begin, 0),
                                    ("ped peh pew", end, 0)):
            members.update(zip(names.split(), as_3d(values, fill), strict=True))
        # loop iterations of one invocation: within lavapipe's budget, or a clear error rather than a window
        # silently cut short
        kd, kh, kw = as_3d(kernel, 1)
        if window_loops(kd, kh, kw) > LOOP_BUDGET:
            reduction = self._as_reduction(xs, p)
            if reduction is not None:
                return reduction
            raise UnsupportedError(f"{self.spec.op}: a window of {kernel} taps is too large for one invocation")
        if self.op == OP_MAX and not self.is_global and n <= 2 and kh * kw <= FIXED_WINDOW_TAPS \
                and (self.output_count or 1) == 1 and (self.input_types or ["float32"])[0] != "float64":
            # (pool.comp's unrolled window: no Indices output, float's rule of skipping NaN)
            constants.update(kh_fixed=kh, kw_fixed=kw)
        return out_shape, total, self.spec.shader, constants, members, grid_1d(total, WORKGROUP)

    def _as_reduction(self, xs: tuple[int, ...], p) -> tuple | None:
        """A global average or L1/L2 pool whose window is past one invocation's loop budget is a reduction
        over the spatial dims: reduce.comp's workgroup-per-output mode splits it across a workgroup (the
        plan Pool.compute runs), or None where the pool is not one (max: NaN is skipped there)."""
        if not self.is_global:
            return None
        name = {OP_AVERAGE: "ReduceMean"}.get(self.op) or {1: "ReduceL1", 2: "ReduceL2"}.get(p if self.op == OP_LP
                                                                                            else 0)
        if name is None:
            return None
        out_shape, n_out, n_red, members = reduce_plan(xs, set(range(2, len(xs))), True)
        (split, wg), groups = reduce_geometry(n_red, n_out)
        return out_shape, n_out, "reduce.comp", {"op": reduce_op_code(name), "split": split, "local_size_x": wg}, \
            members, groups

    def compute(self, call) -> None:
        x = call.inputs[0]
        plan = self.planned(x.shape, lambda: self._plan(x.shape))
        out_shape, total, shader, constants, members, groups = plan
        y = call.output(0, out_shape)
        indices = call.output(1, out_shape, "int64") if (self.output_count or 1) > 1 else None  # MaxPool's
        if total == 0:
            return
        writes = [y] + ([indices] if indices is not None else [])
        tensors = {"x": x, "y": y} if shader != self.spec.shader else {"x": x, "y": y, "indices": indices}
        call.dispatch(shader, value_variant(x), constants, {**members, **tensors}, groups, [x], writes)


class NhwcMaxPool(Pool):
    """com.microsoft NhwcMaxPool (8-bit MaxPool as ORT's NHWC transformer saves it in optimized models): X
    [N, spatial..., C] moved to NCHW in scratch (strided_copy.comp), pool.comp's MaxPool, and back. (auto_pad SAME
    with dilations: pool_geometry pads for the undilated window, then dilates it, as the CPU EP's NHWC kernel.)"""

    def compute(self, call) -> None:
        x = call.inputs[0]
        rank = len(x.shape)
        to_nchw = [0, rank - 1, *range(1, rank - 1)]
        nchw = tuple(x.shape[p] for p in to_nchw)
        out_shape, total, shader, constants, members, groups = self.planned(nchw, lambda: self._plan(nchw))
        y = call.output(0, (out_shape[0], *out_shape[2:], out_shape[1]))
        if total == 0:
            return
        xt, yt = call.scratch(nchw, x.dtype), call.scratch(out_shape, x.dtype)
        x_strides, y_strides = contiguous_strides(x.shape), contiguous_strides(out_shape)
        to_nhwc = [0, *range(2, rank), 1]
        dispatch_gather(call, x, xt, nchw, [x_strides[p] for p in to_nchw])
        call.dispatch(shader, shader_dtype(x), constants, {**members, "x": xt, "y": yt, "indices": None}, groups,
                      [xt], [yt])
        dispatch_gather(call, yt, y, y.shape, [y_strides[p] for p in to_nhwc])


class GlobalPool(Pool):
    """GlobalMaxPool, GlobalAveragePool, GlobalLpPool: a window of all spatial dims."""

    is_global = True


class LRN(Kernel):
    def invalid_attribute(self) -> str | None:
        size = self.attrs.get("size")
        return f"size={size}: it must be positive" if isinstance(size, int) and size <= 0 else None

    def compute(self, call) -> None:
        x = call.inputs[0]
        if len(x.shape) < 2:
            raise UnsupportedError(f"LRN: input {x.shape} has no channel dimension")
        y = call.output(0, x.shape)
        check_size(x.shape)
        if x.size == 0:
            return
        size = self.attrs["size"]
        push = {"x": x, "y": y, "n": x.size, "channels": x.shape[1], "inner": math.prod(x.shape[2:]), "size": size,
                "alpha": self.attrs["alpha"], "beta": self.attrs["beta"], "bias": self.attrs["bias"]}
        self.dispatch_1d(call, x.size, WORKGROUP, shader_dtype(x), push, [x], [y], constants={})


class RoiAlign(Kernel):
    """RoiAlign (opsets 10, 16) as ORT's CPU EP: shaders/roi_align.comp, one thread per output value; opset 10
    (and coordinate_transformation_mode output_half_pixel) does not shift the ROIs by half a pixel and keeps them
    at least a pixel wide, half_pixel does both the other way."""

    MODES = {"avg": 0, "max": 1}

    def __init__(self, *args):
        super().__init__(*args)
        a = self.attrs
        self.mode = self.MODES.get(a.get("mode", "avg"))
        coord = a.get("coordinate_transformation_mode", "half_pixel") if self.since_version >= 16 \
            else "output_half_pixel"
        if self.mode is None or coord not in ("half_pixel", "output_half_pixel"):
            raise UnsupportedError(f"RoiAlign: mode {a.get('mode')!r}, coordinate_transformation_mode {coord!r}")
        self.half_pixel = coord == "half_pixel"

    def compute(self, call) -> None:
        x, rois, batch_indices = call.inputs[:3]
        if len(x.shape) != 4 or rois.shape[1:] != (4,) or batch_indices.shape != rois.shape[:1]:
            raise UnsupportedError(f"RoiAlign: X {list(x.shape)}, rois {list(rois.shape)} and batch_indices "
                                   f"{list(batch_indices.shape)} (X 4-D, rois [n, 4], n batch indices)")
        out_h, out_w = self.attrs.get("output_height", 1), self.attrs.get("output_width", 1)
        y = call.output(0, (rois.shape[0], x.shape[1], out_h, out_w))
        if not y.size or not x.size:
            return
        push = {"x": x, "rois": rois, "batch_indices": batch_indices, "y": y, "n": y.size, "channels": x.shape[1],
                "height": x.shape[2], "width": x.shape[3], "out_h": out_h, "out_w": out_w,
                "sampling_ratio": self.attrs.get("sampling_ratio", 0),
                "spatial_scale": self.attrs.get("spatial_scale", 1.0), "offset": 0.5 if self.half_pixel else 0.0,
                "aligned": int(self.half_pixel)}
        call.dispatch("roi_align.comp", shader_dtype(x), {"mode": self.mode}, push, grid_1d(y.size, WORKGROUP),
                      [x, rois, batch_indices], [y])


class MaxRoiPool(Kernel):
    """MaxRoiPool (ONNX 1; float32) as ORT's CPU EP (roi_pool.cc): shaders/max_roi_pool.comp, one invocation an
    output; an ROI's batch index out of range fails the run (the error word), as the CPU EP's enforce."""

    def compute(self, call) -> None:
        x, rois = call.inputs[:2]
        pooled = list(self.attrs["pooled_shape"])
        scale = self.attrs.get("spatial_scale", 1.0)
        if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 5 or len(pooled) != 2 or min(pooled) <= 0 \
                or not scale > 0:
            raise UnsupportedError(f"MaxRoiPool: X {list(x.shape)}, rois {list(rois.shape)}, pooled_shape {pooled}, "
                                   f"spatial_scale {scale} (X 4-D, rois [n, 5], two positive pooled sizes, a positive "
                                   f"scale: the CPU EP refuses others)")
        n, c, h, w = x.shape
        if window_loops(1, h, w) > LOOP_BUDGET:
            raise UnsupportedError(f"MaxRoiPool: an image of {h} x {w} (a bin may cover it: past one invocation's loops)")
        y = call.output(0, (rois.shape[0], c, *pooled))
        if not y.size:
            return
        push = {"x": x, "rois": rois, "y": y, "err": call.error_word(), "n": y.size, "batch": n, "channels": c,
                "height": h, "width": w, "pooled_h": pooled[0], "pooled_w": pooled[1], "spatial_scale": scale}
        call.dispatch(self.spec.shader, "float32", {}, push, grid_1d(y.size, WORKGROUP), [x, rois], [y])


UNPOOL_WG = 256  # max_unpool.comp's workgroup
CLEAR, CLAIM, WRITE = 0, 1, 2  # max_unpool.comp's modes


class MaxUnpool(Kernel):
    """MaxUnpool: x's elements at the flat output indices I names (as MaxPool's Indices give them), zero elsewhere;
    the output shape from the window attributes or the CPU input output_shape. max_unpool.comp: clear, claim (the
    last element naming an output wins, as the CPU EP's in-order writes), write."""

    def compute(self, call) -> None:
        x, idx = call.inputs[:2]
        n = len(x.shape) - 2
        kernel = list(self.attrs["kernel_shape"])
        if not 1 <= n <= MAX_SPATIAL or len(kernel) != n or idx.shape != x.shape:
            raise UnsupportedError(f"MaxUnpool: X {x.shape}, I {idx.shape}, kernel_shape {kernel}")
        strides = list(self.attrs.get("strides") or [1] * n)
        pads = list(self.attrs.get("pads") or [0] * 2 * n)
        out = x.shape[:2] + tuple((x.shape[2 + d] - 1) * strides[d] - pads[d] - pads[n + d] + kernel[d]
                                  for d in range(n))
        if min(out[2:]) <= 0:
            raise UnsupportedError(f"MaxUnpool: output {out} is not positive")
        given = host_values(call, call.inputs[2]) if len(call.inputs) > 2 and call.inputs[2] is not None else None
        if given is not None:
            if len(given) != len(x.shape) or math.prod(given) < math.prod(out):
                raise UnsupportedError(f"MaxUnpool: output_shape {given} for an inferred {out}")
            out = tuple(given)
        check_size(x.shape, out)
        y = call.output(0, out)
        if not y.size:
            return
        winner = call.scratch((y.size,), "int32")
        push = {"x": x, "idx": idx, "y": y, "winner": winner, "err": call.error_word(), "size": y.size}
        dtype = shader_dtype(x)
        call.dispatch("max_unpool.comp", dtype, {"mode": CLEAR}, {**push, "n": y.size}, grid_1d(y.size, UNPOOL_WG),
                      [], [winner])
        if x.size:
            call.dispatch("max_unpool.comp", dtype, {"mode": CLAIM}, {**push, "n": x.size},
                          grid_1d(x.size, UNPOOL_WG), [idx, winner], [winner])
        call.dispatch("max_unpool.comp", dtype, {"mode": WRITE}, {**push, "n": y.size}, grid_1d(y.size, UNPOOL_WG),
                      [x, winner], [y])
