"""com.microsoft CropAndResize (float32 X and boxes, int32 box indices, crop_size a CPU input) as ORT 1.32's contrib
kernel computes it (contrib_ops/cpu/crop_and_resize.cc): shaders/crop_and_resize.comp, one invocation an output. A box
index outside the batch fails the run (the CPU EP reads past X there: no answer to match)."""

from __future__ import annotations

from vkep.kernels.base import Kernel, UnsupportedError, grid_1d
from vkep.kernels.movement import host_values

WG = 64  # crop_and_resize.comp's workgroup
MODES = {"bilinear": 0, "nearest": 1}


class CropAndResize(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        mode = attrs.get("mode", "bilinear")
        if not isinstance(mode, str) or mode.lower() not in MODES:
            return f"mode {mode!r} (the CPU EP takes bilinear and nearest)"
        return None

    def compute(self, call) -> None:
        x, rois, idx, size = call.inputs[:4]
        crop = host_values(call, size)
        if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 4 or len(idx.shape) != 1 \
                or idx.shape[0] != rois.shape[0] or len(size.shape) != 1 or len(crop) < 2 or min(crop[:2]) < 0:
            raise UnsupportedError(f"CropAndResize: X {list(x.shape)}, rois {list(rois.shape)}, box indices "
                                   f"{list(idx.shape)}, crop_size {crop} (X 4-D, rois [n, 4], n indices, 2 sizes: "
                                   f"the CPU EP refuses others)")
        n, c, h, w = x.shape
        y = call.output(0, (rois.shape[0], c, crop[0], crop[1]))
        if not y.size:
            return
        mode = MODES[self.attrs.get("mode", "bilinear").lower()]
        push = {"x": x, "rois": rois, "batch_indices": idx, "y": y, "err": call.error_word(), "n": y.size,
                "batch": n, "channels": c, "height": h, "width": w, "crop_h": crop[0], "crop_w": crop[1],
                "extrapolation_value": self.attrs.get("extrapolation_value", 0.0)}
        call.dispatch(self.spec.shader, "float32", {"mode": mode}, push, grid_1d(y.size, WG), [x, rois, idx], [y])
