"""vkep's declarations of ORT's ABI against ORT's own C headers: the slot of every function vkep calls in
each function table (OrtApi, OrtEpApi, OrtInteropApi: vkep/ort/abi.py, which the plugin build, vkep/interop.py
and the tools read), the members of every struct vkep fills or reads (vkep/ort/native/ort_abi.h, declared
to cffi by the plugin and by interop.py), and the codes of ORT's enums vkep uses (element types, external
handle types). A slot off by one calls another function; a struct member out of place or of another type is
read through the wrong offset; a wrong element code reinterprets a tensor: each fails here instead.

The headers are ORT's (onnxruntime_c_api.h, onnxruntime_ep_c_api.h), read from VKEP_ORT_HEADERS or from
../shared/reference/onnxruntime-headers beside the checkout; the pip package of ORT has none, so without
them this test skips, saying where it looked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from vkep import interop
from vkep.ort import _plugin_build, abi

ROOT = Path(__file__).resolve().parents[1]
HEADERS = Path(os.environ.get("VKEP_ORT_HEADERS", ROOT.parent / "shared" / "reference" / "onnxruntime-headers"))
ABI_H = ROOT / "vkep" / "ort" / "native" / "ort_abi.h"


def _headers() -> str:
    files = [HEADERS / "onnxruntime_c_api.h", HEADERS / "onnxruntime_ep_c_api.h"]
    if not all(f.exists() for f in files):
        pytest.skip(f"ORT's C headers are not at {HEADERS} (set VKEP_ORT_HEADERS)")
    return "\n".join(f.read_text() for f in files)


def _uncommented(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _struct_body(text: str, name: str) -> str | None:
    """The members of `struct name { ... }` (or `typedef struct name { ... }`) in `text`, uncommented."""
    match = re.search(r"struct\s+" + name + r"\s*\{", text)
    if not match:
        return None
    depth, i = 1, match.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return _uncommented(text[match.end():i - 1])


def _member_names(body: str) -> list[str]:
    """Member names in order: ORT's macros (ORT_API2_STATUS, ORT_API_T, ORT_CLASS_RELEASE), function
    pointers `(ORT_API_CALL* Name)` / `(*Name)`, and plain fields."""
    names = []
    for member in (m.strip() for m in body.split(";")):
        if not member:
            continue
        found = (re.match(r"ORT_API2_STATUS\(\s*(\w+)", member) or re.match(r"ORT_API_T\([^,]+,\s*(\w+)", member)
                 or re.search(r"\(\s*(?:ORT_API_CALL\s*)?\*\s*(\w+)\s*\)", member))
        if member.startswith("ORT_CLASS_RELEASE"):
            names.append("Release" + re.match(r"ORT_CLASS_RELEASE2?\(\s*(\w+)", member).group(1))
        elif found:
            names.append(found.group(1))
        else:
            names.append(re.findall(r"\w+", member)[-1])
    return names


def _data_member_types(body: str, enums: set[str]) -> dict[str, str]:
    """name -> type of each member that is not a function pointer, normalized: no `const`, `struct`, `enum`
    or spaces, and an enum type is `int` (its size in C on every platform ORT supports)."""
    types = {}
    for member in (m.strip() for m in body.split(";")):
        if not member or "(" in member:
            continue
        *words, name = re.findall(r"\w+|\*", member)
        words = ["int" if w in enums else w for w in words if w not in ("const", "struct", "enum")]
        types[name] = "".join(words)
    return types


def _enums(text: str) -> dict[str, dict[str, int]]:
    """Every `typedef enum Name { A, B = 3, C = B, ... }` in `text`: name -> {enumerator: value} (None for a
    value computed by an expression, and for the implicit ones after it)."""
    found = {}
    for name, body in re.findall(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}", _uncommented(text), flags=re.S):
        values, next_value = {}, 0
        for item in (i.strip() for i in body.split(",")):
            if item:
                key, _, value = (part.strip() for part in item.partition("="))
                if value:
                    next_value = values[value] if value in values else (
                        int(value, 0) if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", value) else None)
                values[key] = next_value
                next_value = None if next_value is None else next_value + 1
        found[name] = values
    return found


TABLES = [("ORT_API", "OrtApi"), ("EP_API", "OrtEpApi"), ("INTEROP_API", "OrtInteropApi")]


@pytest.mark.parametrize("table,struct", TABLES)
def test_function_table_slots_match_the_headers(table, struct):
    """Every slot abi.py declares is the index of that member in ORT's table."""
    names = _member_names(_struct_body(_headers(), struct))
    wrong = [(name, slot, names[slot] if slot < len(names) else None)
             for name, slot in getattr(abi, table).items() if slot >= len(names) or names[slot] != name]
    assert not wrong, f"{table}: (vkep's name, its slot, {struct}'s member at that slot): {wrong}"


def test_every_function_vkep_calls_has_its_slot_in_abi():
    """The plugin's wrappers and interop.py's calls take their slots from abi.py's tables (checked above)."""
    uses = {"ORT_API": {name for name, *_ in _plugin_build.ORT_SLOTS} | set(interop._API),
            "EP_API": {name for name, *_ in _plugin_build.EP_SLOTS}, "INTEROP_API": set(interop._INTEROP)}
    missing = {table: sorted(names - set(getattr(abi, table))) for table, names in uses.items()}
    assert not any(missing.values()), missing
    assert "SessionOptionsAppendExecutionProvider_V2" in uses["ORT_API"] and len(uses["INTEROP_API"]) == 9


