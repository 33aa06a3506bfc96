"""Differential fuzzing of the arithmetic families (tests/test_fuzz.py and tests/test_fuzz_ops.py have the
rest): MatMul, Gemm and Einsum with broadcast batches and zero-sized dimensions; the normalizations and LRN;
Resize and GridSample over their modes; quantization (Q/DQ per tensor, per axis and blocked,
DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, QLinearAdd/Mul); the global pools; attention and rotary embeddings (ONNX's and
com.microsoft's); the com.microsoft Gelu and skip-norm compositions, MatMulNBits and GroupQueryAttention.

tests/test_fuzz_ops.py::test_every_manifest_entry_is_fuzzed holds the list of families complete.
"""

from __future__ import annotations

import numpy as np
import pytest
from fuzzing import Case, Family, data, fuzz_family, shape_of

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOATS = ("float32", "float16")
MS = "com.microsoft"
LOOSE = {"rtol": 2e-3, "atol": 2e-4}  # sums of products in another order


def _float(rng) -> str:
    return str(rng.choice(FLOATS))


# ---- products -----------------------------------------------------------------------------------------------

def matmul(rng) -> Case:
    dtype = _float(rng)
    m, k, n = (int(rng.choice([0, 1, 2, 5, 17])) if rng.random() < 0.2 else int(rng.integers(1, 20)) for _ in range(3))
    batch = shape_of(rng, int(rng.integers(0, 3)), high=4)
    a_shape = [d if rng.random() < 0.7 else 1 for d in batch][int(rng.integers(0, len(batch) + 1)):] + [m, k]
    b_shape = [d if rng.random() < 0.7 else 1 for d in batch][int(rng.integers(0, len(batch) + 1)):] + [k, n]
    if rng.random() < 0.2:
        a_shape = [k]
    if rng.random() < 0.2:
        b_shape = [k]
    a, b = data(rng, a_shape, dtype, 1.0), data(rng, b_shape, dtype, 1.0)
    # an empty sum is 0; ORT's CPU EP leaves such an output as its memory was (garbage), so numpy decides
    expect = [np.matmul(a, b)] if k == 0 else None
    if rng.random() < 0.5:  # a weight: prepacked
        return Case("MatMul", 13, [a], consts={"b": b}, tol=LOOSE, expect=expect)
    return Case("MatMul", 13, [a, b], tol=LOOSE, expect=expect)


def gemm(rng) -> Case:
    dtype = _float(rng)
    m, k, n = (int(rng.integers(0 if rng.random() < 0.1 else 1, 20)) for _ in range(3))
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    a = data(rng, [k, m] if ta else [m, k], dtype, 1.0)
    b = data(rng, [n, k] if tb else [k, n], dtype, 1.0)
    attrs = {"transA": ta, "transB": tb}
    if rng.random() < 0.5:
        attrs.update(alpha=float(rng.choice([0.0, 0.5, -2.0])), beta=float(rng.choice([0.0, 1.0, 0.25])))
    inputs, names, consts = [a], ["x0"], {}
    if rng.random() < 0.5:
        consts["b"] = b
        names.append("b")
    else:
        inputs.append(b)
        names.append("x1")
    c_shape = [[], [n], [1, n], [m, 1], [m, n], None][int(rng.integers(0, 6))]
    if c_shape is not None:
        c = data(rng, c_shape, dtype, 1.0)
        if rng.random() < 0.5:
            consts["c"] = c
            names.append("c")
        else:
            inputs.append(c)
            names.append(f"x{len(inputs) - 1}")
    return Case("Gemm", 13, inputs, attrs, consts, names=names, tol=LOOSE)


EQUATIONS = ["ij,jk->ik", "bij,bjk->bik", "bij,bjk->ibk", "ii->i", "ij->ji", "ij->", "i,i->", "i,j->ij",
             "bhqd,bhkd->bhqk", "...ij,...jk->...ik", "ij,ij->ij", "abc->cba", "ijk,k->ij", "ij,kj->ik",
             "bij->bi", "ijk->", "ij,jk", "ba,ab->", "i->i", "bhqk,bhkd->bhqd", "ii", "ik,kj->ji"]


def einsum(rng) -> Case:
    equation = str(rng.choice(EQUATIONS))
    dims = {c: int(rng.integers(0 if rng.random() < 0.05 else 1, 6)) for c in "abcdhijkq"}
    lhs = equation.split("->")[0].split(",")
    if len(lhs) == 2:
        # (no zero-sized letter in a product of two operands: ORT's CPU EP divides by zero on some, a SIGFPE that ends
        # the process: bhqd,bhkd->bhqk with b, h or d 0, ij,kj->ik with j 0; fresh sweeps' seeds 555 and 957)
        dims = {c: max(d, 1) for c, d in dims.items()}
    ell = shape_of(rng, int(rng.integers(0, 3)), high=4)
    shapes = [(ell if term.startswith("...") else []) + [dims[c] for c in term.replace("...", "")] for term in lhs]
    dtype = _float(rng)
    return Case("Einsum", 12, [data(rng, s, dtype, 1.0) for s in shapes], {"equation": equation}, tol=LOOSE)


# ---- normalizations -----------------------------------------------------------------------------------------

def layer_norms(rng) -> Case:
    op = str(rng.choice(["LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"]))
    dtype = _float(rng)
    rank = int(rng.integers(1, 5))
    shape = shape_of(rng, rank, high=9, empty=0.05)
    axis = int(rng.integers(-rank, rank))
    norm_shape = shape[axis:]
    x = data(rng, shape, dtype, float(rng.choice([0.1, 1.0, 30.0])))
    if rng.random() < 0.3:
        x = np.asarray(x + 100, dtype)  # a large mean: one-pass variance loses it
    consts = {"scale": data(rng, norm_shape, dtype, 1.0)}
    attrs = {"axis": axis, "epsilon": float(rng.choice([1e-5, 1e-2]))}
    outputs = 1
    if op == "LayerNormalization":
        if rng.random() < 0.5:
            consts["bias"] = data(rng, norm_shape, dtype, 1.0)
        outputs = int(rng.integers(1, 4))
    if op != "RMSNormalization" and rng.random() < 0.3:
        attrs["stash_type"] = 1
    opset = {"LayerNormalization": 17, "RMSNormalization": 23, "SimplifiedLayerNormalization": 17}[op]
    return Case(op, opset, [x], attrs, consts, outputs=outputs, tol=LOOSE)


