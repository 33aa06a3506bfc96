"""Ops exported models carry that vkep added late, each a one-node model on vkep against ORT's CPU EP: Compress (an
output sized by a count read back), LpNormalization, MeanVarianceNormalization, EyeLike, Scatter (opset 9-10),
AffineGrid. Every node must be placed on vkep (check_node)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from test_reduce import check_node

from vkep import runner
from vkep.kernels.nonzero import WG


def _values(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * 20).astype(dtype)


def _condition(n: int, keep: float, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).random(n) < keep


def check_exact(op: str, feeds: dict[str, np.ndarray], opset: int, consts: dict[str, np.ndarray] | None = None,
                **attrs) -> np.ndarray:
    """check_node (every node on vkep, within tolerance), then vkep's output bit for bit equal to the CPU EP's."""
    consts = consts or {}
    got = check_node(op, feeds, opset, consts=consts, **attrs)[0]
    node = helper.make_node(op, list(feeds) + list(consts), ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                         a.shape) for n, a in feeds.items()],
                              [onnx.ValueInfoProto(name="y")],  # (ORT infers its type)
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    want = runner.cpu_session(model).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)
    return got


# ---- Compress ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "int8", "uint8", "bool"])
def test_compress_types(ep_devices, dtype):
    check_node("Compress", {"x": _values((4, 9, 3), dtype), "c": _condition(9, 0.5)}, 11, axis=1)


@pytest.mark.parametrize("axis", [0, 2, -1, -3, None])
@pytest.mark.parametrize("length", ["short", "exact", "long"])
def test_compress_axes_and_condition_lengths(ep_devices, axis, length):
    """A condition shorter than the axis drops the slices past it, a longer one counts only its first entries;
    no axis: the flattened elements (across nonzero.comp's chunks)."""
    x = _values((6, 5, 70), "float32")
    size = x.size if axis is None else x.shape[axis]
    n = {"short": size // 2, "exact": size, "long": size + 7}[length]
    attrs = {} if axis is None else {"axis": axis}
    check_node("Compress", {"x": x, "c": _condition(n, 0.4, seed=n)}, 11, **attrs)


@pytest.mark.parametrize("opset", [9, 11, 28])
def test_compress_keeping_nothing_or_everything(ep_devices, opset):
    x = _values((3, WG + 5), "float32")
    assert check_node("Compress", {"x": x, "c": np.zeros(WG + 5, bool)}, opset, axis=1)[0].shape == (3, 0)
    assert check_node("Compress", {"x": x, "c": np.ones(3 * WG + 15, bool)}, opset)[0].shape == (3 * WG + 15,)
    assert check_node("Compress", {"x": np.zeros((0, 4), np.float32), "c": np.ones(2, bool)}, opset,
                      axis=1)[0].shape == (0, 2)


# ---- Scatter (opset 9-10) and ScatterElements before opset 16 ------------------------------------------------

@pytest.mark.parametrize(("op", "opset"), [("Scatter", 9), ("Scatter", 10), ("ScatterElements", 11),
                                           ("ScatterElements", 13)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_before_reduction(ep_devices, op, opset, axis):
    """Scatter and the ScatterElements of opsets 11-15 read `axis` (negative indices wrap)."""
    rng = np.random.default_rng(opset)
    x = _values((5, 6), "float32")
    a = axis % 2
    size = (3, 4)
    # distinct positions along the axis in each line (duplicates are undefined)
    idx = np.argsort(rng.random((x.shape[a], size[1 - a])), axis=0)[:size[a]]
    idx = (idx if a == 0 else idx.T) - np.where(rng.random(size) < 0.3, x.shape[a], 0)
    for itype in (np.int64, np.int32):
        check_node(op, {"x": x, "u": _values(size, "float32", seed=2)}, opset, consts={"i": idx.astype(itype)},
                   input_order=["x", "i", "u"], axis=axis)


# ---- MeanVarianceNormalization, LpNormalization (float32: the CPU EP's only type) -----------------------------

@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3], [-1], [0, 1, 2, 3], [3, 1], [0, 0, 7, -2]])
def test_mean_variance_normalization(ep_devices, opset, axes):
    """Default axes [0, 2, 3], any others (out-of-range ones dropped, repeats merged, as ORT's CPU EP)."""
    x = (_values((2, 3, 17, 9), "float32") / 7 + 3).astype(np.float32)
    attrs = {} if axes is None else {"axes": axes}
    check_node("MeanVarianceNormalization", {"x": x}, opset, **attrs)


def test_mean_variance_normalization_without_valid_axes_fails(ep_devices):
    """No axis in range: vkep declines the node (the dry run at GetCapability), whose run fails on the CPU EP."""
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[4, -5])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2, 3, 4, 5])],
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    x = _values((2, 3, 4, 5), "float32")
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    with pytest.raises(Exception, match="(?i)no valid axes"):
        session.run(None, {"x": x})


