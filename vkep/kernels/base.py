"""What a kernel sees: tensors as (address, shape, dtype) and a `Call` to get outputs and record work.

The ORT layer builds one `Call` per node execution; kernels never see ORT types.
"""

from __future__ import annotations

import functools
import importlib
import math
import struct
from collections.abc import Mapping
from typing import Protocol

import numpy as np

from vkep.gpu.push import PushLayout, PushRangeError
from vkep.kernels.manifest import KernelSpec

# lavapipe (llvmpipe) silently ends a shader's loops after 65,535 iterations in all, per invocation
# (unrolled loops do not count): every kernel keeps each invocation's loop iterations under this, or
# raises UnsupportedError before recording
LOOP_BUDGET = 60000

# SPIR-V treats the indices of an access chain as signed: a shader reaches a tensor's elements up to 2^31 - 1
# (an element past that is addressed below the buffer). Every dispatch checks its tensors against this
# (vkep.ort.kernel), and GetCapability declines nodes whose static shapes exceed it (vkep.ort.ep).
MAX_ELEMENTS = 2**31 - 1

ITEMSIZE = {"float32": 4, "float16": 2, "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
            "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "bfloat16": 2, "int4": 1, "uint4": 1}
# element types stored two to a byte (ONNX: element 2k in the low nibble of byte k); ITEMSIZE holds their
# byte, tensor_bytes their size
NIBBLE_TYPES = {"uint4": 1, "int4": 2}  # (the shaders' NIBBLES specialization constant)
# the shader variant (DTYPE / DTYPE_Y define, see shaders/common.glsl) of each element type (4-bit types: their
# bytes, read by shaders that take NIBBLES)
SHADER_DTYPE = {"float32": 0, "float16": 1, "int32": 2, "int64": 3, "uint8": 4, "bool": 4, "int8": 5,
                "uint4": 4, "int4": 4, "int16": 6, "uint16": 7}


def fast_divisor(d: int) -> tuple[int, int]:
    """(magic, shift) of a divisor for common.glsl's fast_div: n // d = (t + ((n - t) >> 1)) >> shift with
    t = (n * magic) >> 32, exact for every 32-bit n (Granlund and Montgomery's round-up method); d <= 1: (0, 0)."""
    if d <= 1:
        return 0, 0
    log2 = (d - 1).bit_length()  # (ceil(log2 d))
    return ((1 << 32) * ((1 << log2) - d)) // d + 1, log2 - 1


def tensor_bytes(elements: int, dtype: str) -> int:
    """The bytes `elements` elements of `dtype` take."""
    return -(-elements // 2) if dtype in NIBBLE_TYPES else elements * ITEMSIZE[dtype]


EPILOGUE_SUFFIX = "+epilogue"  # a dtype with it: the EPILOGUE variant of a producer (vkep/kernels/epilogue.py)
# a float16 dtype with it: the ACC16 variant of a GEMM-like shader, which multiplies and sums in float16
# (common.glsl's MAC_T; the EP option fp16_accumulation=float16: Kernel.product_dtype)
ACC16_SUFFIX = "+acc16"
# a dtype with it: the FLOAT64 variant of a shader that computes in double where its tensors are float64
# (tree_ensemble.comp); only devices with shaderFloat64 run it
FLOAT64_SUFFIX = "+float64"


def has_float64(info) -> bool:
    """Whether the device (gpu.device.PhysicalDeviceInfo) runs FLOAT64 variants: its shaderFloat64 feature."""
    return bool(info.features.get("shaderFloat64", False))


def declines_float64(info, input_types, out_type: str | None = None) -> str | None:
    """float64 tensors on a device without shaderFloat64 (the FLOAT64 variants compute in double)."""
    if "float64" in [*(input_types or []), out_type] and not has_float64(info):
        return "a float64 tensor on a device without shaderFloat64"
    return None


def holds_constant(call, t: Tensor) -> bool:
    """Whether a planning call (GetCapability's dry run, warmup.DryCall) says the graph holds `t` as a constant: a
    weight the run's kernel will have packed (a run's Call answers no)."""
    holds = getattr(call, "holds_constant", None)
    return bool(holds and holds(t))


def value_variant(t: Tensor) -> str:
    """The variant of a shader that reads `t`'s values: its type's, or for float64 the shader's FLOAT64 variant."""
    return "float32" + FLOAT64_SUFFIX if t.dtype == "float64" else shader_dtype(t)


def _hashable(value):
    """An attribute's value as a dictionary key (lists as tuples, arrays by type, shape and bytes)."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, (list, tuple)):  # (a list of numbers at C speed: a forest's attributes hold millions)
        nested = any(isinstance(v, (list, tuple, np.ndarray)) for v in value[:1])
        return tuple(_hashable(v) for v in value) if nested else tuple(value)
    return value


def offset_tables(header: tuple[str, ...], **arrays) -> bytes:
    """One table for a shader (its `tables` push member): a header of uint32 byte offsets, one for each name of
    `header` in order, then each array at its offset, aligned to 8 bytes (a name not given: an empty array)."""
    blob = bytearray(bytes(-(-4 * len(header) // 8) * 8))
    offsets = []
    for name in header:
        offsets.append(len(blob))
        arr = arrays.get(name)
        if arr is not None:
            blob += np.ascontiguousarray(arr).tobytes()
        blob += bytes(-len(blob) % 8)
    blob[:4 * len(header)] = np.array(offsets, np.uint32).tobytes()
    return bytes(blob)


PACKED_CACHE = 4  # attribute packings kept (_PACKED)
_PACKED: dict[tuple, object] = {}  # (key, attributes) -> what make() packed of them, oldest first


def pack_once(key: tuple, attrs: dict, make):
    """make(), which packs a node's attributes (a tree ensemble, a linear model), once for the checks at
    GetCapability, its dry run and the session's kernel, which each ask for it; `key` tells apart what differs
    besides the attributes (the kernel class, the input type). An UnsupportedError from make() is not kept."""
    full = (*key, tuple(sorted((k, _hashable(v)) for k, v in attrs.items())))
    found = _PACKED.get(full)
    if found is None:
        found = _PACKED[full] = make()
        while len(_PACKED) > PACKED_CACHE:
            _PACKED.pop(next(iter(_PACKED)))
    return found
_SUFFIX_DEFINES = {EPILOGUE_SUFFIX: "EPILOGUE", ACC16_SUFFIX: "ACC16", FLOAT64_SUFFIX: "FLOAT64"}


def variant(dtype: str | tuple[str, str]) -> dict[str, int]:
    """The -D defines of a shader variant: one element type, or (input type, output type); a type with
    EPILOGUE_SUFFIX adds EPILOGUE (shaders/epilogue.glsl), with ACC16_SUFFIX ACC16 (common.glsl), with FLOAT64_SUFFIX
    FLOAT64."""
    for suffix, define in _SUFFIX_DEFINES.items():
        if isinstance(dtype, str) and dtype.endswith(suffix):
            return {**variant(dtype[:-len(suffix)]), define: 1}
    try:
        if isinstance(dtype, tuple):
            x, y = dtype
            return {"DTYPE": SHADER_DTYPE[x], "DTYPE_Y": SHADER_DTYPE[y]}
        return {"DTYPE": SHADER_DTYPE[dtype]}
    except KeyError as exc:
        raise UnsupportedError(f"element type {exc.args[0]} has no shader variant") from None


class UnsupportedError(ValueError):
    """The kernel cannot run this input (shape, rank, type); ORT reports it as a failed status."""


def axis_in(axis: int, rank: int, op: str, inclusive_end: bool = False) -> int:
    """`axis` as an index into `rank` dimensions ([-rank, rank - 1], or [-rank, rank] where the op allows the
    end, as Flatten's does); out of range fails the run as ORT's CPU EP does."""
    end = rank if inclusive_end else rank - 1
    if not -rank <= axis <= end:
        raise UnsupportedError(f"{op}: axis {axis} is not in valid range [{-rank},{end}]")
    return axis + rank if axis < 0 else axis


class Tensor:
    """A tensor as kernels see it. `io` says where it came from, so a call can be replayed with new
    addresses: input i → i, output j → -1-j, the call's scratch memory k → SCRATCH + k, memory that outlives
    the call (weights) → PERSISTENT. (The codes of the C plan: VKEP_IO_CONST, VKEP_IO_SCRATCH.)"""

    __slots__ = ("addr", "shape", "dtype", "io")
    PERSISTENT = 1000
    SCRATCH = 2000

    def __init__(self, addr: int, shape: tuple[int, ...], dtype: str, io: int | None = None):
        self.addr = addr
        self.shape = shape
        self.dtype = dtype
        self.io = io

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def view(self, offset: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        """A tensor `offset` bytes into this one's memory, of its own shape (and type): its io is this one's, so a
        plan re-addresses it; address 0 (a dry run's) stays 0."""
        return Tensor(self.addr + offset if self.addr else 0, tuple(shape), dtype or self.dtype, self.io)

    @property
    def nbytes(self) -> int:
        return tensor_bytes(self.size, self.dtype)

    def __repr__(self) -> str:
        return f"Tensor(0x{self.addr:x}, {self.shape}, {self.dtype})"


def encode_dispatch(layout: PushLayout, values: Mapping[str, object], reads: list[Tensor],
                    writes: list[Tensor]) -> tuple[list[Tensor | None], bytes, bytes]:
    """(the tensors whose addresses lead the push constants, the push constants, hazard spans) of a dispatch
    whose push-constant members are `values` by name: the tensors' addresses (None: 0) then the other members
    at their offsets, and the (start, end) byte ranges it reads, then writes."""
    try:
        addresses, tail = layout.encode(values)
    except PushRangeError as exc:
        raise UnsupportedError(f"a size or attribute does not fit the shader's parameters ({exc})") from None
    push = struct.pack(f"<{len(addresses)}Q", *[t.addr if t is not None else 0 for t in addresses]) + tail
    return addresses, push, hazard_spans(reads, writes)


def hazard_spans(reads: list[Tensor], writes: list[Tensor]) -> bytes:
    """The (start, end) byte ranges a dispatch reads, then writes, as the recorder's hazard tracking takes them."""
    return struct.pack(f"<{2 * (len(reads) + len(writes))}Q",
                       *[x for t in reads + writes for x in (t.addr, t.addr + t.nbytes)])


class Call(Protocol):
    """One execution of one node (implemented by vkep.ort.kernel)."""

    inputs: list[Tensor | None]

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor: ...

    def error_word(self) -> Tensor:
        """The device's error word, for shaders that report an index out of range (common.glsl)."""

    def dispatch(self, shader: str, dtype: str | tuple[str, str], constants: Mapping[str, int | float],
                 push: Mapping[str, object], groups: tuple[int, int, int], reads: list[Tensor],
                 writes: list[Tensor]) -> None:
        """Record a dispatch of the shader's variant for `dtype` (or (input, output) types), built with the
        specialization constants `constants` by name (those not given keep the shader's defaults), whose
        push-constant block is filled from `push` by member name (vkep.gpu.push: every member, a tensor or None
        for each address, numbers or sequences of them for the rest)."""

    def begin_loop(self) -> None:
        """The dispatches recorded from here to end_loop are the steps of a loop (see end_loop)."""

    def end_loop(self, times: int, counter: str) -> None:
        """The dispatches since begin_loop are `times` steps of equal dispatches but for the uint32 push member
        `counter`, one more each step (a recurrence's): a plan holds one step and repeats it in C (vkep_plan's
        loop), so that a sequence replays natively whatever its length (within one batch of commands)."""

    def scratch(self, shape: tuple[int, ...], dtype: str) -> Tensor:
        """Device memory for this call's own use while its work runs (the device's one stream orders its
        reuse, as for values ORT frees)."""

    def persistent(self, data: bytes) -> Tensor:
        """Device memory holding `data` for as long as the kernel lives (a shader's table), shared with every
        kernel that asks for the same bytes; the same bytes give the same tensor on every call."""

    def state(self, nbytes: int) -> Tensor:
        """Device memory of this kernel's own, zeroed when first asked for, that its shaders read and write from
        run to run (a random generator's draws); the same tensor on every call."""

    def fills_state(self) -> bool:
        """This call's work fills memory that later calls read (`state`: a table built once): the call is not
        replayed, so a later one, which skips that work, makes the plan. True where its work runs; False where
        nothing runs (a dry run), so the kernel must not count on it."""

    def copy(self, src: Tensor, dst: Tensor) -> None: ...

    def read_host(self, tensor: Tensor) -> bytes: ...

    def write_host(self, tensor: Tensor, data: bytes) -> None:
        """Fill a CPU output (declared in `cpu_outputs`)."""

    def upload(self, host: Tensor, dst: Tensor) -> None:
        """CPU memory → device tensor, ordered after the work already recorded on this call's stream."""

    def download(self, src: Tensor, host: Tensor) -> None:
        """Device tensor → CPU memory, once the work recorded so far has completed."""

    def read_device(self, tensor: Tensor) -> bytes:
        """The bytes of a device tensor this call wrote, once its work so far has completed: a stall, for an
        output whose shape depends on values (NonZero); such a call is not replayed."""


class Kernel:
    """Base of every op implementation: created once per node at session creation."""

    output_count: int | None = None  # how many outputs the node has (set by the runtime)
    draws_on = False  # its outputs continue from its earlier runs (a random engine's state, Call.state)
    # its INTS and FLOATS attributes are read as numpy arrays (int64, float32), not lists: a forest's hold millions
    array_attributes = False
    device_info = None  # the gpu.device.PhysicalDeviceInfo it runs on (set by the runtime)
    # (shape, dtype) per input as the graph declares it, None when a shape is symbolic (set by the runtime)
    declared_inputs: list[tuple] | None = None
    variadic = False  # its op takes any number of inputs (Concat, Sum...): up to vkep.ort.ep.MAX_PACKED_INPUTS
    computes_float64 = False  # its float64 work is arithmetic in double (FLOAT64 variants), not moves: see declines_on

    def __init__(self, spec: KernelSpec, attrs: dict, since_version: int, input_types: list[str]):
        self.spec = spec
        self.attrs = attrs
        self.since_version = since_version
        self.input_types = input_types
        problem = self.invalid_attribute()
        if problem:  # fails session creation, as ORT's CPU EP does for the same node
            raise UnsupportedError(f"{spec.op}: invalid attribute {problem}")

    @functools.cached_property
    def constants(self) -> dict[str, int]:
        """The specialization constants of the kernel's shader by name: the manifest's `constants` (matched to
        the shader's declarations when its pipeline is built). A kernel may assign its own."""
        return dict(self.spec.constants)

    def invalid_attribute(self) -> str | None:
        """'name=value: why' for an attribute no input can make valid (the session then fails to be
        created), or None."""
        return None

    def compute(self, call: Call) -> None:
        raise NotImplementedError

    @classmethod
    def declines(cls, spec: KernelSpec, attrs: dict, since_version: int, input_ranks: list[int | None],
                 input_types: list[str | None]) -> str | None:
        """Why this kernel cannot run a node with these attributes, input ranks (None: absent optional
        input, -1: rank unknown) and input element types (None: absent or unknown); checked when the
        runtime partitions the graph, so the node stays on another EP. None when it can."""
        return None

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types: list[str | None]) -> str | None:
        """Why this kernel cannot run a node with these attributes and input types on the device `info`
        (gpu.device.PhysicalDeviceInfo) describes, e.g. a feature it lacks; checked when the runtime partitions
        the graph. None when it can. A kernel that computes_float64 declines float64 tensors where the device has
        no shaderFloat64."""
        return declines_float64(info, input_types) if cls.computes_float64 else None

    @classmethod
    def declines_dims(cls, attrs: dict, input_dims: list[tuple[int, ...] | None]) -> str | None:
        """Why this kernel cannot run inputs of these declared dimensions (-1: a dimension the graph leaves free;
        None: rank unknown or input absent), for what a free dimension does not change (a fully declared node is
        also planned dry: vkep.ort.ep.refused_in_a_dry_run). None when it can."""
        return None

    def composed(self, op: str) -> Kernel:
        """The kernel of ONNX op `op` (float32, no attributes) that this kernel runs part of its work through
        (recurrent.py's and ConvTranspose's products: matmul.product), made once, on this kernel's device."""
        found = self.__dict__.setdefault("_composed_kernels", {}).get(op)
        if found is None:
            spec = onnx_spec(op)
            found = self.__dict__["_composed_kernels"][op] = implementation(spec)(spec, {}, spec.since[-1],
                                                                                   ["float32"] * 3)
            found.device_info, found.output_count = self.device_info, 1
        return found

    def planned(self, key, make):
        """The plan for `key` (typically the input shapes), made once by `make()`: a kernel's host-side
        planning runs once per shape, not once per call."""
        plans = self.__dict__.setdefault("_plan_cache", {})
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = make()
        return plan

    def pack(self, index: int, weight: np.ndarray) -> tuple[np.ndarray, str]:
        """A constant input (listed in the manifest's `prepack`) in the layout and precision this kernel
        reads; returns (packed array, tag naming the packing). The packed tensor then arrives in
        `call.inputs[index]`, uploaded once and shared by every kernel that packs the same bytes alike."""
        return weight, "raw"

    def product_dtype(self, t: Tensor) -> str:
        """The variant of a GEMM-like shader (matmul.comp, conv.comp) for operands like `t`: shader_dtype(t), and
        for float16 in a session with fp16_accumulation=float16 its ACC16 variant (products summed in float16)."""
        dtype = shader_dtype(t)
        if dtype == "float16" and self.device_info is not None and self.device_info.fp16_accumulation == "float16":
            return dtype + ACC16_SUFFIX
        return dtype

    def dispatch_1d(self, call: Call, n: int, wg: int, dtype: str, push: Mapping[str, object], reads, writes,
                    constants: Mapping[str, int] | None = None) -> None:
        """Dispatch ceil(n / wg) workgroups (grid_1d) of the kernel's shader."""
        call.dispatch(self.spec.shader, dtype, self.constants if constants is None else constants, push,
                      grid_1d(n, wg), reads, writes)


def padded(values, count: int) -> list:
    """`values` (inputs, their ranks or types) with None for the optional ones left off the end: `count` in all."""
    return list(values) + [None] * (count - len(values))


GRID_FOLD = 65535  # (common.glsl GRID_FOLD)


def grid_1d(n: int, wg: int) -> tuple[int, int, int]:
    """ceil(n / wg) workgroups, folded into rows of GRID_FOLD past it: one dispatch up to 65535^2 groups on
    any device (Vulkan's minimum limit); a shader reads the flat index as common.glsl FLAT_ID / FLAT_GROUP.
    Past the device's limit in y the recorder splits the grid (shaders with GROUP_BASE)."""
    groups = max(1, -(-n // wg))
    return (groups, 1, 1) if groups <= GRID_FOLD else (GRID_FOLD, -(-groups // GRID_FOLD), 1)


def shader_dtype(t: Tensor) -> str:
    if t.dtype not in SHADER_DTYPE:
        raise UnsupportedError(f"element type {t.dtype} has no shader variant")
    return t.dtype


# the variant that moves a type which has none of its own: the integer type of its width
_MOVED_AS = {"float64": "int64", "uint64": "int64", "uint32": "int32"}


def moved_type(dtype: str) -> str:
    """The element type whose variant moves `dtype`'s elements: its own, else the integer type of its width."""
    return _MOVED_AS.get(dtype, dtype)


def moved_dtype(t: Tensor) -> str:
    """The variant of a kernel that only moves `t`'s elements, never computes with them (Transpose, Concat,
    Gather, ...): its own type's, else the integer type of the same width (float64 moves as int64)."""
    dtype = moved_type(t.dtype)
    if dtype not in SHADER_DTYPE:
        raise UnsupportedError(f"element type {t.dtype} has no shader variant")
    return dtype


# Vulkan features each element type needs in a shader (16-/8-bit storage and arithmetic)
DTYPE_FEATURES = {"float16": ("storageBuffer16BitAccess",), "uint8": ("storageBuffer8BitAccess", "shaderInt8"),
                  "int4": ("storageBuffer8BitAccess", "shaderInt8"), "uint4": ("storageBuffer8BitAccess", "shaderInt8"),
                  "bool": ("storageBuffer8BitAccess", "shaderInt8"), "int8": ("storageBuffer8BitAccess", "shaderInt8"),
                  "int16": ("storageBuffer16BitAccess", "shaderInt16"), "uint16": ("storageBuffer16BitAccess", "shaderInt16")}


def device_supports(features: dict[str, bool], dtype: str) -> bool:
    return all(features.get(f, False) for f in DTYPE_FEATURES.get(dtype, ()))


def float_bits(x: float) -> int:
    """x as the bits of a float32 (for push constants that carry either a float or an integer)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def onnx_spec(op: str) -> KernelSpec:
    """The manifest entry of an ONNX-domain kernel that another kernel composes (the newest one)."""
    from vkep.kernels import manifest

    return [s for s in manifest.registered() if s.op == op and s.domain in ("", "ai.onnx")][-1]


class Redirect:
    """A call seen by a composed kernel: its own inputs, and its output 0 placed at `out` (or the node's) and
    other outputs at the tensors `outputs` gives by index."""

    def __init__(self, call, inputs: list[Tensor | None], out: Tensor | dict[int, Tensor] | None = None):
        self.call, self.inputs = call, inputs
        self.outputs = out if isinstance(out, dict) else {} if out is None else {0: out}

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        found = self.outputs.get(index)
        return found if found is not None else self.call.output(index, shape, dtype)

    def __getattr__(self, name: str):
        return getattr(self.call, name)


def implementation(spec: KernelSpec) -> type[Kernel]:
    module, cls = spec.impl.rsplit(".", 1)
    return getattr(importlib.import_module(f"vkep.kernels.{module}"), cls)
