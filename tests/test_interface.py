"""A kernel's interface with its shader, read from the SPIR-V (vkep.kernels.interface, vkep.gpu.push): constants
and push constants by name, workgroup sizes against the kernels' constants, checked over every variant at build
time."""

from __future__ import annotations

import struct

import pytest

from vkep import cli
from vkep.gpu import device as gpu_device
from vkep.gpu.pipeline import specialization_data
from vkep.gpu.push import PushError, PushLayout, PushRangeError, push_block
from vkep.gpu.shaders import compile_shader, compile_to, local_size, specialization_constants, workgroup_size
from vkep.kernels import elementwise, interface, manifest
from vkep.kernels.base import implementation


def _cumsum_entry(tmp_path, constants: str, name: str = "kernels.yaml") -> tuple[manifest.KernelSpec, str]:
    """A one-entry manifest of cumsum.comp (constant_ids: SPLIT 0, local_size_x 1, OP 2) with `constants`."""
    path = tmp_path / name
    path.write_text("kernels:\n  - {op: CumSum, since: [11], types: {T: [float32, int32]}, impl: reduce.CumSum,\n"
                    f"     shader: cumsum.comp, constants: {constants}}}\n")
    return manifest.load(path)[0], str(path)


def test_every_manifest_entry_and_workgroup_constant_agrees_with_the_shaders():
    assert interface.problems() == []


def test_reflection_reads_each_constants_id_type_and_default_and_the_workgroup_size():
    cumsum = compile_shader("cumsum.comp", {"DTYPE": 0})[1]
    assert {n: (c.id, c.type, c.default) for n, c in specialization_constants(cumsum).items()} == {
        "SPLIT": (0, "uint", 0), "local_size_x": (1, "uint", 1), "OP": (2, "uint", 0)}
    assert workgroup_size(cumsum) == ("local_size_x", 1, 1) and local_size(cumsum) is None  # (LocalSize says 1)
    recurrent = specialization_constants(compile_shader("recurrent.comp", {"DTYPE": 0})[1])
    assert recurrent["A0"] == (3, "float", 0.0) and recurrent["HMAX"] == (2, "uint", 64)
    assert workgroup_size(compile_shader("matmul.comp", {"DTYPE": 0})[1]) == ("local_size_x", "local_size_y", 1)
    assert workgroup_size(compile_shader("binary.comp", {"DTYPE": 0})[1]) == (64, 1, 1)


def test_constants_go_to_their_constant_id_whatever_the_manifest_order(tmp_path):
    spirv = compile_shader("cumsum.comp", {"DTYPE": 0})[1]
    assert specialization_data("cumsum.comp", {}, spirv, {"op": 1}) == ([2], struct.pack("<I", 1))  # OP is id 2
    recurrent = compile_shader("recurrent.comp", {"DTYPE": 0})[1]  # (a float constant takes a float's bits)
    assert specialization_data("recurrent.comp", {}, recurrent, {"a0": 0.5}) == ([3], struct.pack("<f", 0.5))
    one, _ = _cumsum_entry(tmp_path, "{op: 1, split: 1}", "a.yaml")
    other, _ = _cumsum_entry(tmp_path, "{split: 1, op: 1}", "b.yaml")
    kernels = [implementation(s)(s, {}, 11, ["float32", "int64"]) for s in (one, other)]
    assert kernels[0].constants == kernels[1].constants == {"op": 1, "split": 1}
    dev = gpu_device.open_device(next(d.index for d in gpu_device.physical_devices() if d.usable))  # (shared)
    first = dev.pipelines.get("cumsum.comp", {"DTYPE": 0}, kernels[0].constants)
    assert dev.pipelines.get("cumsum.comp", {"DTYPE": 0}, kernels[1].constants) is first


