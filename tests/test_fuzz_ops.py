"""Differential fuzzing, continued (tests/test_fuzz.py has elementwise ops, axes, windows and data movement):
one family of manifest entries per test — casts and clips, scans and selections (CumSum, CumProd, TopK),
Split and Trilu, GatherND and the scatters, views, shape ops and Range — with random shapes (zero-sized
dimensions too), attributes, types and values, on vkep and on ORT's CPU EP; every output must agree.

Each family names the ops it covers; the family's test also fails if none of its cases of an op ran on
vkep (by ORT's assignment record), so a fuzzer that vkep declines wholesale cannot pass vacuously.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from fuzzing import INTS, TYPES, Case, Family, data, fuzz_family, shape_of
from test_fuzz_math import quantize_linear
from test_moe import moe_experts

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# ---- casts, clips, shifts -----------------------------------------------------------------------------------

def cast(rng) -> Case:
    src, dst = str(rng.choice(TYPES)), str(rng.choice(TYPES))
    shape = shape_of(rng, int(rng.integers(0, 4)))
    if src.startswith("float") and dst not in ("float32", "float16", "bool"):
        # a float outside the integer's range (or NaN) converts as C++ leaves undefined: stay inside it
        info = np.iinfo(dst)
        x = np.asarray(rng.uniform(max(info.min, -1e6), min(info.max, 1e6), shape), src)
        x = np.asarray(np.where(rng.random(shape) < 0.2, np.round(x) + 0.5, x), src)  # exact halves: truncation
    elif src.startswith("float"):
        x = np.asarray(rng.standard_normal(shape) * float(rng.choice([1.0, 1e3, 1e5])), src)
        x[rng.random(shape) < 0.1] = float(rng.choice([np.nan, np.inf, -np.inf, -0.0, 1e-40, 65520.0]))
    elif src == "bool":
        x = np.asarray(rng.random(shape) > 0.5)
    else:
        info = np.iinfo(src)
        x = np.asarray(rng.integers(info.min, int(info.max) + 1, size=shape, dtype=src))  # narrowing wraps, as in C++
    if rng.random() < 0.3:  # CastLike: to the type of a second input, whose values are not read
        return Case("CastLike", 21, [x, np.zeros([int(rng.integers(1, 3))], dst)], {})
    return Case("Cast", 21, [x], {"to": int(onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dst)))})


def clip(rng) -> Case:
    dtype = str(rng.choice(("float32", "float16") + INTS))
    x = data(rng, shape_of(rng, int(rng.integers(0, 4))), dtype)
    inputs, names, consts = [x], ["x0"], {}
    for bound in ("lo", "hi"):
        kind = rng.integers(0, 3)  # absent, a constant, a graph input
        value = data(rng, [], dtype, scale=2.0)
        if kind == 1:
            consts[bound] = value
        elif kind == 2:
            inputs.append(value)
        names.append(("", bound, f"x{len(inputs) - 1}")[kind])
    while names[-1] == "":
        names.pop()
    return Case("Clip", 13, inputs, consts=consts, names=names)


def bitshift(rng) -> Case:
    dtype = "uint8"
    shape = shape_of(rng, int(rng.integers(0, 3)))
    x = np.asarray(rng.integers(0, 256, size=shape), dtype)
    y = np.asarray(rng.integers(0, 8, size=shape[int(rng.integers(0, len(shape) + 1)):]), dtype)  # shifts < width
    return Case("BitShift", 11, [x, y], {"direction": str(rng.choice(["LEFT", "RIGHT"]))})


# ---- scans and selections -----------------------------------------------------------------------------------

def cumulative(rng) -> Case:
    op = str(rng.choice(["CumSum", "CumProd"]))
    dtype = str(rng.choice(["float32", "float16", "int32", "int64"]))
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank, high=6)
    x = data(rng, shape, dtype, scale=1.0) if op == "CumSum" else rng.choice([-2, -1, 1, 2], shape).astype(dtype)
    if op == "CumProd" and dtype.startswith("float"):
        x = (x * rng.uniform(0.5, 1.5, shape)).astype(dtype)
    axis = np.array(int(rng.integers(-rank, rank)), str(rng.choice(["int32", "int64"])))
    attrs = {"exclusive": int(rng.integers(0, 2)), "reverse": int(rng.integers(0, 2))}
    return Case(op, 26 if op == "CumProd" else 14, [x], attrs, {"axis": axis}, tol={"rtol": 1e-3, "atol": 1e-4})


def topk(rng) -> Case:
    dtype = str(rng.choice(["float32", "float16", "int32", "int64"]))
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank, high=7)
    axis = int(rng.integers(-rank, rank))
    # few distinct values, so ties are common: the CPU EP keeps the lower index first
    x = rng.integers(-3, 4, size=shape).astype(dtype) if rng.random() < 0.5 else data(rng, shape, dtype)
    k = np.array([int(rng.integers(0, shape[axis] + 1))], np.int64)
    return Case("TopK", 11, [x], {"axis": axis, "largest": int(rng.integers(0, 2)), "sorted": 1}, {"k": k},
                outputs=2)


# ---- Split, Trilu, SpaceToDepth ------------------------------------------------------------------------------

def split(rng) -> Case | None:
    dtype = str(rng.choice(TYPES))
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank, high=7)
    axis = int(rng.integers(-rank, rank))
    x = data(rng, shape, dtype)
    n = int(rng.integers(1, 4))
    if rng.random() < 0.5:
        if shape[axis] < n:
            return None
        return Case("Split", 18, [x], {"axis": axis, "num_outputs": n}, outputs=n)
    cuts = np.sort(rng.integers(0, shape[axis] + 1, n - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [shape[axis]]])).astype(np.int64)
    return Case("Split", 18, [x], {"axis": axis}, {"split": sizes}, outputs=n)


def trilu(rng) -> Case:
    dtype = str(rng.choice(TYPES))
    x = data(rng, shape_of(rng, int(rng.integers(2, 5)), high=6), dtype)
    consts = {"k": np.array(int(rng.integers(-6, 7)), np.int64)} if rng.random() < 0.7 else {}
    return Case("Trilu", 14, [x], {"upper": int(rng.integers(0, 2))}, consts)


def space_to_depth(rng) -> Case:
    b = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 3)), int(rng.integers(1, 4)), b * int(rng.integers(0, 4)), b * int(rng.integers(1, 4))]
    if rng.random() < 0.5:  # (opset 28: either order of the block's offsets and the channels)
        return Case("SpaceToDepth", 28, [data(rng, shape, str(rng.choice(TYPES)))],
                    {"blocksize": b, "mode": str(rng.choice(["DCR", "CRD"]))})
    return Case("SpaceToDepth", 13, [data(rng, shape, str(rng.choice(TYPES)))], {"blocksize": b})


# ---- GatherND and the scatters -------------------------------------------------------------------------------

def gather_nd(rng) -> Case | None:
    rank = int(rng.integers(1, 5))
    shape = shape_of(rng, rank, high=5, empty=0.05)
    batch = int(rng.integers(0, rank))
    k = int(rng.integers(1, rank - batch + 1))
    dims = shape[batch:batch + k]
    if 0 in dims:
        return None
    extra = shape_of(rng, int(rng.integers(0, 3)), high=4)
    idx = np.stack([rng.integers(-d, d, size=shape[:batch] + extra) for d in dims], axis=-1).astype(np.int64)
    x = data(rng, shape, str(rng.choice(TYPES)))
    return Case("GatherND", 13, [x], {"batch_dims": batch}, {"i": idx})


def scatter_elements(rng) -> Case | None:
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank, high=5, empty=0.05)
    axis = int(rng.integers(-rank, rank))
    if shape[axis] == 0:
        return None
    # a third of the cases: the opsets before reduction (Scatter at 9 and 10, then ScatterElements 11 and 13)
    opset = int(rng.choice([9, 10, 11, 13])) if rng.random() < 0.35 else 18
    reduction = "none" if opset < 18 else str(rng.choice(["none", "add", "mul", "max", "min"]))
    dtype = str(rng.choice(["float32", "float16", "int32", "int64"] if reduction != "none" else TYPES))
    ishape = [int(rng.integers(0, d + 1)) for d in shape]
    # along the axis: distinct positions per line (duplicates are undefined for "none"), else random
    n = shape[axis]
    idx = np.moveaxis(np.argsort(rng.random(np.moveaxis(np.zeros(ishape), axis, -1).shape[:-1] + (n,)), axis=-1)
                      [..., :ishape[axis]], -1, axis)
    if reduction != "none":
        idx = rng.integers(0, n, size=ishape)
    idx = np.where(rng.random(idx.shape) < 0.3, idx - n, idx).astype(str(rng.choice(["int32", "int64"])))
    x = data(rng, shape, dtype, scale=1.0)
    u = data(rng, ishape, dtype, scale=1.0)
    op = "Scatter" if opset < 11 else "ScatterElements"
    attrs = {"axis": axis, "reduction": reduction} if opset == 18 else {"axis": axis}
    return Case(op, opset, [x, u], attrs, {"i": idx}, names=["x0", "i", "x1"], tol={"rtol": 1e-3, "atol": 1e-4})



def tensor_scatter(rng) -> Case | None:
    """A cache [B, ..., max_seq, ...] and an update of seq <= max_seq rows along an axis past the batch's, written
    from in-range write_indices (linear) or any (circular: they wrap)."""
    rank = int(rng.integers(2, 5))
    shape = shape_of(rng, rank, high=6, empty=0.05)
    axis = int(rng.integers(1, rank))
    if shape[axis] == 0:
        return None
    mode = str(rng.choice(["linear", "circular"]))
    seq = int(rng.integers(0, shape[axis] + 1))
    update_shape = shape[:axis] + [seq] + shape[axis + 1:]
    high = shape[axis] - seq + 1 if mode == "linear" else 3 * shape[axis]
    write = rng.integers(0, high, shape[0]).astype(np.int64)
    dtype = str(rng.choice(TYPES))
    inputs = [data(rng, shape, dtype), data(rng, update_shape, dtype)]
    if rng.random() < 0.2:  # no write_indices: from row 0
        return Case("TensorScatter", 24, inputs, {"axis": axis, "mode": mode})
    return Case("TensorScatter", 24, inputs + [write], {"axis": axis - rank if rng.random() < 0.5 else axis,
                                                         "mode": mode})

def scatter_nd(rng) -> Case | None:
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank, high=5, empty=0.0)
    k = int(rng.integers(1, rank + 1))
    # a third of the cases: the opsets before reduction (Scatter at 9 and 10, then ScatterElements 11 and 13)
    opset = int(rng.choice([9, 10, 11, 13])) if rng.random() < 0.35 else 18
    reduction = "none" if opset < 18 else str(rng.choice(["none", "add", "mul", "max", "min"]))
    dtype = str(rng.choice(["float32", "float16", "int32", "int64"] if reduction != "none" else TYPES))
    lead = shape_of(rng, int(rng.integers(0, 3)), high=4, empty=0.0)
    count = int(np.prod(lead))
    space = int(np.prod(shape[:k]))
    if reduction == "none" and count > space:
        return None
    flat = rng.permutation(space)[:count] if reduction == "none" else rng.integers(0, space, count)
    idx = np.stack(np.unravel_index(flat, shape[:k]), axis=-1).reshape(lead + [k]).astype(np.int64)
    idx = np.where(rng.random(idx.shape) < 0.3, idx - np.array(shape[:k]), idx)
    x = data(rng, shape, dtype, scale=1.0)
    u = data(rng, lead + shape[k:], dtype, scale=1.0)
    return Case("ScatterND", 18, [x, u], {"reduction": reduction}, {"i": idx}, names=["x0", "i", "x1"],
                tol={"rtol": 1e-3, "atol": 1e-4})


# ---- views and shape ops -------------------------------------------------------------------------------------

def view(rng) -> Case | None:
    op = str(rng.choice(["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"]))
    rank = int(rng.integers(0 if op in ("Reshape", "Identity", "Unsqueeze") else 1, 5))
    shape = shape_of(rng, rank, high=4)
    dtype = str(rng.choice(("float32", "float16") if op == "Dropout" else TYPES))
    x = data(rng, shape, dtype)
    if op == "Reshape":
        target = [int(d) for d in rng.permutation(shape)] if shape else []
        allowzero = int(rng.integers(0, 2))
        if target and rng.random() < 0.5:
            target[int(rng.integers(0, len(target)))] = -1
        if target and not allowzero and rng.random() < 0.5:
            i = int(rng.integers(0, min(len(target), rank)))
            if target[i] == shape[i]:
                target[i] = 0
        return Case(op, 21, [x], {"allowzero": allowzero}, {"s": np.array(target, np.int64)})
    if op == "Flatten":
        return Case(op, 21, [x], {"axis": int(rng.integers(-rank, rank + 1))})
    if op == "Squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        axes = [i - rank if rng.random() < 0.5 else i for i in ones if rng.random() < 0.6]
        return Case(op, 21, [x], consts={"a": np.array(axes, np.int64)} if axes or rng.random() < 0.5 else {})
    if op == "Unsqueeze":
        n = int(rng.integers(1, 3))
        axes = rng.choice(rank + n, n, replace=False)
        axes = [int(a) - (rank + n) if rng.random() < 0.5 else int(a) for a in axes]
        return Case(op, 21, [x], consts={"a": np.array(axes, np.int64)})
    if op == "Dropout":
        consts = {"r": np.array(rng.uniform(0, 0.9), np.float32)} if rng.random() < 0.5 else {}
        return Case(op, 13, [x], consts=consts, outputs=int(rng.integers(1, 3)))
    return Case(op, 21, [x])


def shape_ops(rng) -> Case | None:
    op = str(rng.choice(["Shape", "Size", "ConstantOfShape", "Range"]))
    if op in ("Shape", "Size"):
        rank = int(rng.integers(0, 5))
        x = data(rng, shape_of(rng, rank), str(rng.choice(TYPES)))
        attrs = {}
        if op == "Shape" and rng.random() < 0.6:
            attrs = {"start": int(rng.integers(-rank - 2, rank + 3)), "end": int(rng.integers(-rank - 2, rank + 3))}
        return Case(op, 21, [x], attrs, symbolic=True)
    if op == "ConstantOfShape":
        dtype = str(rng.choice(TYPES))
        shape = np.array(shape_of(rng, int(rng.integers(0, 4))), np.int64)
        value = onnx.numpy_helper.from_array(data(rng, [1], dtype), "value")
        return Case(op, 21, [shape], {"value": value} if rng.random() < 0.8 else {})
    dtype = str(rng.choice(["float32", "int32", "int64"]))
    start, delta = data(rng, [], dtype, 5.0), data(rng, [], dtype, 2.0)
    if delta == 0:
        return None
    limit = np.asarray(start + delta * rng.uniform(-2, 40), dtype)
    return Case(op, 11, [start, limit, delta], tol={"rtol": 1e-5, "atol": 1e-4})


# ---- outputs whose length the values decide; detection and sequence ops -----------------------------------

def nonzero(rng) -> Case:
    dtype = str(rng.choice(["float32", "float16", "int32", "int64", "uint8", "bool"]))
    x = data(rng, shape_of(rng, int(rng.integers(0, 5)), high=40 if rng.random() < 0.3 else 5), dtype)
    x[rng.random(x.shape) < rng.random()] = 0  # (sparser or denser: each case its own share of zeros)
    return Case("NonZero", 13, [x])


def compress(rng) -> Case:
    """Compress along an axis or flattened, its condition shorter, as long as or longer than what it selects."""
    x = data(rng, shape_of(rng, int(rng.integers(1, 4)), high=7), str(rng.choice(TYPES)))
    axis = int(rng.integers(-x.ndim, x.ndim)) if rng.random() < 0.7 else None
    size = x.size if axis is None else x.shape[axis]
    condition = rng.random(max(size + int(rng.integers(-3, 4)), 0)) < rng.random()
    return Case("Compress", int(rng.choice([9, 11, 28])), [x, condition], {} if axis is None else {"axis": axis})


def axes_norm(rng) -> Case:
    """MeanVarianceNormalization over random axes (some out of range or repeated), LpNormalization p 1 or 2 along
    any axis; rows of zeros and NaNs among the values."""
    x = data(rng, shape_of(rng, int(rng.integers(1, 5)), high=9), "float32") + np.float32(rng.uniform(-5, 5))
    x[rng.random(x.shape) < 0.02] = rng.choice([0.0, np.nan])
    if rng.random() < 0.5:
        attrs = {"p": int(rng.integers(1, 3))} | ({"axis": int(rng.integers(-x.ndim, x.ndim))} if x.ndim else {})
        return Case("LpNormalization", int(rng.choice([1, 22])), [x], attrs, tol={"rtol": 1e-4, "atol": 1e-5})
    axes = [int(a) for a in rng.integers(-x.ndim - 1, x.ndim + 1, int(rng.integers(1, 4)))]
    attrs = {"axes": axes} if rng.random() < 0.7 else {}
    return Case("MeanVarianceNormalization", int(rng.choice([9, 13])), [x], attrs, tol={"rtol": 1e-3, "atol": 1e-4})


def eye_like(rng) -> Case:
    """EyeLike of any 2-D shape (zero-sized too), any diagonal, its own type or the one `dtype` names."""
    x = data(rng, shape_of(rng, 2, high=9), str(rng.choice(["float32", "int32", "int64"])))
    attrs = {"k": int(rng.integers(-10, 11))}
    if rng.random() < 0.6:
        attrs["dtype"] = int(rng.choice([onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.INT64]))
    return Case("EyeLike", int(rng.choice([9, 22])), [x], attrs)


def affine_grid(rng) -> Case:
    """AffineGrid in 2-D and 3-D, either align_corners, sizes of one point along an axis too (exact: the shader
    rounds as the CPU EP does)."""
    dims = int(rng.integers(2, 4))
    size = [int(rng.integers(0, 3)), int(rng.integers(1, 4))] + [int(rng.integers(1, 9)) for _ in range(dims)]
    theta = data(rng, [size[0], dims, dims + 1], "float32", scale=1.0)
    return Case("AffineGrid", 20, [theta], {"align_corners": int(rng.integers(0, 2))},
                {"size": np.array(size, np.int64)}, tol={"rtol": 0.0, "atol": 0.0})


def unique(rng) -> Case:
    """Unique of elements or of slices along an axis, sorted or in order of first occurrence, values from a small
    pool (so items repeat), -0.0 beside 0.0; every output, or only the first ones."""
    dtype = str(rng.choice(["float32", "int64", "int8"]))
    shape = shape_of(rng, int(rng.integers(0, 4)), high=6, empty=0.05)
    pool = np.array([-2, -0.0, 0, 1, 3.5] if dtype == "float32" else [-2, 0, 1, 3], dtype)
    x = np.asarray(pool[rng.integers(0, rng.integers(1, len(pool) + 1), shape)], dtype)
    attrs = {"sorted": int(rng.integers(0, 2))}
    if x.ndim and rng.random() < 0.5:
        attrs["axis"] = int(rng.integers(-x.ndim, x.ndim))
        if x.size == 0:  # (empty slices abort ORT's CPU EP)
            return None
    return Case("Unique", int(rng.choice([11, 28])), [x], attrs, outputs=int(rng.integers(1, 5)),
                tol={"rtol": 0.0, "atol": 0.0})


def max_unpool(rng) -> Case:
    """MaxUnpool in 1-3 spatial dims, random windows, strides and pads, indices anywhere in the output (repeats:
    the last wins), now and then an output_shape larger than the inferred one."""
    n = int(rng.integers(1, 4))
    kernel = [int(k) for k in rng.integers(1, 4, n)]
    strides = [int(s) for s in rng.integers(1, 3, n)]
    pads = [int(p) for p in rng.integers(0, 2, 2 * n)]
    shape = [int(rng.integers(0, 3)), int(rng.integers(1, 3))] + [int(d) for d in rng.integers(1, 5, n)]
    out = shape[:2] + [(shape[2 + d] - 1) * strides[d] - pads[d] - pads[n + d] + kernel[d] for d in range(n)]
    if min(out[2:]) <= 0:
        return None
    consts = {}
    if rng.random() < 0.3:
        out[-1] += int(rng.integers(0, 3))
        consts["s"] = np.array(out, np.int64)
    consts = {"i": rng.integers(0, max(int(np.prod(out)), 1), shape).astype(np.int64)} | consts
    return Case("MaxUnpool", int(rng.choice([9, 11, 22])), [data(rng, shape, "float32")],
                {"kernel_shape": kernel, "strides": strides, "pads": pads}, consts, tol={"rtol": 0.0, "atol": 0.0})


def col2im(rng) -> Case | None:
    """Col2Im in 1-3 spatial dims: blocks, strides, pads, and dilations in 2-D (elsewhere vkep declines them)."""
    n = int(rng.integers(1, 4))
    image = [int(d) for d in rng.integers(1, 7, n)]
    block = [int(b) for b in rng.integers(1, 4, n)]
    strides = [int(s) for s in rng.integers(1, 3, n)]
    dilations = [int(d) for d in rng.integers(1, 3, n)] if n == 2 else [1] * n
    pads = [int(p) for p in rng.integers(0, 2, 2 * n)]
    cols = [(image[d] + pads[d] + pads[n + d] - (dilations[d] * (block[d] - 1) + 1)) // strides[d] + 1
            for d in range(n)]
    if min(cols) <= 0:
        return None
    x = data(rng, [int(rng.integers(0, 3)), int(rng.integers(1, 3)) * int(np.prod(block)), int(np.prod(cols))],
             "float32")
    return Case("Col2Im", 18, [x], {"strides": strides, "dilations": dilations, "pads": pads},
                {"image": np.array(image, np.int64), "block": np.array(block, np.int64)}, tol={"rtol": 0.0, "atol": 0.0})


def tree_ensembles(rng) -> Case | None:
    """ai.onnx.ml TreeEnsemble (5), TreeEnsembleRegressor and TreeEnsembleClassifier (1, 3): random trees of every
    node mode (sets for TreeEnsemble), NaN inputs, every aggregate and post transform, float32/float64, 0-70 rows."""
    from onnx import helper
    from test_tree_ensemble import AGGREGATES, POSTS, inputs, random_trees, v3_attributes, v5_node

    op = str(rng.choice(["TreeEnsemble", "TreeEnsembleRegressor", "TreeEnsembleClassifier"]))
    seed, n_trees, targets = int(rng.integers(1 << 30)), int(rng.integers(1, 40)), int(rng.integers(1, 4))
    dtype, post = str(rng.choice(["float32", "float64"])), str(rng.choice(POSTS))
    aggregate = str(rng.choice(AGGREGATES))
    x = inputs(int(rng.choice([0, 1, 5, 70])), dtype, seed=seed % 1000)
    # (bit for bit without exp/log/sqrt: no post transform, or one a single regression target ignores)
    exact = post == "NONE" or (targets == 1 and post != "PROBIT" and op != "TreeEnsembleClassifier")
    tol = {"rtol": 0.0, "atol": 0.0} if exact else {"rtol": 1e-5, "atol": 1e-5}  # (PROBIT near 0: log near 1)
    if op == "TreeEnsemble":
        forest = random_trees(seed, n_trees, targets, max_depth=int(rng.integers(1, 11)))
        node = v5_node(forest, targets, dtype, aggregate, post)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        return Case(op, 5, [x], attrs, domain="ai.onnx.ml", tol=tol)
    forest = random_trees(seed, n_trees, targets, modes=range(6), max_depth=int(rng.integers(1, 11)),
                          single_leaf_trees=False)
    as_tensor = dtype == "float64" and rng.random() < 0.5
    if op == "TreeEnsembleRegressor":
        base = [float(b) for b in rng.standard_normal(targets)] if rng.random() < 0.5 else None
        attrs = v3_attributes(forest, targets, "target", as_tensor, base)
        attrs.update(n_targets=targets, aggregate_function=aggregate, post_transform=post)
        return Case(op, 3 if as_tensor else 1, [x], attrs, domain="ai.onnx.ml", tol=tol)
    classes = max(2, targets)
    base = [float(b) for b in rng.standard_normal(classes)] if rng.random() < 0.5 else None
    attrs = v3_attributes(forest, targets, "class", as_tensor, base)
    attrs.update(classlabels_int64s=[int(v) for v in rng.choice(100, classes, replace=False)], post_transform=post)
    if classes == 2 and targets == 1 and post == "PROBIT" and len(base or ()) != 2:
        return None  # (ORT leaves the second probability unwritten, garbage: vkep declines it, test_tree_ensemble)
    return Case(op, 3 if as_tensor else 1, [x], attrs, outputs=2, domain="ai.onnx.ml", tol=tol)


def onehot(rng) -> Case:
    indices, depth_type = str(rng.choice(["int64", "int32", "float32"])), str(rng.choice(["int64", "float32"]))
    values_type = str(rng.choice(["float32", "int32"])) if indices == "int64" and depth_type == "float32" else \
        "float32"
    depth = int(rng.integers(1, 9))
    x = np.asarray(rng.integers(-depth - 2, depth + 2, shape_of(rng, int(rng.integers(0, 4)))), indices)
    consts = {"depth": np.array(depth + (0.7 if depth_type == "float32" else 0), depth_type),
              "values": data(rng, [2], values_type)}
    return Case("OneHot", 11, [x], {"axis": int(rng.integers(-x.ndim - 1, x.ndim + 1))}, consts)


def reverse_sequence(rng) -> Case:
    shape = shape_of(rng, int(rng.integers(2, 5)), high=6, empty=0.0)
    time_axis = int(rng.integers(0, 2))
    lens = rng.integers(0, shape[time_axis] + 1, shape[1 - time_axis]).astype(np.int64)
    return Case("ReverseSequence", 10, [data(rng, shape, str(rng.choice(TYPES))), lens],
                {"time_axis": time_axis, "batch_axis": 1 - time_axis})


def upsample(rng) -> Case:
    mode = str(rng.choice(["nearest", "linear"]))
    x = data(rng, [int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 6))],
             "float32" if mode == "linear" else str(rng.choice(["float32", "uint8"])))
    scales = [1.0, 1.0] + [float(rng.choice([1.0, 1.5, 2.0, 2.5, 3.0])) for _ in range(2)]
    if rng.random() < 0.5:
        return Case("Upsample", 7, [x], {"mode": mode, "scales": scales})
    return Case("Upsample", 9, [x], {"mode": mode}, {"scales": np.array(scales, np.float32)})


def _boxes(rng, batches: int, n: int, corners: bool) -> np.ndarray:
    xy, wh = rng.uniform(0, 40, (batches, n, 2)), rng.uniform(0, 20, (batches, n, 2))
    return np.concatenate([xy, xy + wh] if corners else [xy, wh], -1).astype(np.float32)


def nms(rng) -> Case:
    batches, classes, n = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(0, 60))
    center = int(rng.integers(0, 2))
    scores = rng.random((batches, classes, n)).astype(np.float32)
    if rng.random() < 0.5:
        scores = np.round(scores * 4) / 4  # (ties)
    consts = {"m": np.array([int(rng.integers(-1, 12))], np.int64), "iou": np.array([rng.random()], np.float32),
              "st": np.array([rng.random() * 0.8], np.float32)}
    names = ["x0", "x1"] + list(consts)[:int(rng.integers(0, 4))]
    return Case("NonMaxSuppression", 11, [_boxes(rng, batches, n, not center), scores.astype(np.float32)],
                {"center_point_box": center}, {k: consts[k] for k in names[2:]}, names=names)


def roi_align(rng) -> Case:
    x = data(rng, [int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 12)), int(rng.integers(1, 12))],
             "float32")
    n = int(rng.integers(0, 6))
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    rois = (_boxes(rng, 1, n, True)[0] * 0.4 - 2).astype(np.float32) / np.float32(scale)
    batch_indices = rng.integers(0, x.shape[0], n).astype(np.int64)
    attrs = {"mode": str(rng.choice(["avg", "max"])), "output_height": int(rng.integers(1, 5)),
             "output_width": int(rng.integers(1, 5)), "sampling_ratio": int(rng.integers(0, 3)), "spatial_scale": scale}
    if rng.random() < 0.5:
        return Case("RoiAlign", 10, [x, rois, batch_indices], attrs)
    attrs["coordinate_transformation_mode"] = str(rng.choice(["half_pixel", "output_half_pixel"]))
    return Case("RoiAlign", 16, [x, rois, batch_indices], attrs)


def fused_matmul(rng) -> Case:
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    m, k, n = (int(rng.integers(1, 9)) for _ in range(3))
    batch = shape_of(rng, int(rng.integers(0, 3)), high=4, empty=0.0)
    sa = batch + ([k, m] if ta else [m, k])
    sb = batch[int(rng.integers(0, len(batch) + 1)):] + ([n, k] if tb else [k, n])
    attrs = {"transA": ta, "transB": tb, "alpha": float(rng.choice([1.0, 0.5, -3.0]))}
    return Case("FusedMatMul", 1, [data(rng, sa, "float32"), data(rng, sb, "float32")], attrs, domain="com.microsoft",
                tol={"rtol": 1e-4, "atol": 1e-4})


def embed_layer_norm(rng) -> Case:
    batches, seq, hidden = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 40))
    words, positions, segments = int(rng.integers(1, 20)), seq + int(rng.integers(0, 4)), int(rng.integers(1, 3))
    ids = rng.integers(0, words, (batches, seq)).astype(np.int32)
    consts = {"word": data(rng, [words, hidden], "float32"), "position": data(rng, [positions, hidden], "float32"),
              "segment": data(rng, [segments, hidden], "float32"), "gamma": data(rng, [hidden], "float32"),
              "beta": data(rng, [hidden], "float32")}
    inputs, names = [ids], ["x0"]
    if rng.random() < 0.5:
        inputs.append(rng.integers(0, segments, (batches, seq)).astype(np.int32))
        names += ["x1", "word", "position", "segment"]
    else:
        names += ["", "word", "position", ""]
        del consts["segment"]
    names += ["gamma", "beta"]
    if rng.random() < 0.5:
        inputs.append(rng.integers(0, 2, (batches, seq)).astype(np.int32))
        names.append(f"x{len(inputs) - 1}")
    return Case("EmbedLayerNormalization", 1, inputs, {"epsilon": float(rng.choice([1e-12, 1e-5]))}, consts,
                outputs=2, names=names, domain="com.microsoft")


def fused_conv(rng) -> Case:
    k, group = int(rng.integers(1, 4)), int(rng.choice([1, 2]))
    c, m = group * int(rng.integers(1, 4)), group * int(rng.integers(1, 4))
    x = data(rng, [int(rng.integers(1, 3)), c, int(rng.integers(k, 9)), int(rng.integers(k, 9))], "float32", 1.0)
    w = data(rng, [m, c // group, k, k], "float32", 0.5)
    pads = [int(rng.integers(0, k)) for _ in range(4)]
    stride = int(rng.integers(1, 3))
    out = [(x.shape[d + 2] + pads[d] + pads[d + 2] - k) // stride + 1 for d in range(2)]
    activation, params = [("Relu", []), ("Tanh", []), ("Sigmoid", []), ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.5]),
                          ("HardSigmoid", [0.2, 0.5])][int(rng.integers(0, 6))]
    attrs = {"group": group, "pads": pads, "strides": [stride, stride], "activation": activation}
    if params:
        attrs["activation_params"] = params
    inputs, names = [x], ["x0", "w", "b"]
    if rng.random() < 0.5:
        inputs.append(data(rng, [x.shape[0], m] + out, "float32", 1.0))
        names.append("x1")
    return Case("FusedConv", 1, inputs, attrs, {"w": w, "b": data(rng, [m], "float32", 0.5)}, names=names,
                domain="com.microsoft", tol={"rtol": 1e-4, "atol": 1e-5})


def fused_gemm(rng) -> Case:
    m, k, n = (int(rng.integers(1, 12)) for _ in range(3))
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    activation, params = [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("LeakyRelu", {"activation_alpha": 0.1}),
                          ("HardSigmoid", {"activation_alpha": 0.2, "activation_beta": 0.5})][int(rng.integers(0, 5))]
    a = data(rng, [k, m] if ta else [m, k], "float32", 1.0)
    consts = {"b": data(rng, [n, k] if tb else [k, n], "float32", 1.0)}
    names = ["x0", "b"]
    if rng.random() < 0.7:
        consts["c"] = data(rng, [[n], [m, n], [1, n], []][int(rng.integers(0, 4))], "float32", 1.0)
        names.append("c")
    attrs = {"transA": ta, "transB": tb, "alpha": float(rng.choice([1.0, 0.5])), "beta": float(rng.choice([1.0, 2.0])),
             "activation": activation, **params}
    return Case("FusedGemm", 1, [a], attrs, consts, names=names, domain="com.microsoft",
                tol={"rtol": 1e-4, "atol": 1e-5})



# ---- ORT's dynamically quantized transformers (tests/test_quantized_transformer.py) ---------------------------
# int8 operands stay in [-64, 63]: ORT's AVX2 kernels without VNNI saturate pairs of 8-bit products at int16

def _bytes(rng, shape, dtype: str) -> np.ndarray:
    low, high = (-64, 63) if dtype == "int8" else (0, 255)
    return np.asarray(rng.integers(low, high + 1, size=shape), dtype)


def _scale_and_zero_point(rng, n: int, dtype: str, scale: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Per tensor or (half the time) per column; the zero point absent a quarter of the time."""
    shape = [n] if rng.random() < 0.5 else []
    s = np.asarray(rng.uniform(0.5, 1.5, shape) * scale, np.float32)
    return s, (_bytes(rng, shape, dtype) if rng.random() < 0.75 else None)