def test_mean_variance_normalization_special_values(ep_devices):
    """A NaN makes its row NaN; a row of zeros is 0/0 (NaN: no epsilon); long rows (wide workgroups); empty x."""
    x = _values((2, 3, 4, 5), "float32")
    x[1, 2, 0, 0] = np.nan
    x[:, 1] = 0
    got = check_node("MeanVarianceNormalization", {"x": x}, 13, axes=[0, 2, 3])[0]
    assert np.isnan(got[:, 2]).all() and np.isnan(got[:, 1]).all() and not np.isnan(got[:, 0]).any()
    check_node("MeanVarianceNormalization", {"x": _values((2, 3, 100, 90), "float32")}, 13)
    check_node("MeanVarianceNormalization", {"x": np.zeros((0, 3, 2, 2), np.float32)}, 13)
    check_node("MeanVarianceNormalization", {"x": _values((7, 6), "float32")}, 13)  # rank 2: axes 2, 3 dropped


@pytest.mark.parametrize("opset", [1, 22])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_lp_normalization(ep_devices, opset, p, axis):
    x = _values((5, 6, 7), "float32")
    x[1, 2] = 0  # zero norms (axis 2 and -1): zeros
    check_node("LpNormalization", {"x": x}, opset, axis=axis, p=p)


def test_lp_normalization_special_values(ep_devices):
    x = np.array([[0, 0, 0], [3, 4, np.nan], [1, -2, np.inf], [-0.0, 5, 0]], np.float32)
    for p in (1, 2):
        got = check_node("LpNormalization", {"x": x}, 1, axis=1, p=p)[0]
        assert (got[0] == 0).all() and np.isnan(got[1]).all()
    check_node("LpNormalization", {"x": np.zeros((0, 3), np.float32)}, 1, axis=0, p=2)
    check_node("LpNormalization", {"x": _values((3, 20000), "float32")}, 22, p=2)  # wide workgroups


# ---- EyeLike -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 22])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("to", [None, "float32", "int32", "int64"])
def test_eye_like(ep_devices, opset, dtype, to):
    x = _values((5, 7), dtype)
    attrs = {} if to is None else {"dtype": helper.np_dtype_to_tensor_dtype(np.dtype(to))}
    for k in (0, 2, -3, 7, -9):
        check_node("EyeLike", {"x": x}, opset, outputs=[("y", to)], k=k, **attrs)


def test_eye_like_shapes(ep_devices):
    for shape in [(1, 1), (300, 2), (2, 300), (0, 4)]:
        check_node("EyeLike", {"x": np.zeros(shape, np.float32)}, 22, k=1)


# ---- AffineGrid ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 5, 4], [3, 1, 1, 7], [1, 2, 1, 1], [2, 3, 4, 6, 5], [1, 1, 1, 3, 1],
                                  [0, 1, 2, 3]])
def test_affine_grid(ep_devices, align_corners, size):
    """2-D and 3-D grids, single points along an axis, an empty one: bit for bit (the CPU EP's roundings)."""
    dims = len(size) - 2
    theta = _values((size[0], dims, dims + 1), "float32") / 20
    check_exact("AffineGrid", {"theta": theta}, 20, {"size": np.array(size, np.int64)}, align_corners=align_corners)


def test_affine_grid_empty_spatial_size_is_declined(ep_devices):
    """A zero height fails on ORT's CPU EP ("must be positive"): vkep's dry run declines the node, so it does there."""
    node = helper.make_node("AffineGrid", ["theta", "size"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("theta", 1, [2, 2, 3])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.array([2, 1, 0, 3], np.int64), "size")])
    session = runner.vkep_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    with pytest.raises(Exception, match="must be positive"):
        session.run(None, {"theta": _values((2, 2, 3), "float32")})


