"""What the differential fuzz tests share (tests/test_fuzz*.py): hypothesis settings, a one-node model
builder, the vkep / CPU EP pair, the comparison, and a record of which ops the fuzzer actually ran on vkep
(so that a fuzzer whose every case vkep declines fails instead of passing vacuously).

VKEP_FUZZ_EXAMPLES sets the examples per test (25 unless set); VKEP_FUZZ_SPECIAL=1 mixes NaN, ±Inf, −0,
denormals and extreme values into float inputs. Runs are derandomized (the same cases every time) unless
VKEP_FUZZ_FRESH=1: then each run draws new cases, or those of `pytest --hypothesis-seed=N`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import helper

import vkep
from vkep import runner

EXAMPLES = int(os.environ.get("VKEP_FUZZ_EXAMPLES", "25"))
SPECIAL = os.environ.get("VKEP_FUZZ_SPECIAL", "0") not in ("", "0")
FRESH = os.environ.get("VKEP_FUZZ_FRESH", "0") not in ("", "0")
ONNX_TYPES = {"float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16, "int32": onnx.TensorProto.INT32,
              "int64": onnx.TensorProto.INT64, "int8": onnx.TensorProto.INT8, "uint8": onnx.TensorProto.UINT8,
              "bool": onnx.TensorProto.BOOL, "float64": onnx.TensorProto.DOUBLE, "int16": onnx.TensorProto.INT16,
              "uint16": onnx.TensorProto.UINT16, "uint32": onnx.TensorProto.UINT32,
              "uint64": onnx.TensorProto.UINT64}
SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1e38]

FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not FRESH,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

# op -> how many fuzz cases ran that op on vkep (by ORT's assignment record), over this process
RAN_ON_VKEP: Counter[str] = Counter()


def values(draw, shape, dtype: str, seed: int) -> np.ndarray:
    """Random values of `dtype`: normal floats at a random scale (specials mixed in under
    VKEP_FUZZ_SPECIAL), integers in [-50, 50] clipped to the type, booleans."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)  # (a rank-0 draw is a numpy scalar, which ORT refuses)
    if dtype.startswith("float"):
        x = np.asarray(rng.standard_normal(shape) * draw(st.sampled_from([0.5, 3.0, 50.0])), dtype)
        if SPECIAL and x.size:
            flat = x.reshape(-1)
            idx = rng.integers(0, flat.size, size=max(1, flat.size // 3))
            flat[idx] = rng.choice(np.array(SPECIALS, dtype=np.float64), size=idx.size).astype(dtype)
        return x
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -50), min(info.max, 50)
    return np.asarray(rng.integers(lo, hi + 1, size=shape), dtype)


def model(op: str, inputs, opset: int, attrs: dict | None = None, inits=(), ir_version: int = 8,
          outputs: int = 1, domain: str = "", input_names: list[str] | None = None,
          symbolic: bool = False) -> onnx.ModelProto:
    """One `op` node over graph inputs x0, x1, ... (of the arrays `inputs`) and then the initializers
    `inits`, with outputs y0, y1, ...; `input_names` orders them otherwise ("" for an absent input).
    `symbolic` declares the inputs' dimensions by name only (so ORT cannot fold what their shapes decide)."""
    graph_inputs = [f"x{i}" for i in range(len(inputs))]
    names = input_names if input_names is not None else graph_inputs + [t.name for t in inits]
    node = helper.make_node(op, names, [f"y{i}" for i in range(outputs)], domain=domain, **(attrs or {}))
    graph = helper.make_graph([node], "fuzz", [helper.make_tensor_value_info(
        name, ONNX_TYPES[str(v.dtype)], [f"{name}_{d}" for d in range(v.ndim)] if symbolic else list(v.shape))
        for name, v in zip(graph_inputs, inputs, strict=True)],
        [onnx.ValueInfoProto(name=f"y{i}") for i in range(outputs)], list(inits))  # (ORT infers their types)
    # (a node of another domain: `opset` is that domain's; the ONNX domain then at 21)
    opsets = [helper.make_opsetid(domain, opset), helper.make_opsetid("", 21)] if domain else [
        helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def run_both(m: onnx.ModelProto, inputs) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every output on vkep and on the CPU EP; a case the CPU EP rejects is not one (assume). Where vkep
    ran the node, RAN_ON_VKEP counts it."""
    data = m.SerializeToString()
    feeds = {f"x{i}": v for i, v in enumerate(inputs)}
    try:
        want = runner.cpu_session(data).run(None, feeds)
    except Exception:  # noqa: BLE001 — the reference rejects it (a type or shape the schema or CPU EP lacks)
        assume(False)
    session = runner.vkep_session(data)
    got = session.run(None, feeds)
    for _, op, ep in runner.placement(session):
        if ep == vkep.EP_NAME:
            RAN_ON_VKEP[op] += 1
    return got, want


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-3, atol: float = 1e-5) -> bool:
    """Same shape and type; integers equal; floats within tolerance (wider for fp16), NaN equal to NaN."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind not in "fc":
        return bool(np.array_equal(got, want))
    if got.dtype == np.float16:
        rtol, atol = max(rtol, 1e-2), max(atol, 1e-3)
    return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True, rtol=rtol, atol=atol))


