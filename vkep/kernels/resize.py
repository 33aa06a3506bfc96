"""Resize (opset 10-19): nearest, linear, cubic over any dims (at most 4 after merging identity dims).

Output sizes and per-dim scales are planned on the host from the CPU inputs (scales or sizes, roi) in
float32 like ORT; the shader maps each output coordinate back with the coordinate transformation mode.
"""

from __future__ import annotations

import math

import numpy as np

from vkep.kernels.base import (
    LOOP_BUDGET,
    Kernel,
    UnsupportedError,
    axis_in,
    float_bits,
    grid_1d,
    shader_dtype,
)
from vkep.kernels.movement import WG, _check_size, host_values, optional_input

R = 4
MODES = {"nearest": 0, "linear": 1, "cubic": 2}
ORT_LINEAR = 3  # resize.comp's MODE for linear as the CPU EP computes it (ort_linear_dims)
COORDS = {"half_pixel": 0, "asymmetric": 1, "pytorch_half_pixel": 2, "tf_half_pixel_for_nn": 3, "align_corners": 4,
          "tf_crop_and_resize": 5, "half_pixel_symmetric": 6}
NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}
SIMPLE = 4  # opset 10: floor, or ceil when downsampling
IDENTITY_SAFE = {"half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners", "half_pixel_symmetric"}


def tap_loops(mode: int, antialias: int, dims: list[list]) -> int:
    """Loop steps resize.comp's invocation spends as lavapipe counts them (MODE 0-2, `dims` _plan's [in, out, scale,
    identity, ...] each): the dims' loop, each dim's taps (their weights' sum) and the taps' product, a dims' loop in
    each (leaving passes included). Antialiasing widens a downscaled dim's kernel to 2 support / scale taps: a
    linear Resize of 2,048 x 2,048 to 16 x 16 takes 256 x 256 taps an output (wrong past the loop limit: measured
    longest right, rank 3, one dim 1 / H: H = 5,475 linear, 2,753 cubic; two dims H x H: 57)."""
    rank, taps = len(dims), []
    for _, _, scale, ident, *_ in dims:
        if mode == 0 or ident:
            taps.append(1)
            continue
        s = np.float32(min(scale, 1.0) if antialias else 1.0)
        start = int(np.floor(np.float32(-1.0 if mode == 1 else -2.0) / s)) + 1  # (resize.comp's support)
        taps.append(2 * (1 - start))
    return rank + 2 + sum(t + 1 for t in taps) + math.prod(taps) * (rank + 2)