# ---- Unique ----------------------------------------------------------------------------------------------------

UNIQUE_OUTPUTS = [("y", None), ("indices", np.int64), ("inverse", np.int64), ("counts", np.int64)]


def _repeats(shape, dtype, distinct: int, seed: int = 0) -> np.ndarray:
    """Values drawn from `distinct` choices (so items repeat), negatives and zeros among them."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(-100, 100, distinct)
    return np.asarray(pool[rng.integers(0, distinct, shape)], dtype)


@pytest.mark.parametrize("dtype", ["float32", "int64", "int8", "float64"])
@pytest.mark.parametrize("is_sorted", [1, 0])
def test_unique_flattened(ep_devices, dtype, is_sorted):
    """No axis: the elements, sorted or in order of first occurrence (bit for bit: no arithmetic)."""
    for opset, (shape, distinct) in zip([11, 28, 11, 28], [((7, 9), 12), ((1000,), 300), ((3, 1), 1), ((), 1)], strict=True):
        x = _repeats(shape, dtype, distinct, seed=len(shape))
        check_node("Unique", {"x": x}, opset, outputs=UNIQUE_OUTPUTS, sorted=is_sorted)


@pytest.mark.parametrize("is_sorted", [1, 0])
def test_unique_sorts_long_inputs(ep_devices, is_sorted):
    """Single elements go through unique.comp's sort (one workgroup, its groups scanned in 64 chunks): lengths
    around powers of two and up to SORT_MAX, every value the same, every value distinct, a 1-D input along axis 0."""
    from vkep.kernels.nonzero import SORT_MAX
    for n, distinct in [(63, 5), (64, 64), (65, 3), (4097, 4097), (SORT_MAX, 1000), (3000, 1)]:
        x = _repeats((n,), "int64", distinct, seed=n) if distinct < n else np.random.default_rng(n).permutation(n)
        check_node("Unique", {"x": x.astype(np.int64)}, 11, outputs=UNIQUE_OUTPUTS, sorted=is_sorted)
    x = _repeats((777,), "float32", 50)
    check_node("Unique", {"x": x}, 28, outputs=UNIQUE_OUTPUTS, sorted=is_sorted, axis=0)


@pytest.mark.parametrize("is_sorted", [1, 0])
def test_unique_sorts_past_one_workgroup(ep_devices, is_sorted):
    """Past SORT_MAX items of one element the bitonic network runs a dispatch a step (they were left to the CPU EP:
    survey 12's connected-components labels over a 320 x 320 map, 102,400 items): just past it, a pixel map's
    labels, both zeros and infinities among floats (NaN: test_unique_nan_as_numpy), and a length the scan's loop
    count still takes."""
    from vkep.kernels import nonzero
    rng = np.random.default_rng(9)
    labels = rng.integers(0, 700, 102_400).astype(np.int64)
    floats = _repeats((nonzero.SORT_MAX + 1,), "float32", 2000)
    floats[::97], floats[5::89], floats[7::83] = np.inf, -0.0, 0.0
    for x in (_repeats((nonzero.SORT_MAX + 1,), "int64", 30_000), labels, floats):
        check_node("Unique", {"x": x}, 11, outputs=UNIQUE_OUTPUTS, sorted=is_sorted)
    longest = max(m for m in range(1_800_000, 2_000_000, 64) if nonzero.groups_loops(m) <= nonzero.LOOP_BUDGET)
    assert nonzero.groups_loops(longest + 64) > nonzero.LOOP_BUDGET  # (past it: declined, as Unique.compute says)


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("is_sorted", [1, 0])
def test_unique_slices(ep_devices, axis, is_sorted):
    """Along an axis: slices compared element by element, repeated slices merged."""
    x = _repeats((4, 6, 3), "int64", 2, seed=axis + 5)
    x = np.concatenate([x, np.take(x, [1, 0], axis=axis)], axis=axis)  # (some slices repeat for sure)
    check_node("Unique", {"x": x}, 11, outputs=UNIQUE_OUTPUTS, axis=axis, sorted=is_sorted)
    check_node("Unique", {"x": x.astype(np.float32)}, 11, outputs=UNIQUE_OUTPUTS, axis=axis, sorted=is_sorted)
    check_node("Unique", {"x": x.astype(np.float64)}, 11, outputs=UNIQUE_OUTPUTS, axis=axis, sorted=is_sorted)


@pytest.mark.parametrize("is_sorted", [1, 0])
def test_unique_float64_compares_in_double(ep_devices, is_sorted):
    """float64 items compared in double (unique.comp's FLOAT64 variant): values a float32 compare would merge (1 and
    1 + 2^-40), subnormals, infinities, both zeros (the first occurrence's sign kept), sorted and by pairs of slices;
    the CPU EP's outputs to the bit."""
    x = np.array([1.0, 1 + 2.0 ** -40, -0.0, 5e-324, 1.0, 0.0, -np.inf, 1 + 2.0 ** -40, 1e-310, np.inf, 5e-324, -1.0])
    slices = np.stack([x[:6], x[6:], x[:6], x[:6] * (1 + 2.0 ** -52)])
    for values, axis in ((x, None), (-x, None), (slices, 0)):
        attrs = {"sorted": is_sorted} | ({} if axis is None else {"axis": axis})
        got = check_node("Unique", {"x": values}, 11, outputs=UNIQUE_OUTPUTS, **attrs)
        graph = helper.make_graph([helper.make_node("Unique", ["x"], [n for n, _ in UNIQUE_OUTPUTS], **attrs)], "g",
                                  [helper.make_tensor_value_info("x", 11, values.shape)],
                                  [onnx.ValueInfoProto(name=n) for n, _ in UNIQUE_OUTPUTS])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=10)
        want = runner.cpu_session(model).run(None, {"x": values})
        assert np.array_equal(got[0].view(np.int64), want[0].view(np.int64))  # (values to the bit: -0 kept)


def test_unique_signed_zeros_empty_and_fewer_outputs(ep_devices):
    """-0.0 equals 0.0 and the first occurrence's sign is kept; an empty input; only Y, or Y and indices."""
    x = np.array([0.0, -0.0, 2.5, -0.0, 0.0, -7.0, 2.5], np.float32)
    for is_sorted in (0, 1):
        got = check_node("Unique", {"x": x}, 11, outputs=UNIQUE_OUTPUTS, sorted=is_sorted)[0]
        assert np.signbit(got[got == 0]).tolist() == [False]
        got = check_node("Unique", {"x": -x}, 11, outputs=UNIQUE_OUTPUTS, sorted=is_sorted)[0]
        assert np.signbit(got[got == 0]).tolist() == [True]
    check_node("Unique", {"x": np.zeros((0,), np.float32)}, 11, outputs=UNIQUE_OUTPUTS)
    check_node("Unique", {"x": _repeats((50,), "int64", 7)}, 11, outputs=UNIQUE_OUTPUTS[:1])
    check_node("Unique", {"x": _repeats((50,), "int64", 7)}, 11, outputs=UNIQUE_OUTPUTS[:2], sorted=0)


def test_unique_nan_as_numpy(ep_devices):
    """NaN: ORT's CPU EP keys a std::map with operator<, under which NaN is equivalent to whatever it meets, so its
    answer depends on the map's shape. vkep merges the NaNs into one item sorted last, as numpy.unique does; this
    checks it against numpy, not the CPU EP."""
    x = np.array([2.0, np.nan, 1.0, np.nan, 2.0, -np.inf, np.inf], np.float32)
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [7])],
                              [onnx.ValueInfoProto(name=n) for n in ("y", "indices", "inverse", "counts")])
    session = runner.vkep_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                                                    ir_version=10), disable_cpu_fallback=True)
    got = session.run(None, {"x": x})
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# ---- MaxUnpool -------------------------------------------------------------------------------------------------