def channel_norms(rng) -> Case | None:
    op = str(rng.choice(["BatchNormalization", "InstanceNormalization", "GroupNormalization"]))
    dtype = "float32" if op == "GroupNormalization" else _float(rng)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 7))
    # (no zero-sized dimension in float16 InstanceNormalization: ORT's CPU EP crashes the process on one)
    spatial = shape_of(rng, int(rng.integers(0 if op == "BatchNormalization" else 1, 4)), high=7,
                       empty=0.0 if op == "InstanceNormalization" and dtype == "float16" else 0.1)
    x = data(rng, [n, c] + spatial, dtype, float(rng.choice([0.5, 5.0])))
    eps = float(rng.choice([1e-5, 1e-2]))
    if op == "BatchNormalization":
        consts = {"s": data(rng, [c], dtype), "b": data(rng, [c], dtype),
                  "m": data(rng, [c], dtype), "v": np.asarray(rng.uniform(0.1, 3, c), dtype)}
        return Case(op, 15, [x], {"epsilon": eps}, consts, tol=LOOSE)
    if op == "InstanceNormalization":
        return Case(op, 22, [x], {"epsilon": eps}, {"s": data(rng, [c], dtype), "b": data(rng, [c], dtype)},
                    tol=LOOSE)
    groups = [g for g in range(1, c + 1) if c % g == 0]
    g = int(rng.choice(groups))
    return Case(op, 21, [x], {"epsilon": eps, "num_groups": g},
                {"s": data(rng, [c], dtype), "b": data(rng, [c], dtype)}, tol=LOOSE)


def lrn(rng) -> Case:
    x = data(rng, [int(rng.integers(1, 3)), int(rng.integers(1, 9))] + shape_of(rng, int(rng.integers(0, 3)), high=5),
             _float(rng))
    attrs = {"size": int(rng.integers(1, 6)), "alpha": float(rng.choice([1e-4, 0.5])),
             "beta": float(rng.choice([0.75, 1.0, 0.3])), "bias": float(rng.choice([1.0, 2.0, 0.5]))}
    return Case("LRN", 13, [x], attrs, tol=LOOSE)


def global_pools(rng) -> Case:
    op = str(rng.choice(["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"]))
    spatial = [int(rng.integers(1, 40 if rng.random() < 0.3 else 6)) for _ in range(int(rng.integers(1, 4)))]
    x = data(rng, [int(rng.integers(1, 3)), int(rng.integers(1, 5))] + spatial, _float(rng))
    attrs = {"p": int(rng.integers(1, 4))} if op == "GlobalLpPool" else {}
    return Case(op, 18, [x], attrs, tol=LOOSE)  # (the CPU EP has no GlobalLpPool-22)


# ---- sampling -----------------------------------------------------------------------------------------------