def test_structs_vkep_fills_match_the_headers():
    """Each struct ort_abi.h defines with a body that ORT's headers also define: vkep's members are the
    header's, in its order (vkep may stop early: the members of later ORT versions it does not set)."""
    ours = _uncommented(ABI_H.read_text())
    headers = _headers()
    enums = set(_enums(headers))
    checked = []
    for name in sorted(set(re.findall(r"typedef\s+struct\s+(Ort\w+)\s*\{", ours))):
        theirs = _struct_body(headers, name)
        if theirs is None:
            continue
        mine, official = _member_names(_struct_body(ours, name)), _member_names(theirs)
        assert mine == official[:len(mine)], (name, mine, official)
        my_types, their_types = (_data_member_types(body, enums) for body in (_struct_body(ours, name), theirs))
        differ = {m: (t, their_types[m]) for m, t in my_types.items() if m in their_types and t != their_types[m]}
        assert not differ, (name, differ)
        checked.append(name)
    assert {"OrtEp", "OrtEpFactory", "OrtKernelImpl", "OrtAllocator", "OrtDataTransferImpl", "OrtApiBase",
            "OrtExternalMemoryDescriptor", "OrtExternalSemaphoreDescriptor", "OrtExternalTensorDescriptor",
            "OrtExternalResourceImporterImpl"} <= set(checked), checked


@pytest.mark.parametrize("struct", ["OrtApiBase", "OrtExternalMemoryDescriptor", "OrtExternalSemaphoreDescriptor",
                                    "OrtExternalTensorDescriptor"])
def test_structs_interop_passes_match_the_headers(struct):
    """The structs interop.py's cffi knows (from ort_abi.h) have the header's members, and its data members
    the header's types: what the application fills is what ORT reads."""
    headers = _headers()
    theirs = _struct_body(headers, struct)
    fields = interop._ffi.typeof(struct).fields
    assert [name for name, _ in fields] == _member_names(theirs)
    their_types = _data_member_types(theirs, set(_enums(headers)))
    mine = {name: field.type.cname.replace(" ", "") for name, field in fields if name in their_types}
    assert mine == their_types


def test_plan_io_codes_match_the_kernels_tensor_codes():
    """A plan stores each tensor as an io code the kernels' Tensor gives it: the C replay reads the same
    numbers (persistent memory: an absolute address; scratch chunk k: VKEP_IO_SCRATCH + k)."""
    from vkep.kernels.base import Tensor

    defines = dict(re.findall(r"#define\s+(VKEP_IO_\w+)\s+(\d+)", ABI_H.read_text()))
    assert int(defines["VKEP_IO_CONST"]) == Tensor.PERSISTENT
    assert int(defines["VKEP_IO_SCRATCH"]) == Tensor.SCRATCH


def _ort_element_name(dtype: str) -> str:
    return "ONNX_TENSOR_ELEMENT_DATA_TYPE_" + {"float32": "FLOAT", "float64": "DOUBLE"}.get(dtype, dtype.upper())


def test_element_codes_match_the_headers():
    """abi.ELEMENT_TYPES (what vkep reads from and gives ORT, and interop.py's numpy dtypes) is ORT's
    ONNXTensorElementDataType."""
    official = _enums(_headers())["ONNXTensorElementDataType"]
    wrong = {code: dtype for code, dtype in abi.ELEMENT_TYPES.items() if official.get(_ort_element_name(dtype)) != code}
    assert not wrong, f"(vkep's code: dtype) that ORT numbers otherwise: {wrong}"
    assert all(str(dtype) == abi.ELEMENT_TYPES[code] for code, dtype in interop.DTYPES.items())


def test_kernels_onnx_codes_are_the_same_numbers():
    """The kernels read ONNX's TensorProto codes in attributes (Cast's `to`, QuantizeLinear's output_dtype,
    Attention's softmax_precision) from tables of their own: they may not import vkep.ort. ORT's enum is
    copied from TensorProto, so the numbers must be abi.py's (checked above) and ONNX's."""
    from onnx import helper

    from vkep.kernels import attention, elementwise, quantize

    tables = {"elementwise.ONNX_TYPES": elementwise.ONNX_TYPES, "quantize.ONNX_QUANTIZED": quantize.ONNX_QUANTIZED,
              "attention FLOAT16/FLOAT32/FLOAT64": {attention.FLOAT16: "float16", attention.FLOAT32: "float32",
                                                     attention.FLOAT64: "float64"}}
    for table, codes in tables.items():
        assert all(abi.ELEMENT_TYPES.get(code) == dtype for code, dtype in codes.items()), (table, codes)
        assert all(helper.tensor_dtype_to_np_dtype(code) == np.dtype(dtype)
                   for code, dtype in codes.items() if dtype not in ("int4", "uint4")), (table, codes)


@pytest.mark.parametrize("enum,prefix,table", [
    ("OrtExternalMemoryHandleType", "ORT_EXTERNAL_MEMORY_HANDLE_TYPE_", "MEMORY_HANDLE_TYPES"),
    ("OrtExternalSemaphoreType", "ORT_EXTERNAL_SEMAPHORE_", "SEMAPHORE_TYPES")])
def test_external_handle_codes_match_the_headers(enum, prefix, table):
    official = _enums(_headers())[enum]
    assert {prefix + name.upper(): code for name, code in getattr(abi, table).items()} == official