def _unpool_case(shape, kernel, strides, pads, seed=0):
    """x and indices into the unpooled output (inferred from the window), repeats among them (the last wins)."""
    rng = np.random.default_rng(seed)
    n = len(kernel)
    out = [(shape[2 + d] - 1) * strides[d] - pads[d] - pads[n + d] + kernel[d] for d in range(n)]
    size = int(np.prod(shape[:2] + tuple(out)))
    return _values(shape, "float32", seed), rng.integers(0, size, shape).astype(np.int64)


@pytest.mark.parametrize("opset", [9, 11, 22])
@pytest.mark.parametrize(("shape", "kernel", "strides", "pads"), [
    ((2, 3, 4, 5), [2, 2], [2, 2], [0, 0, 0, 0]), ((1, 2, 7), [3], [2], [1, 0]),
    ((1, 2, 3, 4, 2), [2, 3, 2], [1, 2, 2], [0, 1, 0, 1, 0, 0]), ((2, 1, 5, 5), [3, 3], [1, 1], [1, 1, 1, 1])])
def test_max_unpool(ep_devices, opset, shape, kernel, strides, pads):
    x, idx = _unpool_case(shape, kernel, strides, pads, seed=opset)
    check_exact("MaxUnpool", {"x": x}, opset, {"i": idx}, kernel_shape=kernel, strides=strides, pads=pads)