def integer_matmul_to_float(rng) -> Case:
    """com.microsoft MatMulIntegerToFloat (8-bit A) and DynamicQuantizeMatMul (float A): B constant or fed."""
    dynamic = rng.random() < 0.5
    m, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 20))
    batch = shape_of(rng, int(rng.integers(0, 3)), high=3)
    a_type, b_type = str(rng.choice(["uint8", "int8"])), str(rng.choice(["uint8", "int8"]))
    b_shape = batch + [k, n] if batch and rng.random() < 0.3 else [k, n]
    b = _bytes(rng, b_shape, b_type)
    b_scale, bzp = _scale_and_zero_point(rng, n, b_type, 0.01)
    if b_shape != [k, n]:  # (a batched B: its parameters per tensor)
        b_scale, bzp = np.asarray(b_scale.ravel()[0]), None if bzp is None else np.asarray(bzp.ravel()[0])
    bias = data(rng, [n], "float32") if rng.random() < 0.5 else None
    consts = {"b_scale": b_scale}
    inputs, names = [], []
    if dynamic:
        inputs.append(data(rng, batch + [m, k], "float32"))
        names = ["x0"]
    else:
        inputs.append(_bytes(rng, batch + [m, k], a_type))
        consts["a_scale"] = np.asarray(np.float32(rng.uniform(0.005, 0.05)))
        if rng.random() < 0.75:
            consts["a_zp"] = _bytes(rng, [], a_type)
        names = ["x0"]
    if rng.random() < 0.7:
        consts["b"] = b
        names.append("b")
    else:
        inputs.append(b)
        names.append("x1")
    if bzp is not None:
        consts["b_zp"] = bzp
    if bias is not None:
        consts["bias"] = bias
    if dynamic:
        names += ["b_scale", "b_zp" if bzp is not None else "", "bias" if bias is not None else ""]
        op = "DynamicQuantizeMatMul"
    else:
        names += ["a_scale", "b_scale", "a_zp" if "a_zp" in consts else "", "b_zp" if bzp is not None else "",
                  "bias" if bias is not None else ""]
        op = "MatMulIntegerToFloat"
    while names[-1] == "":
        names.pop()
    return Case(op, 1, inputs, {}, consts, names=names, domain="com.microsoft", tol={"rtol": 0.0, "atol": 0.0})


