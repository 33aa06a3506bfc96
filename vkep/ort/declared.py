"""What a graph declares of its nodes (op, domain, name) and of the values they read and write (ORT's
inferred types and shapes)."""

from __future__ import annotations

from vkep.ort import abi, api


def op_type(node) -> str:
    return _text(api.lib.ort_Node_GetOperatorType, node)


def domain(node) -> str:
    return _text(api.lib.ort_Node_GetDomain, node)


def name(node) -> str:
    return _text(api.lib.ort_Node_GetName, node)


def _text(get, node) -> str:
    out = api.ffi.new("const char**")
    api.check(get(node, out))
    return api.ffi.string(out[0]).decode()


def value_infos(node, outputs: bool = False) -> list:
    """The OrtValueInfo of each input (or output), NULL for an absent optional one."""
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check((lib.ort_Node_GetNumOutputs if outputs else lib.ort_Node_GetNumInputs)(node, count))
    infos = ffi.new("const OrtValueInfo*[]", max(count[0], 1))
    api.check((lib.ort_Node_GetOutputs if outputs else lib.ort_Node_GetInputs)(node, infos, count[0]))
    return list(infos[0:count[0]])


def names(node, outputs: bool = False) -> tuple[str, ...]:
    """The names of the node's inputs (or outputs), "" for an absent optional one."""
    lib, ffi = api.lib, api.ffi
    name = ffi.new("const char**")
    found = []
    for info in value_infos(node, outputs):
        if info == ffi.NULL:
            found.append("")
            continue
        api.check(lib.ort_GetValueInfoName(info, name))
        found.append(ffi.string(name[0]).decode())
    return tuple(found)


def output_names(node) -> tuple[str, ...]:
    """The names of the node's outputs ("" for an absent optional one): unique in a graph, so they name the
    node from GetCapability to its kernel's creation."""
    return names(node, outputs=True)


def values(node, outputs: bool = False) -> list[tuple[list[int] | None, str | None] | None]:
    """What the graph declares of each input (or output): (dims, -1 where symbolic, or None where it declares
    no shape; element type, or None where unknown), or None for an absent optional one."""
    return [None if info == api.ffi.NULL else declared(info) for info in value_infos(node, outputs)]


def _tensor_info(info):
    """The OrtTensorTypeAndShapeInfo of a value info, or None where it is no tensor (or ORT cannot say)."""
    lib, ffi = api.lib, api.ffi
    type_info, tensor_info = ffi.new("const OrtTypeInfo**"), ffi.new("const OrtTensorTypeAndShapeInfo**")
    status = lib.ort_GetValueInfoTypeInfo(info, type_info)
    if status == ffi.NULL:
        status = lib.ort_CastTypeInfoToTensorInfo(type_info[0], tensor_info)
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
        return None
    return tensor_info[0] if tensor_info[0] != ffi.NULL else None


def _rank(tensor_info):
    """The declared rank, None where no shape is declared (GetDimensionsCount would say 0, as for a scalar), -1
    where ORT cannot say."""
    lib, ffi = api.lib, api.ffi
    if not lib.ort_TensorTypeAndShape_HasShape(tensor_info):
        return None
    rank = ffi.new("size_t*")
    status = lib.ort_GetDimensionsCount(tensor_info, rank)
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
        return -1
    return rank[0]


def declared(info) -> tuple[list[int] | None, str | None]:
    """(dims or None, element type or None) of one value info (see values)."""
    lib, ffi = api.lib, api.ffi
    tensor_info = _tensor_info(info)
    if tensor_info is None:
        return None, None  # not a tensor
    elem = ffi.new("int*")
    status = lib.ort_GetTensorElementType(tensor_info, elem)
    dims, rank = None, _rank(tensor_info) if status == ffi.NULL else None
    if rank == -1:
        return None, None
    if rank is not None:
        buf = ffi.new("int64_t[]", max(rank, 1))
        status = lib.ort_GetDimensions(tensor_info, buf, rank)
        dims = list(buf[0:rank])
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
        return None, None
    return dims, abi.ELEMENT_TYPES.get(elem[0])


def dim_params(info) -> list[str] | None:
    """The symbolic name of each dim of a value info ("" where the dim is a number or unnamed), or None where it
    declares no shape."""
    lib, ffi = api.lib, api.ffi
    tensor_info = _tensor_info(info)
    rank = _rank(tensor_info) if tensor_info is not None else None
    if rank is None or rank < 0:
        return None
    names = ffi.new("const char*[]", max(rank, 1))
    status = lib.ort_GetSymbolicDimensions(tensor_info, names, rank)
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
        return None
    return [ffi.string(names[k]).decode(errors="replace") if names[k] != ffi.NULL else "" for k in range(rank)]


CONSTANT_READ_LIMIT = 1 << 16  # bytes: the small constants kernels read on the host (shapes, sizes, axes)


