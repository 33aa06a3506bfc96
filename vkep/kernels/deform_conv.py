"""DeformConv (ONNX 19, 22; float32) as ORT 1.32's CPU EP computes it (core/providers/cpu/nn/deform_conv.cc): torchvision's
deform_conv2d as exported, offsets, an optional mask (modulated, v2), group, offset_group, dilations, pads, strides,
bias. shaders/deform_conv.comp: the deformable im2col into scratch (ORT's bilinear plan, order of sums and out-of-range
rule); then W x col per image and group through the MatMul kernel (matmul.product: its tiles and split-K), then + B
(deform_conv.comp's MODE 1), as the CPU EP adds it after its GEMM. What the CPU EP refuses (shapes that do not
agree, a negative output size, non-positive strides, dilations, groups) is an UnsupportedError here: declined at
GetCapability where the shapes are known, the CPU EP's failure otherwise."""

from __future__ import annotations

import math

from vkep.kernels import matmul
from vkep.kernels.base import MAX_ELEMENTS, Kernel, UnsupportedError, grid_1d

WG = 64  # deform_conv.comp's workgroup


def _pair(values, default: int, what: str) -> list[int]:
    if not values:
        return [default] * 2
    if len(values) != 2:
        raise UnsupportedError(f"DeformConv: {what} {list(values)} (2 values for a 2-D DeformConv)")
    return list(values)


class DeformConv(Kernel):
    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if any(r not in (None, -1, 4) for i, r in enumerate(input_ranks) if i in (0, 1, 2, 4)):
            return f"inputs of ranks {list(input_ranks)} (X, W, offset and mask are 4-D)"
        if len(input_ranks) > 3 and input_ranks[3] not in (None, -1, 1):
            return f"a bias of rank {input_ranks[3]}"
        if attrs.get("pads") and (len(attrs["pads"]) != 4 or min(attrs["pads"]) < 0):
            return f"pads {attrs['pads']}"
        for name in ("strides", "dilations"):
            if attrs.get(name) and (len(attrs[name]) != 2 or min(attrs[name]) <= 0):
                return f"{name} {attrs[name]}"
        if attrs.get("group", 1) <= 0 or attrs.get("offset_group", 1) <= 0:
            return f"group {attrs.get('group')}, offset_group {attrs.get('offset_group')}"
        return None

    def _plan(self, xs, ws, offs, bs, ms) -> tuple:
        """(output shape, deform_conv.comp's members but the tensors, col shape, the product's matmul members), after
        the CPU EP's checks (DeformConvValidateAndParse)."""
        if len(xs) != 4 or len(ws) != 4 or len(offs) != 4:
            raise UnsupportedError(f"DeformConv: X {xs}, W {ws}, offset {offs} (each 4-D)")
        a = self.attrs
        n, c, h, w = xs
        m, kh, kw = ws[0], ws[2], ws[3]
        if a.get("kernel_shape") and list(a["kernel_shape"]) != [kh, kw]:
            raise UnsupportedError(f"DeformConv: kernel_shape {a['kernel_shape']} for W {ws}")
        pads = list(a.get("pads") or [0, 0, 0, 0])
        (sh, sw), (dh, dw) = _pair(a.get("strides"), 1, "strides"), _pair(a.get("dilations"), 1, "dilations")
        group, offset_group = a.get("group", 1), a.get("offset_group", 1)

        def out_size(size, begin, end, k, d, s):  # C++'s int64 division (truncates toward zero)
            num = size + begin + end - d * (k - 1) - 1
            return (-(-num // s) if num < 0 else num // s) + 1

        oh, ow = out_size(h, pads[0], pads[2], kh, dh, sh), out_size(w, pads[1], pads[3], kw, dw, sw)
        taps = kh * kw
        problems = [oh < 0 or ow < 0, c <= 0, m <= 0, ws[1] <= 0, kh <= 0, kw <= 0,
                    tuple(offs) != (n, offset_group * 2 * taps, oh, ow), c % offset_group != 0,
                    c != ws[1] * group, m % group != 0,
                    bs is not None and tuple(bs) != (m,),
                    ms is not None and tuple(ms) != (n, offset_group * taps, oh, ow)]
        if any(problems):
            raise UnsupportedError(f"DeformConv: X {xs}, W {ws}, offset {offs}, B {bs}, mask {ms} with group {group}, "
                                   f"offset_group {offset_group}: output {oh} x {ow} (the CPU EP refuses these too)")
        col = (n, c * taps, oh * ow)
        if math.prod(col) > MAX_ELEMENTS:
            raise UnsupportedError(f"DeformConv: a deformable im2col of {col} elements")
        members = {"channels": c, "height": h, "width": w, "kh": kh, "kw": kw, "out_h": oh, "out_w": ow,
                   "pad_h": pads[0], "pad_w": pads[1], "stride_h": sh, "stride_w": sw, "dil_h": dh, "dil_w": dw,
                   "offset_groups": offset_group, "out_channels": m, "groups": group}
        k, rows, pixels = c // group * taps, m // group, oh * ow
        # y [n, g] [M/g, oH oW] = W[g] [M/g, K] x col[n, g] [K, oH oW], the batch index (n, g)
        product = matmul.product_members(rows, pixels, k, batch_inner=group, a=(0, rows * k, k, 1),
                                         b=(group * k * pixels, k * pixels, pixels, 1))
        return (n, m, oh, ow), members, col, product

    def compute(self, call) -> None:
        x, wt, off = call.inputs[:3]
        bias = call.inputs[3] if len(call.inputs) > 3 else None
        mask = call.inputs[4] if len(call.inputs) > 4 else None
        shapes = (x.shape, wt.shape, off.shape, None if bias is None else bias.shape,
                  None if mask is None else mask.shape)
        out, members, col_shape, product = self.planned(shapes, lambda: self._plan(*shapes))
        y = call.output(0, out)
        if y.size == 0:
            return
        col = call.scratch(col_shape, "float32")
        call.dispatch(self.spec.shader, "float32", {"mode": 0, "mask": int(mask is not None)},
                      {**members, "src": x, "aux": off, "extra": mask, "dst": col, "n": col.size},
                      grid_1d(col.size, WG), [x, off] + ([mask] if mask is not None else []), [col])
        group = self.attrs.get("group", 1)
        products = y.view(0, (out[0] * group, out[1] // group, out[2] * out[3]))
        matmul.product(self, call, wt, col, products, product, out[0] * group)
        if bias is not None:
            call.dispatch(self.spec.shader, "float32", {"mode": 1},
                          {**members, "src": None, "aux": None, "extra": bias, "dst": y, "n": y.size},
                          grid_1d(y.size, WG), [y, bias], [y])