def test_a_constant_the_shader_lacks_fails_the_build_check_naming_file_entry_and_field(tmp_path, monkeypatch,
                                                                                       capsys):
    spec, path = _cumsum_entry(tmp_path, "{op: 1, scan: 1}")
    found = interface.problems([spec])
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}: entry 0 (CumSum): constants.scan: cumsum.comp (DTYPE=")
    assert "declares no specialization constant SCAN (it declares: OP, SPLIT, local_size_x)" in found[0]
    dev = gpu_device.open_device(next(d.index for d in gpu_device.physical_devices() if d.usable))
    with pytest.raises(ValueError, match="cumsum.comp .DTYPE=0. declares no specialization constant SCAN"):
        dev.pipelines.get("cumsum.comp", {"DTYPE": 0}, spec.constants)  # (and at run time, the first dispatch)
    monkeypatch.setenv("VKEP_MANIFEST", path)  # `vkep shaders build` of that manifest fails
    assert cli.main(["shaders", "build"]) == 1
    assert "constants.scan" in capsys.readouterr().err


def test_a_float_constant_cannot_be_given_by_the_manifest(tmp_path):
    path = tmp_path / "kernels.yaml"
    path.write_text("kernels:\n  - {op: RNN, since: [14], types: {T: [float32]}, impl: recurrent.Recurrent,\n"
                    "     shader: recurrent.comp, constants: {cell: 0, a0: 1}}\n")
    found = interface.problems(manifest.load(path))
    assert len(found) == 1 and "constants.a0: recurrent.comp" in found[0] and "float" in found[0]


def test_a_workgroup_constant_that_disagrees_with_its_shader_fails_the_check(monkeypatch):
    monkeypatch.setattr(elementwise, "WORKGROUP", 128)
    found = interface.problems([])
    assert [p.split(" (")[0].rsplit("/", 1)[1] for p in found] == ["binary.comp", "unary.comp", "unary_mlas.comp", "where.comp"]
    assert all("workgroup size (64, 1, 1), but vkep.kernels.elementwise.WORKGROUP sizes its grids by 128" in p
               for p in found)


def test_a_push_block_is_read_by_name_and_filled_by_name():
    members = push_block(compile_shader("binary.comp", {"DTYPE": 0})[1])
    assert [(m.name, m.offset, m.format, m.count) for m in members] == [
        ("a", 0, "Q", 1), ("b", 8, "Q", 1), ("y", 16, "Q", 1), ("n", 24, "I", 1), ("rank", 28, "I", 1),
        ("shape", 32, "I", 6), ("stride_a", 56, "I", 6), ("stride_b", 80, "I", 6), ("scale", 104, "f", 1),
        ("inner_divisor", 108, "I", 2), ("vkep_group_base", 116, "I", 3)]
    layout = PushLayout("binary.comp", members)
    a, b, y = object(), None, object()
    values = {"a": a, "b": b, "y": y, "n": 6, "rank": 2, "shape": [2, 3], "stride_a": [3, 1], "stride_b": [0, 1],
              "scale": 0.5, "inner_divisor": [1431655766, 1]}
    addresses, tail = layout.encode(values)
    assert addresses == [a, None, y] and layout.bytes == 116
    assert tail == struct.pack("<2I6I6I6If2I", 6, 2, 2, 3, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0.5,
                               1431655766, 1)
    assert layout.pack({**values, "a": 16, "y": 32})[:24] == struct.pack("<3Q", 16, 0, 32)
    with pytest.raises(PushError, match=r"binary.comp's push constants: no member scales; scale not given"):
        layout.encode({**{k: v for k, v in values.items() if k != "scale"}, "scales": 1.0})
    with pytest.raises(PushRangeError, match="push constant n = -1 does not fit"):
        layout.encode({**values, "n": -1})
    with pytest.raises(PushRangeError, match="shape holds 6 values, given 7"):
        layout.encode({**values, "shape": [1] * 7})
    concat = PushLayout("concat.comp", push_block(compile_shader("concat.comp", {"DTYPE": 0})[1]))
    assert [m.name for m in concat.addresses] == ["y", "x"] and concat.address_slots == 1 + concat.addresses[1].count


def test_a_push_block_vkep_cannot_fill_fails_the_build_check(tmp_path):
    """Tensor addresses after other members (a plan could not patch them) and a block past the bytes a
    dispatch has fail `problems()` with the shader's path."""
    source = tmp_path / "bad.comp"
    source.write_text("""#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant, scalar) uniform Push { uint64_t x; uint n; uint64_t late; uint pad[28]; } pc;
void main() { if (pc.n == 0u && pc.late == 0ul && pc.x == 0ul && pc.pad[27] == 0u) {} }
""")

    def spirv_of(shader: str, defines: dict) -> bytes:
        out = tmp_path / "bad.spv"
        compile_to(source, defines, out)
        return out.read_bytes()

    found = interface._push_problems([("bad.comp", (("DTYPE", 0),))], spirv_of)
    assert len(found) == 2, found
    assert "uint64_t push constant(s) late after other members" in found[0]
    assert "its push constants take 136 bytes, past the 128 a dispatch has" in found[1]


def test_a_dry_run_refuses_a_value_its_push_member_cannot_hold():
    """GetCapability's dry run (vkep.ort.warmup.DryCall) encodes push constants as a run does: LRN's size is a
    uint member of lrn.comp's block, and 2^33 + 1 does not fit it, so planning fails with UnsupportedError (which
    leaves the node to another EP) instead of the run failing later."""
    from vkep.kernels.base import Tensor, UnsupportedError
    from vkep.ort.warmup import DryCall

    spec = next(s for s in manifest.load() if s.op == "LRN")
    attrs = {a.name: a.default for a in spec.attributes} | {"size": 2**33 + 1}
    kernel = implementation(spec)(spec, attrs, 13, ["float32"])
    with pytest.raises(UnsupportedError, match="lrn.comp: push constant size = 8589934593 does not fit"):
        kernel.compute(DryCall([Tensor(0, (1, 4, 3, 3), "float32", 0)]))