def all_close(got: list[np.ndarray], want: list[np.ndarray], **tol) -> bool:
    return len(got) == len(want) and all(close(g, w, **tol) for g, w in zip(got, want, strict=True))


# ---- one-node cases from a seed, by family ------------------------------------------------------------------

INTS = ("int32", "int64", "int8", "uint8")
TYPES = ("float32", "float16") + INTS + ("bool",)


@dataclass
class Case:
    """One node: graph inputs `inputs` (x0, x1, ...), then initializers `consts` (by name), or the node's
    inputs in the order `names` ("" for an absent one)."""

    op: str
    opset: int
    inputs: list[np.ndarray]
    attrs: dict = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: int = 1
    names: list[str] | None = None
    tol: dict = field(default_factory=dict)
    domain: str = ""
    symbolic: bool = False  # input dimensions named, not given (ORT folds a Shape of known dimensions)
    expect: list[np.ndarray] | None = None  # the reference where the CPU EP's own answer is wrong (say why)


def shape_of(rng, rank: int, low: int = 1, high: int = 5, empty: float = 0.1) -> list[int]:
    """`rank` dimensions in [low, high), each zero with probability `empty`."""
    return [int(rng.integers(0 if rng.random() < empty else low, high)) for _ in range(rank)]


def data(rng, shape, dtype: str, scale: float = 3.0) -> np.ndarray:
    """(np.asarray: a rank-0 draw is a numpy scalar, which ORT refuses as a feed)"""
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)
    if dtype.startswith("float"):
        return np.asarray(rng.standard_normal(shape) * scale, dtype)
    info = np.iinfo(dtype)
    return np.asarray(rng.integers(max(info.min, -50), min(info.max, 50) + 1, size=shape), dtype)


def run_case(case: Case) -> None:
    """`case` on vkep and on the CPU EP: every output must agree."""
    inits = [onnx.numpy_helper.from_array(v, name) for name, v in case.consts.items()]
    m = model(case.op, case.inputs, case.opset, case.attrs, inits, ir_version=10, outputs=case.outputs,
              domain=case.domain, input_names=case.names, symbolic=case.symbolic)
    got, want = run_both(m, case.inputs)
    if case.expect is not None:
        want = case.expect
    assert all_close(got, want, **case.tol), (case.op, case.opset, case.attrs, case.consts,
                                              [(v.dtype, v.shape) for v in case.inputs], got, want)


Family = Callable[[np.random.Generator], Case | None]


def fuzz_family(family: Family, ops: tuple[str, ...]) -> None:
    """Run `family`'s examples; then every op it names must have run on vkep at least once."""
    before = RAN_ON_VKEP.copy()

    @FUZZ
    @given(st.integers(0, 2**31 - 1))
    def check(seed: int) -> None:
        case = family(np.random.default_rng(seed))
        assume(case is not None)
        run_case(case)

    check()
    missing = [op for op in ops if RAN_ON_VKEP[op] == before[op]]
    assert not missing, f"no {family.__name__} case of {missing} ran on vkep"


