"""A kernel's interface with its shader, read from the SPIR-V (vkep.kernels.interface): manifest constants by
name, workgroup sizes against the kernels' constants, checked over every variant at build time."""

from __future__ import annotations

import pytest

from vkep import cli
from vkep.gpu import device as gpu_device
from vkep.gpu.shaders import compile_shader, local_size, specialization_constants, workgroup_size
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
    op_only, _ = _cumsum_entry(tmp_path, "{op: 1}")
    assert interface.constant_tuple(op_only) == (0, 1, 1)  # SPLIT and local_size_x: the shader's defaults
    one, _ = _cumsum_entry(tmp_path, "{op: 1, split: 1}", "a.yaml")
    other, _ = _cumsum_entry(tmp_path, "{split: 1, op: 1}", "b.yaml")
    kernels = [implementation(s)(s, {}, 11, ["float32", "int64"]) for s in (one, other)]
    assert kernels[0].constants == kernels[1].constants == (1, 1, 1)
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
    with pytest.raises(manifest.ManifestError, match="constants.scan"):
        interface.constant_tuple(spec)  # (and at run time, the kernel's first dispatch)
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
    assert [p.split(" (")[0].rsplit("/", 1)[1] for p in found] == ["binary.comp", "unary.comp", "where.comp"]
    assert all("workgroup size (64, 1, 1), but vkep.kernels.elementwise.WORKGROUP sizes its grids by 128" in p
               for p in found)