class Resize(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        """8-bit tensors: nearest sampling only (a copy of the picked values); the CPU EP's 8-bit linear and cubic
        paths round otherwise, and tf_crop_and_resize casts its extrapolation value."""
        if input_types and input_types[0] in ("uint8", "int8"):
            if attrs.get("mode", "nearest") != "nearest":
                return f"Resize of {input_types[0]} in mode {attrs.get('mode')!r} (nearest only)"
            if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
                return f"Resize of {input_types[0]} with tf_crop_and_resize"
        return None

    def __init__(self, *args):
        super().__init__(*args)
        a = self.attrs
        self.mode = a.get("mode", "nearest")
        self.coord = a.get("coordinate_transformation_mode", "half_pixel") if self.since_version >= 11 else "asymmetric"
        if self.mode not in MODES or self.coord not in COORDS:
            raise UnsupportedError(f"Resize: mode {self.mode!r} / {self.coord!r}")
        if self.since_version >= 11:
            nearest = NEAREST.get(a.get("nearest_mode", "round_prefer_floor"))
            if nearest is None:
                raise UnsupportedError(f"Resize: nearest_mode {a.get('nearest_mode')!r}")
        else:
            nearest = SIMPLE
        self.constants = {"mode": MODES[self.mode], "coord": COORDS[self.coord], "nearest": nearest,
                          "exclude_outside": int(a.get("exclude_outside", 0)),
                          "cubic_a": float_bits(a.get("cubic_coeff_a", -0.75)), "antialias": int(a.get("antialias", 0))}

    def scales_input(self, call) -> list[float]:
        """Opset 10's scales (its only way to say the output's size)."""
        return host_values(call, call.inputs[1])

    def _key(self, call) -> tuple:
        return (call.inputs[0].shape,) + tuple(tuple(host_values(call, optional_input(call, i)) or ())
                                                for i in range(1, len(call.inputs)))

    def _plan(self, call) -> tuple:
        shape = call.inputs[0].shape
        rank = len(shape)
        if self.since_version < 11:
            roi, scales, sizes = None, self.scales_input(call), None
        else:
            roi, scales, sizes = (host_values(call, optional_input(call, i)) for i in (1, 2, 3))
        axes = [axis_in(a, rank, "Resize") for a in self.attrs.get("axes") or []] or list(range(rank))
        full_scales = np.ones(rank, np.float32)
        out = list(shape)
        if sizes:
            policy = self.attrs.get("keep_aspect_ratio_policy", "stretch")
            ratios = [np.float32(s) / np.float32(shape[a]) for a, s in zip(axes, sizes, strict=True)]
            if policy == "stretch":
                for a, s, r in zip(axes, sizes, ratios, strict=True):
                    out[a], full_scales[a] = s, r
            else:
                r = np.float32(min(ratios) if policy == "not_larger" else max(ratios))
                for a in axes:
                    full_scales[a] = r
                    # rounding half away from zero, as ONNX's shape inference and ORT (numpy's rounds to even)
                    out[a] = int(np.floor(r * np.float32(shape[a]) + np.float32(0.5)))
        elif scales:
            for a, s in zip(axes, scales, strict=True):
                full_scales[a] = np.float32(s)
                out[a] = int(np.floor(np.float32(s) * np.float32(shape[a])))
        else:
            raise UnsupportedError("Resize needs scales or sizes")
        starts, ends = [0.0] * rank, [1.0] * rank
        if self.coord == "tf_crop_and_resize" and roi:
            for k, a in enumerate(axes):
                starts[a], ends[a] = roi[k], roi[k + len(axes)]
        spatial = self._ort_linear_dims(call.inputs[0].dtype, shape, out, full_scales)
        if spatial:  # (the outer dims are planes: their scales are 1)
            _check_size(out)
            axes_of = range(rank - spatial, rank)
            pad = [1] * (R - spatial)
            members = {"n": math.prod(out), "rank": spatial,
                       "extrapolation": float(self.attrs.get("extrapolation_value", 0.0)),
                       "in_dims": [shape[d] for d in axes_of] + pad, "out_dims": [out[d] for d in axes_of] + pad,
                       "scale": [float(full_scales[d]) for d in axes_of] + [1.0] * (R - spatial),
                       "roi_start": [starts[d] for d in axes_of] + [0.0] * (R - spatial),
                       "roi_end": [ends[d] for d in axes_of] + [1.0] * (R - spatial)}
            return tuple(out), members, ORT_LINEAR
        # merge neighbouring dims that map each coordinate to itself (batch and channel, mostly)
        dims = []
        for d in range(rank):
            ident = (out[d] == shape[d] and full_scales[d] == 1 and starts[d] == 0 and ends[d] == 1
                     and self.coord in IDENTITY_SAFE)
            if dims and ident and dims[-1][3]:
                dims[-1][0] *= shape[d]
                dims[-1][1] *= out[d]
            else:
                dims.append([shape[d], out[d], float(full_scales[d]), ident, starts[d], ends[d]])
        if len(dims) > R:
            raise UnsupportedError(f"Resize of {shape} to {out} interpolates over {len(dims)} > {R} dims")
        _check_size(out)
        if tap_loops(self.constants["mode"], self.constants["antialias"], dims) > LOOP_BUDGET:
            raise UnsupportedError(f"Resize of {shape} to {out}: its taps are past one invocation's loop budget")
        members = {"n": math.prod(out), "rank": len(dims),
                   "extrapolation": float(self.attrs.get("extrapolation_value", 0.0)),
                   "in_dims": [d[0] for d in dims], "out_dims": [d[1] for d in dims], "scale": [d[2] for d in dims],
                   "roi_start": [d[4] for d in dims], "roi_end": [d[5] for d in dims]}
        return tuple(out), members, self.constants["mode"]

    def _ort_linear_dims(self, dtype: str, shape: tuple[int, ...], out: list[int], scales) -> int:
        """How many trailing dims the CPU EP interpolates in ORT's own order (resize.comp MODE 3), or 0: float32
        linear without antialias, as Upsample::BaseCompute picks UpsampleBilinear (2-D, or 4-D with the outer two
        scales 1: the last 2 dims) or UpsampleTrilinear (3-D, or 5-D likewise: the last 3), where the size changes
        (an unchanged size is a copy there). Not tf_crop_and_resize: ORT ignores the crop of a dim whose scale is 1,
        vkep follows ONNX there (test_movement's test_resize_crop_at_scale_one_follows_onnx)."""
        rank = len(shape)
        if (self.mode != "linear" or self.constants["antialias"] or dtype != "float32" or list(shape) == list(out)
                or self.coord == "tf_crop_and_resize"
                or rank not in (2, 3, 4, 5) or (rank > 3 and (scales[0] != 1 or scales[1] != 1))):
            return 0
        return 2 if rank in (2, 4) else 3

    def compute(self, call) -> None:
        x = call.inputs[0]
        out, members, mode = self.planned(self._key(call), lambda: self._plan(call))
        y = call.output(0, out)
        if y.size:
            call.dispatch("resize.comp", shader_dtype(x), {**self.constants, "mode": mode}, {**members, "x": x, "y": y},
                          grid_1d(y.size, WG), [x], [y])


class Upsample(Resize):
    """Upsample (opsets 7, 9): Resize-10 by an older name, its scales an attribute (7) or an input (9). Each scale
    must be at least 1, or ORT's CPU EP fails the run: so does vkep."""

    def scales_input(self, call) -> list[float]:
        scales = self.attrs["scales"] if self.since_version < 9 else host_values(call, call.inputs[1])
        if any(s < 1 for s in scales):
            raise UnsupportedError(f"Upsample: scales {scales}: each must be at least 1")
        return scales