def is_constant(info) -> bool:
    """Whether the graph holds the value as a constant initializer (whatever its size)."""
    lib, ffi = api.lib, api.ffi
    if info == ffi.NULL:
        return False
    flag = ffi.new("bool*")
    status = lib.ort_ValueInfo_IsConstantInitializer(info, flag)
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
        return False
    return bool(flag[0])


def constant_bytes(info, limit: int | None = CONSTANT_READ_LIMIT) -> bytes | None:
    """The bytes of a value the graph holds as a constant initializer (up to `limit` bytes; None: any size), else
    None: lets GetCapability plan a kernel over the CPU inputs it reads (Resize's sizes, Reshape's shape)."""
    if not is_constant(info):
        return None
    lib, ffi = api.lib, api.ffi
    value, size, data = ffi.new("const OrtValue**"), ffi.new("size_t*"), ffi.new("void**")
    for status in (lambda: lib.ort_ValueInfo_GetInitializerValue(info, value),
                   lambda: lib.ort_GetTensorSizeInBytes(value[0], size) if value[0] != ffi.NULL else ffi.NULL):
        result = status()
        if result != ffi.NULL:
            lib.ort_ReleaseStatus(result)
            return None
    if value[0] == ffi.NULL or (limit is not None and size[0] > limit):
        return None
    api.check(lib.ort_GetTensorMutableData(ffi.cast("OrtValue*", value[0]), data))
    return ffi.buffer(ffi.cast("char*", data[0]), size[0])[:]


_ATTR_TYPES = {"int": (1, "int64_t"), "ints": (2, "int64_t"), "float": (3, "float"), "floats": (4, "float"),
               "string": (5, "char"), "strings": (6, "char")}


def ortvalue_array(value):
    """A CPU OrtValue's tensor (a TENSOR attribute) as a numpy array of its own."""
    import numpy as np

    lib, ffi = api.lib, api.ffi
    type_, rank, ptr = ffi.new("int*"), ffi.new("int*"), ffi.new("uint64_t*")
    dims = ffi.new("int64_t[8]")
    api.check(lib.vkep_tensor_info(value, type_, dims, rank, ptr))
    dtype = np.dtype(abi.ELEMENT_TYPES[type_[0]] if type_[0] != 9 else "bool")
    array = np.empty(tuple(dims[i] for i in range(rank[0])), dtype)
    if array.nbytes:
        ffi.memmove(ffi.cast("void*", array.ctypes.data), ffi.cast("void*", ptr[0]), array.nbytes)
    return array


def attribute(node, name: str, kind: str, as_array: bool = False):
    """An attribute of a graph node (None when absent or of a kind not read here); INTS and FLOATS as numpy arrays
    where `as_array`."""
    lib, ffi = api.lib, api.ffi
    attr = ffi.new("const OrtOpAttr**")
    status = lib.ort_Node_GetAttributeByName(node, name.encode(), attr)
    if status != ffi.NULL:  # not set on this node
        lib.ort_ReleaseStatus(status)
        return None
    if attr[0] == ffi.NULL:
        return None
    if kind == "tensor":  # (ORT >= 1.23)
        value = ffi.new("OrtValue**")
        api.check(lib.ort_OpAttr_GetTensorAttributeAsOrtValue(attr[0], value))
        try:
            return ortvalue_array(value[0])
        finally:
            lib.ort_ReleaseValue(value[0])
    if kind not in _ATTR_TYPES:
        return None
    code, ctype = _ATTR_TYPES[kind]
    size = ffi.new("size_t*")
    status = lib.ort_ReadOpAttr(attr[0], code, ffi.NULL, 0, size)  # asks for the size
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
    n = max(size[0] // ffi.sizeof(ctype), 1)
    buf = ffi.new(f"{ctype}[]", n)
    api.check(lib.ort_ReadOpAttr(attr[0], code, buf, n * ffi.sizeof(ctype), size))
    if kind == "string":
        return ffi.string(buf, size[0]).decode()
    if kind == "strings":  # each string ends with a NUL
        return bytes(ffi.buffer(buf, size[0])).decode().split("\0")[:-1]
    return c_list(buf, size[0] // ffi.sizeof(ctype), as_array) if kind in ("ints", "floats") else buf[0]


def c_list(buf, count: int, as_array: bool = False):
    """The first `count` numbers of a cffi array of int64_t or float as a list, or a numpy array of their own where
    `as_array` (through numpy: a forest's attributes hold millions, which list(buf) reads one by one)."""
    import numpy as np

    dtype = np.int64 if api.ffi.typeof(buf).item.cname == "int64_t" else np.float32
    values = np.frombuffer(api.ffi.buffer(buf, count * np.dtype(dtype).itemsize), dtype)
    return values.copy() if as_array else values.tolist()