def qattention(rng) -> Case:
    """com.microsoft QAttention: heads, head sizes, input hidden sizes, every mask_index format, unidirectional,
    per-tensor and per-column weight parameters, zero points or none (tolerance: ContribAttention's)."""
    batch, seq, heads = int(rng.integers(1, 3)), int(rng.integers(1, 7)), int(rng.integers(1, 4))
    hidden, in_hidden = heads * int(rng.choice([4, 8, 16])), int(rng.integers(4, 41))
    w_type = str(rng.choice(["uint8", "int8"]))
    w_scale, wzp = _scale_and_zero_point(rng, 3 * hidden, w_type, 1 / (48 * np.sqrt(in_hidden)))
    consts = {"w": _bytes(rng, [in_hidden, 3 * hidden], w_type), "bias": data(rng, [3 * hidden], "float32", 0.1),
              "x_scale": np.asarray(np.float32(0.02)), "w_scale": w_scale}
    inputs = [_bytes(rng, [batch, seq, in_hidden], "uint8")]
    names = ["x0", "w", "bias", "x_scale", "w_scale"]
    kind = int(rng.integers(0, 5))  # none, ends, ends + starts, raw 2-D, raw 3-D
    ends = rng.integers(1, seq + 1, batch)
    mask = [None, ends, np.concatenate([ends, rng.integers(0, ends)]),
            (np.arange(seq)[None, :] < ends[:, None]), rng.random((batch, seq, seq)) < 0.7][kind]
    if mask is not None:
        inputs.append(np.asarray(mask, np.int32))
        names.append("x1")
    else:
        names.append("")
    if rng.random() < 0.75:
        consts["x_zp"] = np.asarray(np.uint8(rng.integers(0, 256)))
    names.append("x_zp" if "x_zp" in consts else "")
    if wzp is not None:
        consts["w_zp"] = wzp
        names.append("w_zp")
    while names[-1] == "":
        names.pop()
    attrs = {"num_heads": heads, "unidirectional": int(rng.random() < 0.3)}
    return Case("QAttention", 1, inputs, attrs, consts, names=names, domain="com.microsoft",
                tol={"rtol": 1e-3, "atol": 1e-5})