def test_max_unpool_after_max_pool_and_output_shape(ep_devices):
    """MaxPool's own indices, unpooled to the inferred shape or to an output_shape at least as large; an empty x."""
    window = {"kernel_shape": [2, 2], "strides": [2, 2]}
    for shape, output_shape in [((2, 3, 6, 6), None), ((2, 3, 6, 7), [2, 3, 6, 7]), ((1, 2, 5, 4), [1, 2, 6, 5])]:
        x = _values(shape, "float32")
        pool = helper.make_node("MaxPool", ["x"], ["p", "i"], **window)
        graph = helper.make_graph([pool], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                                  [helper.make_tensor_value_info("p", 1, None),
                                   helper.make_tensor_value_info("i", 7, None)])
        pooled, idx = runner.cpu_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)],
                                                           ir_version=10)).run(None, {"x": x})
        consts = {"i": idx} | ({} if output_shape is None else {"s": np.array(output_shape, np.int64)})
        check_exact("MaxUnpool", {"x": pooled}, 11, consts, **window)
    check_exact("MaxUnpool", {"x": np.zeros((0, 3, 3, 3), np.float32)}, 22, {"i": np.zeros((0, 3, 3, 3), np.int64)},
                **window)


def test_max_unpool_index_out_of_range_fails(ep_devices):
    x, idx = _unpool_case((1, 1, 2, 2), [2, 2], [2, 2], [0, 0, 0, 0])
    idx[0, 0, 1, 1] = 16
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, x.shape),
                                            helper.make_tensor_value_info("i", 7, idx.shape)],
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=10)
    for session in (runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)):
        with pytest.raises(Exception, match="(?i)out of (range|bounds)"):
            session.run(None, {"x": x, "i": idx})


# ---- Col2Im ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("image", "block", "attrs"), [
    ([5, 5], [1, 5], {}), ([6, 7], [3, 2], {"strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]}),
    ([9], [3], {"strides": [2], "pads": [2, 1]}), ([4, 5, 3], [2, 3, 2], {"strides": [2, 1, 1], "pads": [0, 1, 1, 0, 1, 1]}),
    ([6, 5], [2, 2], {"dilations": [2, 2]})])
def test_col2im(ep_devices, image, block, attrs):
    """1-3 spatial dims, strides, pads and dilations: overlapping blocks summed in the CPU EP's order (bit for bit)."""
    n = len(image)
    strides, dilations = attrs.get("strides", [1] * n), attrs.get("dilations", [1] * n)
    pads = attrs.get("pads", [0] * 2 * n)
    cols = [(image[d] + pads[d] + pads[n + d] - (dilations[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(n)]
    x = _values((2, 3 * int(np.prod(block)), int(np.prod(cols))), "float32")
    check_exact("Col2Im", {"x": x}, 18, {"image": np.array(image, np.int64), "block": np.array(block, np.int64)},
                **attrs)


def test_col2im_dilated_outside_2d_is_declined(ep_devices):
    """ORT's CPU EP places dilated 1-D and 3-D blocks other than ONNX defines: vkep leaves those nodes to it."""
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], dilations=[2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 6, 5])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.array([9], np.int64), "image"),
                               numpy_helper.from_array(np.array([3], np.int64), "block")])
    session = runner.vkep_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10))
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


# ---- CenterCropPad: ORT inlines its function body (no CPU kernel), whose nodes vkep runs -------------------------

@pytest.mark.parametrize("axes", [None, [1, 2], [-1]])
def test_center_crop_pad_runs_on_vkep_inlined(ep_devices, axes):
    x = _values((2, 5, 4), "float32")
    shape = [3, 2, 7] if axes is None else [2, 7][:len(axes)]
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.array(shape, np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0])