def resize(rng) -> Case | None:
    rank = int(rng.integers(2, 6))
    shape = [int(rng.integers(1, 3)) for _ in range(rank - 2)] + [int(rng.integers(1, 9)) for _ in range(2)]
    mode = str(rng.choice(["nearest", "linear", "cubic"]))
    ctm = str(rng.choice(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                          "asymmetric", "tf_crop_and_resize"]))
    if mode == "nearest" and ctm == "half_pixel_symmetric":
        # on a rounding boundary the CPU EP and onnx.reference pick different pixels (each in some cases);
        # vkep computes ORT's formula (float32, its sum in double): equal to the CPU EP in all but one of
        # 2,500 cases here, which onnx.reference decides vkep's way
        return None
    attrs: dict = {"mode": mode, "coordinate_transformation_mode": ctm}
    if mode == "nearest":
        attrs["nearest_mode"] = str(rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(rng.choice([-0.75, -0.5]))
        attrs["exclude_outside"] = int(rng.integers(0, 2))
    if mode != "nearest" and rng.random() < 0.3:
        attrs["antialias"] = 1
    consts: dict = {}
    names = ["x0", ""]
    if ctm == "tf_crop_and_resize":
        consts["roi"] = np.asarray([0.0] * (rank - 2) + list(rng.uniform(-0.2, 0.5, 2)) + [1.0] * (rank - 2)
                                   + list(rng.uniform(0.5, 1.2, 2)), np.float32)
        names[1] = "roi"
        attrs["extrapolation_value"] = float(rng.choice([0.0, -1.5]))
    scales = [1.0] * (rank - 2) + [float(rng.choice([0.5, 0.6, 1.0, 1.5, 2.0, 3.0, 0.25])) for _ in range(2)]
    if rng.random() < 0.5:
        consts["scales"] = np.asarray(scales, np.float32)
        names.append("scales")
    else:
        consts["sizes"] = np.asarray([d if i < rank - 2 else max(1, int(d * s) + int(rng.integers(-1, 2)))
                                      for i, (d, s) in enumerate(zip(shape, scales, strict=True))], np.int64)
        names += ["", "sizes"]
        if rng.random() < 0.3:
            attrs["keep_aspect_ratio_policy"] = str(rng.choice(["not_larger", "not_smaller"]))
    if ctm == "tf_crop_and_resize":
        # ORT's CPU EP leaves a dimension whose scale is 1 as it is, ignoring its crop (with every scale 1 it
        # returns the input); vkep follows ONNX (and onnx.reference): tests/test_movement.py checks that case
        out = consts["sizes"] if "sizes" in consts else np.floor(np.asarray(shape) * consts["scales"])
        if "keep_aspect_ratio_policy" in attrs or any(o == d for o, d in zip(out[-2:], shape[-2:], strict=True)) \
                or any(s == 1.0 for s in scales[-2:]):
            return None
    x = data(rng, shape, _float(rng))
    return Case("Resize", 19, [x], attrs, consts, names=names, tol={"rtol": 1e-3, "atol": 1e-3})


def grid_sample(rng) -> Case:
    nd = int(rng.integers(2, 4))
    dtype = _float(rng)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    x = data(rng, [n, c] + [int(rng.integers(1, 7)) for _ in range(nd)], dtype)
    out = [int(rng.integers(1, 6)) for _ in range(nd)]
    grid = np.asarray(rng.uniform(-1.3, 1.3, [n] + out + [nd]), dtype)
    attrs = {"mode": str(rng.choice(["linear", "nearest", "cubic"])),
             "padding_mode": str(rng.choice(["zeros", "border", "reflection"])),
             "align_corners": int(rng.integers(0, 2))}
    return Case("GridSample", 20, [x, grid], attrs, tol={"rtol": 2e-3, "atol": 2e-3})


# ---- quantization -------------------------------------------------------------------------------------------

def quantize_linear(rng, domain: str = "") -> Case | None:
    """ONNX's (opset 21) or com.microsoft's (no blocks) QuantizeLinear / DequantizeLinear, 8- or 16-bit."""
    op = str(rng.choice(["QuantizeLinear", "DequantizeLinear"]))
    qtype = str(rng.choice(["int8", "uint8", "int16", "uint16"]))
    ftype = _float(rng)
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank, high=9, empty=0.05)
    granularity = str(rng.choice(["tensor", "axis"] if domain else ["tensor", "axis", "block"]))
    axis = int(rng.integers(-rank, rank))
    attrs: dict = {}
    if granularity == "tensor":
        pshape: list[int] = []
    elif granularity == "axis":
        pshape, attrs["axis"] = [shape[axis]], axis
    else:
        block = int(rng.integers(1, 5))
        pshape = list(shape)
        pshape[axis] = -(-shape[axis] // block)
        attrs.update(axis=axis, block_size=block)
    scale = np.asarray(rng.uniform(0.01, 0.5, pshape), ftype)
    consts = {"s": scale}
    if rng.random() < 0.7:
        consts["z"] = data(rng, pshape, qtype)
    if op == "QuantizeLinear":
        x = np.asarray(rng.standard_normal(shape) * (20 if qtype.endswith("8") else 5000), ftype)
        if x.size:  # exact halves of a step: ties to even
            flat = x.reshape(-1)
            flat[::3] = np.asarray(np.round(rng.standard_normal(flat[::3].shape) * 8) + 0.5, ftype)
    else:
        x = data(rng, shape, qtype)
    return Case(op, 1 if domain else 21, [x], attrs, consts, tol={"rtol": 1e-3, "atol": 1e-3}, domain=domain)


def dynamic_quantize(rng) -> Case:
    shape = shape_of(rng, int(rng.integers(1, 4)), high=9, empty=0.05)
    kind = int(rng.integers(0, 4))
    x = np.asarray(rng.standard_normal(shape) * float(rng.choice([0.01, 1.0, 100.0])), np.float32)
    if kind == 1:
        x = np.abs(x) + 0.5  # all positive: the range still holds 0
    elif kind == 2:
        x = -np.abs(x) - 0.5
    elif kind == 3:
        x = np.zeros(shape, np.float32)
    return Case("DynamicQuantizeLinear", 11, [np.asarray(x, np.float32)], outputs=3)


def _int8_range(dtype: str, mixed: bool) -> tuple[int, int]:
    """Values of an 8-bit operand: int8 multiplied by uint8 stays in [-64, 63], where ORT's AVX2 kernels without
    VNNI do not saturate their pair sums (tests/test_qlinear.py)."""
    if dtype == "uint8":
        return 0, 255
    return (-64, 63) if mixed else (-128, 127)


def _q(rng, shape, dtype: str, mixed: bool = False) -> np.ndarray:
    lo, hi = _int8_range(dtype, mixed)
    return np.asarray(rng.integers(lo, hi + 1, shape), dtype)


def _qscale(rng, shape=()) -> np.ndarray:
    return np.asarray(rng.uniform(0.001, 0.1, shape) * 10 ** rng.uniform(-1, 1), np.float32)


def matmul_integer(rng) -> Case:
    at, bt = str(rng.choice(["uint8", "int8"])), str(rng.choice(["uint8", "int8"]))
    m, k, n = (int(rng.integers(1, 12)) for _ in range(3))
    batch = shape_of(rng, int(rng.integers(0, 2)), high=3, empty=0.0)
    a, b = _q(rng, batch + [m, k], at, at != bt), _q(rng, [k, n], bt, at != bt)
    names, consts = ["x0", "b"], {"b": b}
    if rng.random() < 0.7:
        consts["az"] = data(rng, [], at)
        names.append("az")
    if rng.random() < 0.7:
        consts["bz"] = data(rng, [n] if rng.random() < 0.5 else [], bt)
        names += [""] * (3 - len(names)) + ["bz"]
    return Case("MatMulInteger", 10, [a], consts=consts, names=names)


def qlinear_matmul(rng) -> Case:
    at, bt = [("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")][int(rng.integers(0, 3))]
    mixed = at != bt
    m, k, n = int(rng.integers(0 if rng.random() < 0.1 else 1, 10)), int(rng.integers(1, 40)), int(rng.integers(1, 10))
    batch = shape_of(rng, int(rng.integers(0, 3)), high=3, empty=0.05)
    layout = int(rng.integers(0, 3))  # B shared, A shared, the same batches
    a_shape = ([] if layout == 1 else batch) + [m, k]
    b_shape = ([] if layout == 0 else batch) + [k, n]
    a, b = _q(rng, a_shape, at), _q(rng, b_shape, bt, mixed)
    per_column = rng.random() < 0.5
    pshape = ([n] if len(b_shape) == 2 else b_shape[:-2] + [1, n]) if per_column else []
    a_scale, b_scale = _qscale(rng), _qscale(rng, pshape)
    # an output scale near the products' spread, so that outputs both saturate and do not
    y_scale = np.asarray(a_scale * b_scale.max(initial=0) * np.sqrt(k) * 10 ** rng.uniform(0.5, 3.5), np.float32)
    consts = {"as": a_scale, "az": _q(rng, [], at), "b": b, "bs": b_scale, "bz": _q(rng, pshape, bt, mixed),
              "ys": y_scale, "yz": _q(rng, [], at)}
    opset = int(rng.choice([10, 21]))
    if opset == 21 and rng.random() < 0.3:  # float16 scales
        consts.update({k: consts[k].astype(np.float16) for k in ("as", "bs", "ys")})
    inputs, names = [a], ["x0", "as", "az", "b", "bs", "bz", "ys", "yz"]
    if rng.random() < 0.3:  # B computed at run time
        inputs.append(consts.pop("b"))
        names[3] = "x1"
    return Case("QLinearMatMul", opset, inputs, consts=consts, names=names)


def integer_conv(rng) -> Case | None:
    """ConvInteger and QLinearConv over 1 or 2 spatial dims: groups, strides, dilations, pads, auto_pad."""
    op = str(rng.choice(["ConvInteger", "QLinearConv"]))
    pairs = [("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")] + ([("int8", "uint8")] if op == "ConvInteger" else [])
    xt, wt = pairs[int(rng.integers(0, len(pairs)))]
    mixed = xt != wt
    nd = int(rng.integers(1, 3))
    group, cg, mg = (int(rng.integers(1, 4)) for _ in range(3))
    if rng.random() < 0.2:
        cg, mg = 1, 1  # depthwise
    elif rng.random() < 0.2:
        mg = int(rng.integers(4, 40))  # conv_integer.comp's wider channel blocks, some partly used
    batch = int(rng.integers(0, 3)) if rng.random() < 0.1 else int(rng.integers(1, 3))
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    attrs: dict = {"group": group}
    auto_pad = str(rng.choice(["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]))
    if rng.random() < 0.5:
        attrs["strides"] = [int(rng.integers(1, 3)) for _ in range(nd)]
    if auto_pad == "NOTSET":
        attrs["pads"] = [int(rng.integers(0, 3)) for _ in range(2 * nd)]
    else:
        attrs["auto_pad"] = auto_pad
    if auto_pad in ("NOTSET", "VALID") and rng.random() < 0.4:
        attrs["dilations"] = [int(rng.integers(1, 3)) for _ in range(nd)]
    spatial = [int(rng.integers(1, 9)) for _ in range(nd)]
    x = _q(rng, [batch, cg * group] + spatial, xt, mixed)
    w = _q(rng, [mg * group, cg] + kernel, wt, mixed)
    m = mg * group
    if op == "ConvInteger":
        names, consts = ["x0", "w", "", ""], {"w": w}
        if rng.random() < 0.6:
            consts["xz"] = _q(rng, [], xt, mixed)  # (the padding holds it too: in range as well)
            names[2] = "xz"
        if rng.random() < 0.6:
            consts["wz"] = _q(rng, [], wt, mixed)
            names[3] = "wz"
        while names[-1] == "":
            names.pop()
        return Case(op, 10, [x], attrs, consts, names=names)
    per_channel = rng.random() < 0.5
    w_scale = _qscale(rng, [m] if per_channel else [])
    x_scale = _qscale(rng)
    taps = cg * int(np.prod(kernel))
    y_scale = np.asarray(x_scale * w_scale.max() * np.sqrt(taps) * 10 ** rng.uniform(0.5, 3.5), np.float32)
    # the CPU EP takes one weight zero point for every channel
    w_zp = np.full([m] if per_channel and rng.random() < 0.5 else [], _q(rng, [], wt, mixed), wt)
    consts = {"xs": x_scale, "xz": _q(rng, [], xt), "w": w, "ws": w_scale, "wz": w_zp, "ys": y_scale,
              "yz": _q(rng, [], xt)}
    names = ["x0", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if rng.random() < 0.6:
        consts["bias"] = np.asarray(rng.integers(-20000, 20000, [m]), np.int32)
        names.append("bias")
    return Case(op, 10, [x], attrs, consts, names=names)


def qlinear_binary(rng) -> Case:
    op = str(rng.choice(["QLinearAdd", "QLinearMul"]))
    dtype = str(rng.choice(["uint8", "int8"]))
    out = shape_of(rng, int(rng.integers(0, 5)), high=6, empty=0.05)
    shapes = []
    for _ in range(2):  # each operand: trailing dimensions of the output, some of them 1
        dims = out[int(rng.integers(0, len(out) + 1)):]
        shapes.append([d if rng.random() < 0.7 else 1 for d in dims])
    a, b = (_q(rng, shape, dtype) for shape in shapes)
    consts = {"as": _qscale(rng), "az": _q(rng, [], dtype), "bs": _qscale(rng), "bz": _q(rng, [], dtype),
              "cs": _qscale(rng), "cz": _q(rng, [], dtype)}
    names = ["x0", "as", "az", "x1", "bs", "bz", "cs", "cz"]
    return Case(op, 1, [a, b], consts=consts, names=names, domain=MS)


def _q_params(rng, dtype: str, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}s": _qscale(rng), f"{prefix}z": _q(rng, [], dtype)}


def qlinear_lookup(rng) -> Case:
    """QLinearLeakyRelu / QLinearSigmoid of any shape, or a QLinearConcat of 1 to 4 tensors (16 node inputs at
    most) with parameters of their own."""
    op = str(rng.choice(["QLinearLeakyRelu", "QLinearSigmoid", "QLinearConcat"]))
    dtype = str(rng.choice(["uint8", "int8"]))
    if op != "QLinearConcat":
        attrs = {"alpha": float(rng.uniform(0.0, 0.5))} if op == "QLinearLeakyRelu" and rng.random() < 0.7 else {}
        x = _q(rng, shape_of(rng, int(rng.integers(0, 5)), high=7, empty=0.05), dtype)
        consts = {**_q_params(rng, dtype, "x"), **_q_params(rng, dtype, "y")}
        return Case(op, 1, [x], attrs, consts, names=["x0", "xs", "xz", "ys", "yz"], domain=MS)
    rank = int(rng.integers(1, 5))
    axis = int(rng.integers(-rank, rank))
    ref = shape_of(rng, rank, high=6, empty=0.05)
    inputs, consts, names = [], _q_params(rng, dtype, "y"), ["ys", "yz"]
    for j in range(int(rng.integers(1, 5))):
        shape = list(ref)
        shape[axis] = int(rng.integers(0 if rng.random() < 0.1 else 1, 6))
        inputs.append(_q(rng, shape, dtype))
        consts.update(_q_params(rng, dtype, f"x{j}"))
        names += [f"x{j}", f"x{j}s", f"x{j}z"]
    return Case(op, 1, inputs, {"axis": axis}, consts, names=names, domain=MS)


def qlinear_softmax(rng) -> Case:
    """QLinearSoftmax of rank 1 to 4, any axis (or none), Softmax opset 11 (rows from the axis on), 13 or 15,
    uint8 or int8, constant scales and zero points (a computed X scale stays on the CPU EP)."""
    dtype = str(rng.choice(["uint8", "int8"]))
    rank = int(rng.integers(1, 5))
    x = _q(rng, shape_of(rng, rank, high=7, empty=0.05), dtype)
    attrs = {"opset": int(rng.choice([11, 13, 15]))}
    if rng.random() < 0.8:
        attrs["axis"] = int(rng.integers(-rank, rank))
    y_scale = np.float32(1 / 256) if rng.random() < 0.5 else _qscale(rng)
    consts = {**_q_params(rng, dtype, "x"), "ys": np.asarray(y_scale, np.float32), "yz": _q(rng, [], dtype)}
    return Case("QLinearSoftmax", 1, [x], attrs, consts, names=["x0", "xs", "xz", "ys", "yz"], domain=MS)


def qlinear_pool(rng) -> Case:
    """QLinearGlobalAveragePool over 1 to 3 spatial dims, QLinearAveragePool over 1 or 2 with strides, pads,
    auto_pad, ceil_mode and count_include_pad."""
    dtype = str(rng.choice(["uint8", "int8"]))
    consts = {**_q_params(rng, dtype, "x"), **_q_params(rng, dtype, "y")}
    names = ["x0", "xs", "xz", "ys", "yz"]
    if rng.random() < 0.4:
        x = _q(rng, shape_of(rng, 2, high=4, empty=0.05) + shape_of(rng, int(rng.integers(1, 4)), high=9, empty=0.0),
               dtype)
        return Case("QLinearGlobalAveragePool", 1, [x], {}, consts, names=names, domain=MS)
    n = int(rng.integers(1, 3))
    spatial = shape_of(rng, n, low=2, high=10, empty=0.0)
    kernel = [int(rng.integers(1, d + 1)) for d in spatial]
    attrs: dict = {"kernel_shape": kernel, "strides": [int(rng.integers(1, 3)) for _ in range(n)]}
    if rng.random() < 0.3:
        attrs["auto_pad"] = str(rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
    elif rng.random() < 0.6:
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
    if rng.random() < 0.3:
        attrs["ceil_mode"] = 1
    if rng.random() < 0.5:
        attrs["count_include_pad"] = 1
    x = _q(rng, shape_of(rng, 2, high=4, empty=0.05) + spatial, dtype)
    return Case("QLinearAveragePool", 1, [x], attrs, consts, names=names, domain=MS)


def qgemm(rng) -> Case:
    """QGemm with transA / transB, alpha, a bias of each broadcast, B per tensor or per column, 8-bit or float
    outputs; uint8 A with int8 B kept in [-64, 63] (_int8_range)."""
    at, bt = [("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")][int(rng.integers(0, 3))]
    mixed = at != bt
    m, k, n = int(rng.integers(0 if rng.random() < 0.1 else 1, 10)), int(rng.integers(1, 40)), int(rng.integers(1, 20))
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    a = _q(rng, [k, m] if ta else [m, k], at, mixed)
    cols = [n] if rng.random() < 0.5 else []
    consts = {"as": _qscale(rng), "az": _q(rng, [], at, mixed), "b": _q(rng, [n, k] if tb else [k, n], bt, mixed),
              "bs": _qscale(rng, cols), "bz": _q(rng, cols, bt, mixed)}
    names = ["x0", "as", "az", "b", "bs", "bz"]
    bias = [None, [], [n], [1, n], [m, 1], [m, n]][int(rng.integers(0, 6))]
    if bias is not None:
        consts["c"] = np.asarray(rng.integers(-20000, 20000, bias), np.int32)
    names.append("c" if bias is not None else "")
    if rng.random() < 0.7:
        consts.update(ys=_qscale(rng) * np.float32(10), yz=_q(rng, [], at))
        names += ["ys", "yz"]
    attrs = {"transA": ta, "transB": tb, **({"alpha": float(rng.uniform(0.1, 2))} if rng.random() < 0.4 else {})}
    return Case("QGemm", 1, [a], attrs, consts, names=names, domain=MS)


# ---- attention and rotary embeddings ------------------------------------------------------------------------

def attention(rng) -> Case | None:
    dtype = _float(rng)
    b, qn, kn = int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 7))
    kv_heads = int(rng.integers(1, 3))
    heads = kv_heads * int(rng.integers(1, 3))
    d, dv = int(rng.choice([4, 8])), int(rng.choice([4, 8]))
    attrs: dict = {}
    if rng.random() < 0.5:  # 3-D: heads folded into the last dimension
        q = data(rng, [b, qn, heads * d], dtype, 1.0)
        k = data(rng, [b, kn, kv_heads * d], dtype, 1.0)
        v = data(rng, [b, kn, kv_heads * dv], dtype, 1.0)
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
    else:
        q = data(rng, [b, heads, qn, d], dtype, 1.0)
        k = data(rng, [b, kv_heads, kn, d], dtype, 1.0)
        v = data(rng, [b, kv_heads, kn, dv], dtype, 1.0)
    inputs = [q, k, v]
    if rng.random() < 0.4:
        mask_shape = [[qn, kn], [1, 1, qn, kn], [b, 1, qn, kn], [kn]][int(rng.integers(0, 4))]
        mask = (rng.random(mask_shape) > 0.3) if rng.random() < 0.5 else data(rng, mask_shape, dtype, 1.0)
        inputs.append(np.asarray(mask))
    elif rng.random() < 0.5:
        attrs["is_causal"] = 1
    if rng.random() < 0.3:
        attrs["scale"] = float(rng.choice([0.1, 1.0]))
    if rng.random() < 0.2:
        attrs["softcap"] = float(rng.choice([2.0, 30.0]))
    # (float16: the two EPs round scores, probabilities and sums to float16 in different places, each about 1e-3
    # from float64's answer over values of V near 1 to 3, where float16's ulp is 1e-3 to 2e-3: seed 864 of a fresh
    # sweep, vkep 9.3e-4 and the CPU EP 7.3e-4 from it, 1.6e-3 apart)
    atol = 4e-3 if dtype == "float16" else 1e-3
    return Case("Attention", 23, inputs, attrs, tol={"rtol": 2e-3, "atol": atol})


def rotary(rng) -> Case | None:
    dtype = _float(rng)
    b, s, heads = int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
    d = int(rng.choice([4, 8, 16]))
    rot = int(rng.choice([d, d // 2])) if rng.random() < 0.5 else d
    max_pos = s + int(rng.integers(0, 6))
    cos = np.asarray(np.cos(rng.uniform(0, 6, [max_pos, rot // 2])), dtype)
    sin = np.asarray(np.sin(rng.uniform(0, 6, [max_pos, rot // 2])), dtype)
    interleaved = int(rng.integers(0, 2))
    contrib = rng.random() < 0.4
    if contrib:  # com.microsoft: [batch, seq, hidden] or [batch, heads, seq, head], positions first
        x = data(rng, [b, s, heads * d] if rng.random() < 0.5 else [b, heads, s, d], dtype)
        pos = rng.integers(0, max_pos - s + 1, [b, 1]) + np.arange(s) if rng.random() < 0.7 else \
            np.asarray(rng.integers(0, max_pos - s + 1), np.int64)
        attrs = {"interleaved": interleaved}
        if x.ndim == 3 and rot != d:
            attrs.update(num_heads=heads, rotary_embedding_dim=rot)
        elif rot != d:
            return None
        return Case("RotaryEmbedding", 1, [x], attrs, {"pos": np.asarray(pos, np.int64), "cos": cos, "sin": sin},
                    names=["x0", "pos", "cos", "sin"], domain=MS, tol=LOOSE)
    if rng.random() < 0.5:
        x, attrs = data(rng, [b, heads, s, d], dtype), {}
    else:
        x, attrs = data(rng, [b, s, heads * d], dtype), {"num_heads": heads}
    attrs["interleaved"] = interleaved
    if rot != d:
        attrs["rotary_embedding_dim"] = rot
    pos = np.asarray(rng.integers(0, max_pos, [b, s]), np.int64)
    return Case("RotaryEmbedding", 23, [x], attrs, {"cos": cos, "sin": sin, "pos": pos},
                names=["x0", "cos", "sin", "pos"], tol=LOOSE)


def recurrent(rng) -> Case:
    op = str(rng.choice(["LSTM", "GRU", "RNN"]))
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    dirs = 2 if direction == "bidirectional" else 1
    seq, batch, size, hidden = (int(rng.integers(1, n)) for n in (7, 4, 9, 17))
    scale = 1 / np.sqrt(hidden)  # (framework-scale weights: large ones make long sequences chaotic)
    x = data(rng, [seq, batch, size], "float32", 1.0)
    consts = {"w": np.asarray(rng.uniform(-scale, scale, (dirs, gates * hidden, size)), np.float32),
              "r": np.asarray(rng.uniform(-scale, scale, (dirs, gates * hidden, hidden)), np.float32)}
    names = ["x0", "w", "r"]
    attrs: dict = {"hidden_size": hidden, "direction": direction}
    if rng.random() < 0.6:
        consts["b"] = np.asarray(rng.uniform(-scale, scale, (dirs, 2 * gates * hidden)), np.float32)
    if rng.random() < 0.4:
        consts["lens"] = np.asarray(rng.integers(1, seq + 1, batch), np.int32)
    if rng.random() < 0.4:
        consts["h0"] = data(rng, [dirs, batch, hidden], "float32", 0.5)
    if op == "LSTM" and rng.random() < 0.4:
        consts["c0"] = data(rng, [dirs, batch, hidden], "float32", 0.5)
    if op == "LSTM" and rng.random() < 0.3:
        consts["p"] = data(rng, [dirs, 3 * hidden], "float32", 0.3)
    for slot, name in enumerate(["b", "lens", "h0", "c0", "p"][: {"LSTM": 5, "GRU": 3, "RNN": 3}[op]]):
        if name in consts:
            names += [""] * (3 + slot - len(names)) + [name]
    if rng.random() < 0.3:
        attrs["clip"] = float(rng.choice([0.5, 3.0]))
    if op == "GRU":
        attrs["linear_before_reset"] = int(rng.integers(0, 2))
    if op == "LSTM" and rng.random() < 0.2:
        attrs["input_forget"] = 1
    outputs = int(rng.integers(1, 4 if op == "LSTM" else 3))
    return Case(op, 22, [x], attrs, consts, outputs=outputs, names=names, tol={"rtol": 1e-4, "atol": 1e-5})


# ---- com.microsoft compositions -----------------------------------------------------------------------------

def contrib_gelu_norms(rng) -> Case | None:
    op = str(rng.choice(["FastGelu", "BiasGelu", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"]))
    dtype = _float(rng)
    hidden = int(rng.integers(1, 40))
    lead = shape_of(rng, int(rng.integers(1, 3)), high=5, empty=0.0)
    x = data(rng, lead + [hidden], dtype)
    if op in ("FastGelu", "BiasGelu"):
        if op == "FastGelu" and rng.random() < 0.4:
            return Case(op, 1, [x], domain=MS, tol=LOOSE)
        return Case(op, 1, [x], consts={"bias": data(rng, [hidden], dtype)}, domain=MS, tol=LOOSE)
    # skip as x, or (as the CPU EP takes them) x's last two dims with or without a leading 1: added to every batch
    skip_lead = {0: lead, 1: [1] + lead[1:], 2: lead[1:]}[int(rng.integers(0, 3))] if len(lead) == 2 else lead
    skip = data(rng, skip_lead + [hidden], dtype)
    names, consts = ["x0", "x1", "g"], {"g": data(rng, [hidden], dtype)}
    if op == "SkipLayerNormalization" and rng.random() < 0.6:
        consts["beta"] = data(rng, [hidden], dtype)
        names.append("beta")
    if rng.random() < 0.5:
        consts["bias"] = data(rng, [hidden], dtype)
        names += [""] * ((4 if op == "SkipLayerNormalization" else 3) - len(names)) + ["bias"]
    outputs = int(rng.integers(1, 5 if op == "SkipLayerNormalization" else 4))
    return Case(op, 1, [x, skip], {"epsilon": 1e-5}, consts, outputs=outputs, names=names, domain=MS, tol=LOOSE)


def contrib_unary(rng) -> Case:
    op = str(rng.choice(["Gelu", "QuickGelu"]))
    x = data(rng, shape_of(rng, int(rng.integers(0, 4))), _float(rng))
    attrs = {"alpha": float(rng.choice([1.702, 1.0, -0.5]))} if op == "QuickGelu" and rng.random() < 0.6 else {}
    return Case(op, 1, [x], attrs, domain=MS, tol=LOOSE)


def matmul_nbits(rng) -> Case:
    dtype = "float32"
    bits = int(rng.choice([4, 8]))
    block = int(rng.choice([16, 32, 64, 128]))
    k, n = int(rng.integers(1, 300)), int(rng.integers(1, 40))
    blocks = -(-k // block)
    consts = {"b": np.asarray(rng.integers(0, 256, (n, blocks, block * bits // 8)), np.uint8),
              "scales": np.asarray(rng.uniform(0.01, 0.1, n * blocks), dtype)}
    names = ["x0", "b", "scales"]
    if rng.random() < 0.6:
        consts["zp"] = np.asarray(rng.integers(0, 256, (n, (blocks * bits + 7) // 8)), np.uint8)
        names.append("zp")
    if rng.random() < 0.4:
        consts["bias"] = data(rng, [n], dtype)
        names += [""] * (5 - len(names)) + ["bias"]
    a = data(rng, shape_of(rng, int(rng.integers(0, 3)), high=4, empty=0.0) + [k], dtype, 1.0)
    return Case("MatMulNBits", 1, [a], {"K": k, "N": n, "bits": bits, "block_size": block}, consts, names=names,
                domain=MS, tol={"rtol": 2e-4, "atol": 2e-4})


def matmul_bnb4(rng) -> Case:
    quant_type, block = int(rng.integers(0, 2)), int(rng.choice([16, 32, 64, 128, 256]))
    k, n = int(rng.integers(1, 300)), int(rng.integers(1, 40))
    consts = {"b": np.asarray(rng.integers(0, 256, (n * k + 1) // 2), np.uint8),
              "absmax": np.asarray(rng.uniform(-2.0, 2.0, -(-n * k // block)), "float32")}
    a = data(rng, shape_of(rng, int(rng.integers(0, 3)), high=4, empty=0.0) + [k], "float32", 1.0)
    return Case("MatMulBnb4", 1, [a], {"K": k, "N": n, "block_size": block, "quant_type": quant_type}, consts,
                names=["x0", "b", "absmax"], domain=MS, tol={"rtol": 2e-5, "atol": 2e-5})


def multi_head_attention(rng) -> Case | None:
    dtype = "float32"
    b, s, kv = int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 7))
    heads, d = int(rng.integers(1, 4)), int(rng.choice([4, 8]))
    q = data(rng, [b, s, heads * d], dtype, 1.0)
    k = data(rng, [b, kv, heads * d], dtype, 1.0)
    v = data(rng, [b, kv, heads * d], dtype, 1.0)
    attrs: dict = {"num_heads": heads}
    if rng.random() < 0.3:
        attrs["scale"] = 0.5
    inputs, names = [q, k, v], ["x0", "x1", "x2"]
    if rng.random() < 0.4:
        inputs.append(data(rng, [[1, 1, s, kv], [b, 1, s, kv], [b, heads, s, kv]][int(rng.integers(0, 3))], dtype))
        names += ["", "", "x3"]
    return Case("MultiHeadAttention", 1, inputs, attrs, names=names, domain=MS, tol={"rtol": 2e-3, "atol": 1e-4})


def contrib_attention(rng) -> Case:
    """com.microsoft Attention: packed QKV weights (V of its own size sometimes), bias or none, a mask_index of
    each format, unidirectional, attention_bias, scale and mask_filter_value."""
    b, s, heads = int(rng.integers(1, 3)), int(rng.integers(1, 7)), int(rng.integers(1, 4))
    d = int(rng.choice([4, 8]))
    hidden = heads * d
    sizes = [hidden, hidden, heads * int(rng.choice([4, 8]))] if rng.random() < 0.2 else [hidden] * 3
    x = data(rng, [b, s, hidden], "float32", 1.0)
    consts = {"w": np.asarray(rng.standard_normal((hidden, sum(sizes))) / np.sqrt(hidden), np.float32)}
    names = ["x0", "w"]
    if rng.random() < 0.8:
        consts["b"] = data(rng, [sum(sizes)], "float32", 0.1)
    names.append("b" if "b" in consts else "")
    inputs = [x]
    kind = int(rng.integers(0, 5))
    if kind:
        ends = rng.integers(0 if rng.random() < 0.1 else 1, s + 1, b)
        mask = {1: ends, 2: np.concatenate([ends, rng.integers(0, ends + 1)]),
                3: (np.arange(s)[None, :] < ends[:, None]), 4: rng.random((b, s, s)) < 0.7}[kind]
        inputs.append(np.asarray(mask, np.int32))
        names.append("x1")
    attrs: dict = {"num_heads": heads}
    if rng.random() < 0.3:
        inputs.append(data(rng, [int(rng.choice([1, b])), int(rng.choice([1, heads])), s, s], "float32", 1.0))
        names += [""] * (3 + 2 - len(names)) + [f"x{len(inputs) - 1}"]
    if sizes[2] != hidden:
        attrs["qkv_hidden_sizes"] = sizes
    if rng.random() < 0.3:
        attrs["unidirectional"] = 1
    if rng.random() < 0.2:
        attrs["scale"] = float(rng.uniform(0.1, 1.0))
    if rng.random() < 0.2:
        attrs["mask_filter_value"] = float(rng.choice([-1e4, -1e3, -3e4]))
    return Case("Attention", 1, inputs, attrs, consts, names=names, domain=MS, tol={"rtol": 1e-3, "atol": 1e-4})


def group_query_attention(rng) -> Case | None:
    """A prompt or a decode step, padded or not: packed or not, a past of the exact length, longer or empty, rotary (with
    position_ids), scale, softcap, local window or bidirectional, smooth softmax or head_sink, attention_bias (ORT's CPU EP wants head sizes and
    rotary halves in multiples of 8, and a batch of 1 for a prompt after a past)."""
    dtype = _float(rng)
    kv_heads = int(rng.integers(1, 3))
    heads, d = kv_heads * int(rng.integers(1, 3)), int(rng.choice([8, 16, 32]))
    seq = int(rng.integers(1, 5))
    past = 0 if rng.random() < 0.4 else int(rng.integers(1, 9))
    b = 1 if past and seq > 1 else int(rng.integers(1, 3))
    total = past + seq
    # a cache of the past's length, or a static one (ORT: at least the total length)
    buffer = None if not past and rng.random() < 0.5 else past if rng.random() < 0.6 else total + int(rng.integers(0, 3))
    packed = rng.random() < 0.3
    width = (heads + 2 * kv_heads) * d if packed else heads * d
    inputs, names = [data(rng, [b, seq, width], dtype, 1.0)], ["x0", "", ""]
    if not packed:
        inputs += [data(rng, [b, seq, kv_heads * d], dtype, 1.0) for _ in range(2)]
        names[1:] = ["x1", "x2"]
    if buffer is not None:
        for _ in range(2):
            cache = data(rng, [b, kv_heads, buffer, d], dtype, 1.0)
            cache[:, :, past:] = 0  # ORT's CPU EP leaves rows past the total as they were (zeros here)
            names.append(f"x{len(inputs)}")
            inputs.append(cache)
    else:
        names += ["", ""]
    lengths = np.full(b, total, np.int32)
    if b > 1 and rng.random() < 0.4:  # padding: rows of other lengths, the longest total_sequence_length
        lengths[1:] = rng.integers(max(1, total - seq + 1) if past else 1, total + 1, b - 1)
        rng.shuffle(lengths)
    for value in (lengths - 1, np.array(total, np.int32)):
        names.append(f"x{len(inputs)}")
        inputs.append(value)
    attrs: dict = {"num_heads": heads, "kv_num_heads": kv_heads}
    extra: list[tuple[int, np.ndarray]] = []
    if d >= 16 and rng.random() < 0.4:
        rot = int(rng.choice([16, d]))
        angles = np.arange(total + 2)[:, None] * rng.uniform(0.01, 1.0, rot // 2)[None, :]
        extra += [(7, np.cos(angles).astype(dtype)), (8, np.sin(angles).astype(dtype))]
        attrs.update(do_rotary=1, rotary_interleaved=int(rng.integers(0, 2)))
        if rng.random() < 0.3:
            extra.append((9, rng.integers(0, total + 3 - seq, (b, seq)).astype(np.int64)))  # ORT: in the caches
    if rng.random() < 0.3:
        extra.append((10, data(rng, [[1, 1, seq, total], [b, heads, seq, total]][int(rng.integers(0, 2))], dtype)))
    if rng.random() < 0.2:
        extra.append((11, data(rng, [heads], dtype, 1.0)))
    elif rng.random() < 0.2:
        attrs["smooth_softmax"] = 1
    for name, p, value in (("scale", 0.3, 0.2), ("softcap", 0.2, 3.0), ("local_window_size", 0.3, 2)):
        if rng.random() < p:
            attrs[name] = value
    if "local_window_size" not in attrs and rng.random() < 0.15:
        attrs["causal"] = 0
    for index, value in extra:
        names += [""] * (index - len(names)) + [f"x{len(inputs)}"]
        inputs.append(value)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == "float16" else {"rtol": 2e-3, "atol": 1e-4}
    return Case("GroupQueryAttention", 1, inputs, attrs, names=names, domain=MS, outputs=3, tol=tol)


FAMILIES: dict[Family, tuple[str, ...]] = {
    matmul: ("MatMul",), gemm: ("Gemm",), einsum: ("Einsum",),
    layer_norms: ("LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"),
    channel_norms: ("BatchNormalization", "InstanceNormalization", "GroupNormalization"), lrn: ("LRN",),
    global_pools: ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"),
    resize: ("Resize",), grid_sample: ("GridSample",),
    quantize_linear: ("QuantizeLinear", "DequantizeLinear"), dynamic_quantize: ("DynamicQuantizeLinear",),
    matmul_integer: ("MatMulInteger",), qlinear_matmul: ("QLinearMatMul",),
    integer_conv: ("ConvInteger", "QLinearConv"), qlinear_binary: ("QLinearAdd", "QLinearMul"),
    qlinear_lookup: ("QLinearLeakyRelu", "QLinearSigmoid", "QLinearConcat"),
    qlinear_pool: ("QLinearGlobalAveragePool", "QLinearAveragePool"), qgemm: ("QGemm",),
    qlinear_softmax: ("QLinearSoftmax",),
    contrib_attention: ("Attention",),
    attention: ("Attention",), rotary: ("RotaryEmbedding",),
    contrib_gelu_norms: ("FastGelu", "BiasGelu", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"),
    recurrent: ("LSTM", "GRU", "RNN"), contrib_unary: ("Gelu", "QuickGelu"), matmul_nbits: ("MatMulNBits",),
    matmul_bnb4: ("MatMulBnb4",),
    multi_head_attention: ("MultiHeadAttention",), group_query_attention: ("GroupQueryAttention",),
}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_family_matches_cpu_ep(ep_devices, family):
    fuzz_family(family, FAMILIES[family])