def qembed_layer_norm(rng) -> Case:
    """com.microsoft QEmbedLayerNormalization: 8-bit tables (uint8 or int8), segments or none, a mask or none."""
    batches, seq, hidden = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 40))
    words, positions, segments = int(rng.integers(1, 20)), seq + int(rng.integers(0, 4)), int(rng.integers(1, 3))
    dtype = str(rng.choice(["uint8", "int8"]))
    shapes = {"word": [words, hidden], "position": [positions, hidden], "segment": [segments, hidden],
              "gamma": [hidden], "beta": [hidden]}
    with_segments = rng.random() < 0.5
    if not with_segments:
        del shapes["segment"]
    consts = {k: _bytes(rng, shape, dtype) for k, shape in shapes.items()}
    consts |= {k + "_scale": np.asarray(np.float32(rng.uniform(0.002, 0.05))) for k in shapes}
    consts |= {k + "_zp": _bytes(rng, [], dtype) for k in shapes}
    inputs = [rng.integers(0, words, (batches, seq)).astype(np.int32)]
    names = ["x0"]
    if with_segments:
        inputs.append(rng.integers(0, segments, (batches, seq)).astype(np.int32))
        names.append("x1")
    else:
        names.append("")
    names += ["word", "position", "segment" if with_segments else "", "gamma", "beta"]
    if rng.random() < 0.5:
        inputs.append(rng.integers(0, 2, (batches, seq)).astype(np.int32))
        names.append(f"x{len(inputs) - 1}")
    else:
        names.append("")
    for suffix in ("_scale", "_zp"):
        names += [k + suffix if k in shapes else "" for k in ("word", "position", "segment", "gamma", "beta")]
    return Case("QEmbedLayerNormalization", 1, inputs, {"epsilon": float(rng.choice([1e-12, 1e-5]))}, consts,
                outputs=2, names=names, domain="com.microsoft", tol={"rtol": 0.0, "atol": 0.0})

