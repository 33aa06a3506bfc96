"""ONNX GridSample (opsets 16, 20, 22) as one dispatch of grid_sample.comp, one invocation per output element,
and AffineGrid (opset 20), which makes such grids (affine_grid.comp).

X is [N, C, H, W] with a grid of [N, H_out, W_out, 2], or (opset 20+) [N, C, D, H, W] with a grid of
[N, D_out, H_out, W_out, 3]; modes nearest, (bi)linear and (bi)cubic (2-D only), padding zeros, border and
reflection. The shader follows ORT's CPU EP where it and onnx's reference differ: padding applies to each
integer tap, not to the continuous coordinate first (only cubic with border padding tells them apart).
Nodes vkep cannot run (other ranks, mixed or other element types, modes not of the node's opset) are declined, so they stay
on the CPU EP."""

from __future__ import annotations

import math

from vkep.kernels.base import MAX_ELEMENTS, Kernel, Tensor, UnsupportedError, grid_1d, shader_dtype
from vkep.kernels.movement import host_values

WG = 256  # grid_sample.comp's and affine_grid.comp's workgroup size
# the shader's MODE by mode name: opset 16 says bilinear/bicubic, opset 20 renamed them linear/cubic. The other
# opset's names are declined, so ORT's CPU EP rejects such a node with its own message, as without vkep
MODES = {"nearest": 0, "bilinear": 1, "linear": 1, "bicubic": 2, "cubic": 2}
OPSET16_MODES = ("nearest", "bilinear", "bicubic")
OPSET20_MODES = ("nearest", "linear", "cubic")
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
TYPES = ("float32", "float16")


class GridSample(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        mode, padding = attrs.get("mode"), attrs.get("padding_mode")
        if mode not in (OPSET16_MODES if since_version < 20 else OPSET20_MODES):
            return f"mode {mode!r} at opset {since_version}"
        if padding not in PADDINGS:
            return f"padding_mode {padding!r}"
        if attrs.get("align_corners", 0) not in (0, 1):
            return f"align_corners {attrs.get('align_corners')}"
        ranks = (4,) if since_version < 20 else (4, 5)  # volumetric grids arrived with opset 20
        x_rank, grid_rank = (list(input_ranks) + [-1, -1])[:2]
        for name, rank in (("X", x_rank), ("grid", grid_rank)):
            if rank not in ranks + (-1,):
                return f"{name} of rank {rank}"
        if -1 not in (x_rank, grid_rank) and x_rank != grid_rank:
            return f"grid of rank {grid_rank} for X of rank {x_rank}"
        if MODES[mode] == 2 and 5 in (x_rank, grid_rank):
            return "cubic mode on a volumetric (5-D) input"  # the spec and ORT allow cubic in 2-D only
        x_type, grid_type = (list(input_types) + [None, None])[:2]
        if x_type not in TYPES + (None,) or grid_type not in TYPES + (None,):
            return f"element types {x_type} and {grid_type}"
        if None not in (x_type, grid_type) and x_type != grid_type:
            return f"X of {x_type} with a grid of {grid_type}"  # ORT's CPU EP registers T1 == T2 only
        return None

    def compute(self, call) -> None:
        x, grid = call.inputs[:2]
        dtype = shader_dtype(x)
        if grid.dtype != dtype:
            raise UnsupportedError(f"GridSample: X of {dtype} with a grid of {grid.dtype}")
        out, members, dims = self.planned((x.shape, grid.shape), lambda: self._plan(x, grid))
        y = call.output(0, out)
        if y.size == 0:
            return
        constants = {"mode": MODES[self.attrs["mode"]], "padding": PADDINGS[self.attrs["padding_mode"]],
                     "align": int(self.attrs.get("align_corners", 0)), "dims": dims}
        call.dispatch(self.spec.shader, dtype, constants, {**members, "x": x, "grid": grid, "y": y},
                      grid_1d(y.size, WG), [x, grid], [y])

    def _plan(self, x: Tensor, grid: Tensor) -> tuple[tuple[int, ...], dict, int]:
        """(output shape, push members but the tensors, spatial dims) from the shapes alone."""
        rank = len(x.shape)
        if rank not in (4, 5) or (rank == 5 and self.since_version < 20):
            raise UnsupportedError(f"GridSample (opset {self.since_version}): X of rank {rank}")
        dims = rank - 2
        if len(grid.shape) != rank or grid.shape[0] != x.shape[0] or grid.shape[-1] != dims:
            raise UnsupportedError(f"GridSample: grid {grid.shape} for X {x.shape}, expected "
                                   f"[{x.shape[0]}, {', '.join(['*'] * dims)}, {dims}]")
        if dims == 3 and MODES[self.attrs["mode"]] == 2:
            raise UnsupportedError("GridSample: cubic mode on a volumetric (5-D) input")
        n, c = x.shape[:2]
        out = (n, c) + tuple(grid.shape[1:-1])
        points = math.prod(out[2:])
        if x.size == 0 and points and c:
            raise UnsupportedError(f"GridSample: sampling an empty X {x.shape}")  # no pixel to clamp to
        if max(math.prod(out), x.size, grid.size) > MAX_ELEMENTS:
            raise UnsupportedError(f"GridSample: X {x.shape}, grid {grid.shape} (at most {MAX_ELEMENTS} elements)")
        size = list(reversed(x.shape[2:])) + [1] * (3 - dims)  # W, H, D
        return out, {"n": math.prod(out), "channels": c, "points": points, "size": size}, dims


class AffineGrid(Kernel):
    """AffineGrid (opset 20): the sampling grid [N, H, W, 2] (size [N, C, H, W], theta [N, 2, 3]) or [N, D, H, W, 3]
    (size [N, C, D, H, W], theta [N, 3, 4]) of affine_grid.comp, one invocation a point; `size` a CPU input."""

    def compute(self, call) -> None:
        theta = call.inputs[0]
        size = host_values(call, call.inputs[1])
        if len(size) not in (4, 5):
            raise UnsupportedError(f"AffineGrid: size of {len(size)} values (4 or 5)")
        dims = len(size) - 2
        n, spatial = size[0], ([1] + size[2:])[-3:]  # (D, H, W), D 1 in 2-D
        if theta.shape != (n, dims, dims + 1) or n < 0 or min(spatial) <= 0:  # (the CPU EP fails, or reads past theta)
            raise UnsupportedError(f"AffineGrid: theta {theta.shape} for size {size}")
        y = call.output(0, (n, *size[2:], dims))
        if y.size:
            points = y.size // dims
            d, h, w = spatial
            call.dispatch(self.spec.shader, shader_dtype(theta), {},
                          {"theta": theta, "y": y, "n": points, "w": w, "h": h, "d": d, "dims": dims,
                           "align": int(self.attrs["align_corners"] != 0)}, grid_1d(points, WG), [theta], [y])
