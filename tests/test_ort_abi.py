"""vkep's declarations of ORT's ABI against ORT's own C headers: every function-table slot vkep calls
(ORT_SLOTS, EP_SLOTS in vkep/ort/_plugin_build.py: index and name) and the member order of every struct
vkep fills or reads (vkep/ort/native/ort_abi.h). A slot off by one calls another function; a struct member
out of place is called through the wrong pointer: both fail here instead.

The headers are ORT's (onnxruntime_c_api.h, onnxruntime_ep_c_api.h), read from VKEP_ORT_HEADERS or from
../shared/reference/onnxruntime-headers beside the checkout; the pip package of ORT has none, so without
them this test skips, saying where it looked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from vkep.ort import _plugin_build

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


@pytest.mark.parametrize("table,struct", [("ORT_SLOTS", "OrtApi"), ("EP_SLOTS", "OrtEpApi")])
def test_function_table_slots_match_the_headers(table, struct):
    names = _member_names(_struct_body(_headers(), struct))
    wrong = [(slot, name, names[slot] if slot < len(names) else None)
             for slot, name, *_ in getattr(_plugin_build, table) if slot >= len(names) or names[slot] != name]
    assert not wrong, f"{table}: (slot, vkep's name, {struct}'s member at that slot): {wrong}"


def test_structs_vkep_fills_match_the_headers():
    """Each struct ort_abi.h defines with a body that ORT's headers also define: vkep's members are the
    header's, in its order (vkep may stop early: the members of later ORT versions it does not set)."""
    ours = _uncommented(ABI_H.read_text())
    headers = _headers()
    checked = []
    for name in sorted(set(re.findall(r"typedef\s+struct\s+(Ort\w+)\s*\{", ours))):
        theirs = _struct_body(headers, name)
        if theirs is None:
            continue
        mine, official = _member_names(_struct_body(ours, name)), _member_names(theirs)
        assert mine == official[:len(mine)], (name, mine, official)
        checked.append(name)
    assert {"OrtEp", "OrtEpFactory", "OrtKernelImpl", "OrtAllocator", "OrtDataTransferImpl"} <= set(checked), checked


def test_plan_io_codes_match_the_kernels_tensor_codes():
    """A plan stores each tensor as an io code the kernels' Tensor gives it: the C replay reads the same
    numbers (persistent memory: an absolute address; scratch chunk k: VKEP_IO_SCRATCH + k)."""
    from vkep.kernels.base import Tensor

    defines = dict(re.findall(r"#define\s+(VKEP_IO_\w+)\s+(\d+)", ABI_H.read_text()))
    assert int(defines["VKEP_IO_CONST"]) == Tensor.PERSISTENT
    assert int(defines["VKEP_IO_SCRATCH"]) == Tensor.SCRATCH