# ---- spectral ops: bit for bit (vkep follows the CPU EP's FFT and tables operation for operation) -------------

EXACT = {"rtol": 0.0, "atol": 0.0}


def _length(rng) -> int:
    """A transform length: a power of two (radix-2) or not (Bluestein), now and then one of an audio front end's."""
    return int(rng.choice([400, 512, 1024])) if rng.random() < 0.15 else int(rng.integers(1, 70))


def dft(rng) -> Case:
    opset, components = int(rng.choice([17, 20])), int(rng.choice([1, 2]))
    rank = int(rng.integers(3, 5))
    shape = shape_of(rng, rank - 1, high=4, empty=0.05) + [components]
    axis = int(rng.integers(0, rank - 1))
    shape[axis] = _length(rng)
    attrs = {"inverse": int(rng.integers(0, 2)), "onesided": int(components == 1 and rng.random() < 0.5)}
    names, consts = ["x0", ""], {}
    if components == 2 and rng.random() < 0.3:  # an inverse real FFT: n / 2 + 1 bins, n given or 2 (bins - 1)
        attrs = {"inverse": 1, "onesided": 1}
        length = max(2, shape[axis])
        shape[axis] = length // 2 + 1
        if length % 2 or rng.random() < 0.5:
            names[1], consts["n"] = "n", np.array(length, str(rng.choice(["int32", "int64"])))
    elif rng.random() < 0.4:
        names[1], consts["n"] = "n", np.array(max(1, shape[axis] + int(rng.integers(-shape[axis] // 2, 20))),
                                              str(rng.choice(["int32", "int64"])))
    signed_axis = axis - rank if rng.random() < 0.5 else axis
    if opset >= 20:
        names.append("axis")
        consts["axis"] = np.array(signed_axis, np.int64)
    else:
        attrs["axis"] = signed_axis
    while not names[-1]:
        names.pop()
    return Case("DFT", opset, [data(rng, shape, "float32")], attrs, consts, names=names, tol=EXACT)


def stft(rng) -> Case:
    components = int(rng.choice([1, 1, 2]))
    length = _length(rng)
    signal = [int(rng.integers(1, 3)), length + int(rng.integers(0, 3 * length + 5)), components]
    names, consts = ["x0", "step", "", ""], {"step": np.array(int(rng.integers(1, length + 8)), np.int64)}
    if components == 1 and rng.random() < 0.6:
        names[2], consts["window"] = "window", data(rng, [length], "float32", 1.0)
    if names[2] == "" or rng.random() < 0.3:
        names[3], consts["length"] = "length", np.array(length, np.int64)
    while not names[-1]:
        names.pop()
    return Case("STFT", 17, [data(rng, signal, "float32")], {"onesided": int(rng.integers(0, 2))}, consts,
                names=names, tol=EXACT)


def window_function(rng) -> Case:
    op = str(rng.choice(["HannWindow", "HammingWindow", "BlackmanWindow"]))
    size = np.asarray(int(rng.integers(0, 600)), str(rng.choice(["int32", "int64"])))
    attrs = {"periodic": int(rng.integers(0, 2)), "output_datatype": int(rng.choice([1, 1, 1, 2, 3, 6, 7]))}
    return Case(op, 17, [size], attrs, tol=EXACT)


def mel_weight_matrix(rng) -> Case:
    n_fft, rate = int(rng.choice([64, 256, 400, 512, 1024, int(rng.integers(8, 600))])), int(rng.choice([8000, 16000,
                                                                                                        22050]))
    high = float(rate / 2 * rng.uniform(0.3, 0.97))
    low = float(high * rng.uniform(0.0, 0.5))
    bins = int(rng.integers(1, 90))
    index = str(rng.choice(["int32", "int64"]))
    inputs = [np.asarray(bins, index), np.asarray(n_fft, index), np.asarray(rate, index), np.asarray(low, "float32"),
              np.asarray(high, "float32")]
    return Case("MelWeightMatrix", 17, inputs, {"output_datatype": int(rng.choice([1, 1, 1, 2, 6, 7]))}, tol=EXACT)
# ---- com.microsoft ops ORT's tools write (tests/test_contrib_more.py) -------------------------------------------

def ms_quantize_linear(rng) -> Case | None:
    """com.microsoft QuantizeLinear / DequantizeLinear (UseQDQContribOps), 8- and 16-bit."""
    return quantize_linear(rng, domain="com.microsoft")


def gather_block_quantized(rng) -> Case | None:
    """com.microsoft GatherBlockQuantized: int4 / uint4 tables (any gather and quantize axes) or uint8 ones of 4- or
    8-bit values (gather axis 0, quantize axis last), float32 / float16 scales, zero points or none, indices of
    either type with negatives and some out of range (zeros)."""
    import ml_dtypes

    dtype = str(rng.choice(["int4", "uint4", "uint8"]))
    rank = int(rng.integers(2, 4)) if dtype != "uint8" else int(rng.integers(2, 3))
    shape = [int(rng.integers(1, 7)) for _ in range(rank)]
    block = int(rng.choice([16, 32, 64]))
    bits = int(rng.choice([4, 8])) if dtype == "uint8" else 4
    per_byte = 8 // bits if dtype == "uint8" else 1
    if dtype == "uint8":
        g, q = 0, rank - 1
    else:
        g, q = (int(a) for a in rng.choice(rank, 2, replace=False))
    shape[q] = int(rng.integers(1, 3 * block // per_byte + 1))  # (one to three blocks, the last partial)
    blocks = -(-shape[q] * per_byte // block)
    sshape = [blocks if d == q else n for d, n in enumerate(shape)]
    lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "uint8": (0, 255)}[dtype]
    np_type = {"int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4, "uint8": np.uint8}[dtype]
    ftype = str(rng.choice(["float32", "float16"]))
    consts = {"data": np.asarray(rng.integers(lo, hi + 1, shape), np_type),
              "scales": np.asarray(rng.uniform(0.01, 2.0, sshape), ftype)}
    names = ["data", "x0", "scales"]
    if rng.random() < 0.6:
        zshape = [-(-blocks // per_byte) if d == q else n for d, n in enumerate(sshape)]
        consts["zp"] = np.asarray(rng.integers(lo, hi + 1, zshape), np_type)
        names.append("zp")
    n = shape[g]
    ids = np.asarray(rng.integers(-n - 2, n + 2, shape_of(rng, int(rng.integers(0, 3)), high=4)),
                     str(rng.choice(["int32", "int64"])))
    attrs = {"gather_axis": g - rank if rng.random() < 0.3 else g, "quantize_axis": q, "block_size": block,
             "bits": bits}
    if dtype != "uint8" and rng.random() < 0.5:
        del attrs["bits"]
    return Case("GatherBlockQuantized", 1, [ids], attrs, consts, names=names, domain="com.microsoft",
                tol={"rtol": 0.0, "atol": 0.0})


def ms_onnx_names(rng) -> Case | None:
    """com.microsoft's Range (delta optional), Trilu, ExpandDims, GridSample (opset 16's modes, 4-D) and
    TransposeMatMul (FusedMatMul's old name), in the types ORT 1.32's CPU EP registers them for."""
    op = str(rng.choice(["Range", "Trilu", "ExpandDims", "GridSample", "TransposeMatMul"]))
    ms = "com.microsoft"
    if op == "Range":
        dtype = str(rng.choice(["float32", "int32", "int64"]))
        start, delta = data(rng, [], dtype, 5.0), data(rng, [], dtype, 2.0)
        if delta == 0:
            return None
        limit = np.asarray(start + delta * rng.uniform(-2, 40), dtype)
        inputs = [start, limit] if rng.random() < 0.3 and delta == 1 else [start, limit, delta]
        return Case(op, 1, inputs, domain=ms, tol={"rtol": 0.0, "atol": 0.0})
    if op == "Trilu":
        x = data(rng, shape_of(rng, int(rng.integers(2, 5)), high=6), str(rng.choice(["float32", "float16", "int64"])))
        consts = {"k": np.array(int(rng.integers(-6, 7)), np.int64)} if rng.random() < 0.7 else {}
        return Case(op, 1, [x], {"upper": int(rng.integers(0, 2))}, consts, domain=ms)
    if op == "ExpandDims":
        x = data(rng, shape_of(rng, int(rng.integers(0, 4))), str(rng.choice(TYPES)))
        axis = np.asarray(int(rng.integers(-x.ndim - 1, x.ndim + 1)), np.int32)
        return Case(op, 1, [x, axis], domain=ms)
    if op == "GridSample":
        dtype = str(rng.choice(["float32", "float16"]))
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        x = data(rng, [n, c, int(rng.integers(1, 7)), int(rng.integers(1, 7))], dtype)
        grid = np.asarray(rng.uniform(-1.3, 1.3, [n, int(rng.integers(1, 6)), int(rng.integers(1, 6)), 2]), dtype)
        attrs = {"mode": str(rng.choice(["bilinear", "nearest", "bicubic"])),
                 "padding_mode": str(rng.choice(["zeros", "border", "reflection"])),
                 "align_corners": int(rng.integers(0, 2))}
        return Case(op, 1, [x, grid], attrs, domain=ms, tol={"rtol": 2e-3, "atol": 2e-3})
    case = fused_matmul(rng)
    case.op = "TransposeMatMul"
    return case


def qlinear_where(rng) -> Case:
    """com.microsoft QLinearWhere: three broadcast inputs, 8-bit X and Y requantized to Z's parameters."""
    dtype = str(rng.choice(["uint8", "int8"]))
    rank = int(rng.integers(0, 4))
    full = shape_of(rng, rank, high=5)
    shapes = [[d if rng.random() < 0.7 else 1 for d in full][int(rng.integers(0, rank + 1)):] for _ in range(3)]
    info = np.iinfo(dtype)
    c = np.asarray(rng.random(shapes[0]) < 0.5)
    x, y = (np.asarray(rng.integers(info.min, int(info.max) + 1, s), dtype) for s in shapes[1:])
    consts = {}
    for name in ("x", "y", "z"):
        consts[name + "s"] = np.asarray(np.float32(rng.uniform(0.005, 0.2)))
        consts[name + "z"] = np.asarray(rng.integers(info.min, int(info.max) + 1), dtype)
    names = ["x0", "x1", "xs", "xz", "x2", "ys", "yz", "zs", "zz"]
    return Case("QLinearWhere", 1, [c, x, y], {}, consts, names=names, domain="com.microsoft",
                tol={"rtol": 0.0, "atol": 0.0})


def matmul_integer16(rng) -> Case:
    """com.microsoft MatMulInteger16: int16 operands over the whole range (int32 sums wrap), batches either side."""
    m, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 20))
    batch = shape_of(rng, int(rng.integers(0, 3)), high=3, empty=0.0)
    a_shape, b_shape = [batch + [m, k], [k, n]] if rng.random() < 0.5 else [[m, k], batch + [k, n]]
    if rng.random() < 0.3:
        a_shape, b_shape = batch + [m, k], batch + [k, n]
    bound = int(rng.choice([100, 3000, 32768]))
    a, b = (np.asarray(rng.integers(-bound, bound, s), np.int16) for s in (a_shape, b_shape))
    return Case("MatMulInteger16", 1, [a, b], domain="com.microsoft")


def nhwc_max_pool(rng) -> Case:
    """com.microsoft NhwcMaxPool: 8-bit NHWC (or NWC) input, windows with strides, dilations, pads or auto_pad
    (SAME only undilated: vkep declines it dilated), ceil_mode."""
    dtype = str(rng.choice(["uint8", "int8"]))
    n_spatial = int(rng.integers(1, 3))
    kernel = [int(rng.integers(1, 4)) for _ in range(n_spatial)]
    dilations = [int(rng.integers(1, 3)) for _ in range(n_spatial)]
    spatial = [int(rng.integers((k - 1) * d + 1, 10)) for k, d in zip(kernel, dilations, strict=True)]
    shape = [int(rng.integers(1, 3)), *spatial, int(rng.integers(1, 6))]
    attrs = {"kernel_shape": kernel, "strides": [int(rng.integers(1, 3)) for _ in range(n_spatial)],
             "ceil_mode": int(rng.integers(0, 2))}
    padding = str(rng.choice(["pads", "dilations", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if padding == "pads":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel] * 2
    elif padding == "dilations":
        attrs["dilations"] = dilations
    else:
        attrs["auto_pad"] = padding
    return Case("NhwcMaxPool", 1, [data(rng, shape, dtype)], attrs, domain="com.microsoft")


def cdist(rng) -> Case:
    """com.microsoft CDist: both metrics, rows of 1 to 40 (tolerance: the CPU EP's GEMM sums in its own order)."""
    m, n, k = int(rng.integers(0, 8)), int(rng.integers(0, 8)), int(rng.integers(1, 40))
    a, b = data(rng, [m, k], "float32", 1.0), data(rng, [n, k], "float32", 1.0)
    metric = str(rng.choice(["sqeuclidean", "euclidean"]))
    return Case("CDist", 1, [a, b], {"metric": metric}, domain="com.microsoft", tol={"rtol": 1e-4, "atol": 2e-5 * k})


def inverse(rng) -> Case:
    """com.microsoft Inverse: batches of mostly well-conditioned n x n matrices, n up to 12, some rows negated
    (pivots off the diagonal); tolerance: Eigen's cofactors and LU against Gauss-Jordan, each within float32's
    bound for the matrix's condition number (cond x 2^-24 relative to the inverse's largest entry: N(0, 1) + 3 I
    reaches cond 1e4 at n = 11, where both are 1e-4 from float64's inverse, seed 677979351)."""
    n = int(rng.integers(1, 13))
    shape = shape_of(rng, int(rng.integers(0, 3)), high=3) + [n, n]
    x = np.asarray(rng.standard_normal(shape) + 3 * np.eye(n), np.float32)
    x *= np.where(rng.random(shape[:-1] + [1]) < 0.3, -1, 1).astype(np.float32)
    cond, largest = 1.0, 1.0
    if x.size:
        x64 = x.astype(np.float64)
        cond, largest = float(np.max(np.linalg.cond(x64))), float(np.max(np.abs(np.linalg.inv(x64))))
    bound = max(1e-4, 4 * cond * 2.0 ** -24)
    return Case("Inverse", 1, [x], domain="com.microsoft", tol={"rtol": bound, "atol": bound * largest})


def det(rng) -> Case:
    """Det (opset 22): batches of n x n matrices, n up to 12 (Eigen's unblocked LU, which vkep follows; past 16
    rows its blocked one: tests/test_ops4.py), some singular (a repeated row); tolerance: float32 rounding."""
    n = int(rng.integers(0, 13))
    shape = shape_of(rng, int(rng.integers(0, 3)), high=3) + [n, n]
    x = data(rng, shape, "float32", scale=2.0)
    if n > 1 and x.size and rng.random() < 0.2:
        x[..., 1, :] = x[..., 0, :]
    return Case("Det", 22, [x], tol={"rtol": 1e-4, "atol": 1e-5})


def max_roi_pool(rng) -> Case:
    """MaxRoiPool (opset 1): ROIs with batch indices in range, corners anywhere around the image (scaled)."""
    x = data(rng, [int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 12)), int(rng.integers(1, 12))],
             "float32")
    n, scale = int(rng.integers(1, 6)), float(rng.choice([1.0, 0.5, 0.25]))
    lo = rng.uniform(-3, 12, (n, 2))
    corners = np.concatenate([lo, lo + rng.uniform(-1, 10, (n, 2))], 1) / scale
    rois = np.concatenate([rng.integers(0, x.shape[0], (n, 1)), corners], 1).astype(np.float32)
    attrs = {"pooled_shape": [int(rng.integers(1, 4)), int(rng.integers(1, 4))], "spatial_scale": scale}
    return Case("MaxRoiPool", 1, [x, rois], attrs)


def crop_and_resize(rng) -> Case:
    """com.microsoft CropAndResize: boxes inside, across and past the image, bilinear and nearest, a crop size
    given as a constant."""
    x = data(rng, [int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 12)), int(rng.integers(1, 12))],
             "float32")
    n = int(rng.integers(1, 6))
    lo = rng.uniform(-0.3, 1.0, (n, 2))
    rois = np.concatenate([lo, lo + rng.uniform(-0.2, 0.9, (n, 2))], 1).astype(np.float32)
    indices = rng.integers(0, x.shape[0], n).astype(np.int32)
    crop = np.array([int(rng.integers(1, 7)), int(rng.integers(1, 7))], np.int32)
    attrs = {"mode": str(rng.choice(["bilinear", "nearest"])), "extrapolation_value": float(rng.choice([0.0, -1.5]))}
    return Case("CropAndResize", 1, [x, rois, indices], attrs, {"crop": crop}, domain="com.microsoft",
                names=["x0", "x1", "x2", "crop"])


def deform_conv(rng) -> Case:
    """DeformConv (opset 19): groups, offset groups, strides, dilations, pads, with and without bias and mask;
    tolerance: float32 rounding (the CPU EP's GEMM sums with fused multiply-adds)."""
    group, offset_group = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    c, m = group * offset_group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw, dh, dw = (int(rng.integers(1, 3)) for _ in range(4))
    pads = [int(rng.integers(0, 2)) for _ in range(4)]
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(dh * (kh - 1) + 1, 9)), int(rng.integers(dw * (kw - 1) + 1, 9))
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    x = data(rng, [n, c, h, w], "float32", scale=1.0)
    weights = data(rng, [m, c // group, kh, kw], "float32", scale=1.0)
    offset = rng.normal(0, 1.5, (n, offset_group * 2 * kh * kw, oh, ow)).astype(np.float32)
    inputs, names = [x, weights, offset], ["x0", "x1", "x2"]
    if rng.random() < 0.5:
        inputs.append(data(rng, [m], "float32", scale=1.0))
        names.append("x3")
    if rng.random() < 0.5:
        inputs.append(rng.uniform(0, 1, (n, offset_group * kh * kw, oh, ow)).astype(np.float32))
        names += ([] if len(names) == 4 else [""]) + [f"x{len(inputs) - 1}"]
    attrs = {"group": group, "offset_group": offset_group, "kernel_shape": [kh, kw], "strides": [sh, sw],
             "dilations": [dh, dw], "pads": pads}
    return Case("DeformConv", 19, inputs, attrs, names=names, tol={"rtol": 1e-4, "atol": 1e-4})


FAMILIES: dict[Family, tuple[str, ...]] = {
    cast: ("Cast", "CastLike"), clip: ("Clip",), bitshift: ("BitShift",), cumulative: ("CumSum", "CumProd"),
    topk: ("TopK",), split: ("Split",), trilu: ("Trilu",), space_to_depth: ("SpaceToDepth",),
    gather_nd: ("GatherND",), scatter_elements: ("ScatterElements", "Scatter"), scatter_nd: ("ScatterND",),
    tensor_scatter: ("TensorScatter",),
    view: ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"),
    shape_ops: ("Shape", "Size", "ConstantOfShape", "Range"),
    nonzero: ("NonZero",), compress: ("Compress",), eye_like: ("EyeLike",), affine_grid: ("AffineGrid",), unique: ("Unique",), max_unpool: ("MaxUnpool",), col2im: ("Col2Im",),
    axes_norm: ("LpNormalization", "MeanVarianceNormalization"), onehot: ("OneHot",), reverse_sequence: ("ReverseSequence",), upsample: ("Upsample",),
    nms: ("NonMaxSuppression",), roi_align: ("RoiAlign",), fused_matmul: ("FusedMatMul",),
    det: ("Det",), max_roi_pool: ("MaxRoiPool",), crop_and_resize: ("CropAndResize",), deform_conv: ("DeformConv",),
    embed_layer_norm: ("EmbedLayerNormalization",), fused_conv: ("FusedConv",), fused_gemm: ("FusedGemm",),
    integer_matmul_to_float: ("MatMulIntegerToFloat", "DynamicQuantizeMatMul"), qattention: ("QAttention",),
    qembed_layer_norm: ("QEmbedLayerNormalization",), dft: ("DFT",), stft: ("STFT",),
    window_function: ("HannWindow", "HammingWindow", "BlackmanWindow"), mel_weight_matrix: ("MelWeightMatrix",),
    ms_quantize_linear: ("QuantizeLinear", "DequantizeLinear"),
    gather_block_quantized: ("GatherBlockQuantized",),
    ms_onnx_names: ("Range", "Trilu", "ExpandDims", "GridSample", "TransposeMatMul"),
    qlinear_where: ("QLinearWhere",), matmul_integer16: ("MatMulInteger16",),
    nhwc_max_pool: ("NhwcMaxPool",), cdist: ("CDist",), inverse: ("Inverse",), moe_experts: ("MoE", "QMoE"),
    tree_ensembles: ("TreeEnsemble", "TreeEnsembleRegressor", "TreeEnsembleClassifier"),
}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_family_matches_cpu_ep(ep_devices, family):
    fuzz_family(family, FAMILIES[family])


# manifest entries no fuzz family draws, and why
NOT_FUZZED = {
    "If": "subgraphs: tests/test_control_flow.py and the random graphs of tests/test_memory_reuse.py",
    "Loop": "subgraphs: tests/test_control_flow.py", "Scan": "subgraphs: tests/test_control_flow.py",
    "MemcpyFromHost": "ORT inserts it between EPs; no model names it",
    "MemcpyToHost": "ORT inserts it between EPs; no model names it",
    "BiasAdd": "ORT 1.32's CPU EP has no kernel to compare with: tests/test_contrib.py against numpy",
    "BiasSplitGelu": "ORT 1.32's CPU EP has no kernel to compare with: tests/test_contrib.py against numpy",
    **dict.fromkeys(("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial"),
                    "random values: tests/test_random.py, seeded against the CPU EP run after run, unseeded by their "
                    "distribution"),
    "DynamicQuantizeLSTM": "the CPU EP quantizes activations (and its AVX2 int8 path saturates): "
                           "tests/test_dynamic_quantize_lstm.py sweeps it against the float LSTM and the CPU EP",
    # ORT's experimental ops of opsets 1-9: ONNX has no schema for them, which the families' models need
    **dict.fromkeys(("ImageScaler", "Crop", "ScaledTanh", "ParametricSoftplus"),
                    "ORT's experimental op (no ONNX schema): tests/test_legacy_ops.py, NaN/inf/±0 against the CPU EP"),
    # ai.onnx.ml: random attribute tables against the CPU EP in their own files
    **dict.fromkeys(("LinearClassifier", "LinearRegressor", "SVMClassifier", "SVMRegressor"),
                    "ai.onnx.ml: tests/test_ml_linear.py draws random coefficients, support vectors and inputs"),
    **dict.fromkeys(("Scaler", "Normalizer", "Binarizer", "Imputer", "ArrayFeatureExtractor", "FeatureVectorizer",
                     "OneHotEncoder", "LabelEncoder"),
                    "ai.onnx.ml: tests/test_ml_prep.py, every attribute form and special value against the CPU EP"),
}


def test_every_manifest_entry_is_fuzzed():
    """Each op of kernels.yaml is drawn by some fuzz family (tests/test_fuzz*.py) or named in NOT_FUZZED
    with the reason: a new manifest entry fails here until a family covers it."""
    import test_fuzz
    import test_fuzz_math

    from vkep.kernels import manifest

    fuzzed = {s.op for s in test_fuzz.SPECS} | {s.op for s in test_fuzz.AXIS_SPECS}
    fuzzed |= set(test_fuzz.WINDOW_OPS) | set(test_fuzz.MOVEMENT_OPS)
    for families in (FAMILIES, test_fuzz_math.FAMILIES):
        fuzzed |= {op for ops in families.values() for op in ops}
    missing = {s.op for s in manifest.load()} - fuzzed - set(NOT_FUZZED)
    assert not missing, f"manifest entries no fuzz family draws: {sorted(missing)}"
