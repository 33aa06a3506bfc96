"""Conformance: the ONNX backend node test cases that passed when a driver's expectations were last written
(`vkep/expected/expected-<vendor>-<driver id>-<version>.json`, by `vkep conformance [--device all]
--update-expectations`) still do, on every driver present that has such a file. They run through the same worker
pool as `vkep conformance` (a case that crashes the driver cannot take pytest down), with the Vulkan validation
layer on as everywhere in the tests.

What runs here, to keep the suite's time modest (the full matrix, every case x driver x switch, is
`vkep conformance --device all`, 1-4 min per driver and switch):
- the driver this process runs on: every expected case, at ORT's default optimizations and with all off;
- every other driver present with expectations (Mesa 25 lavapipe once tools/mesa_backports.sh has unpacked it):
  every 8th expected case, in workers that see that driver alone;
- each feature switch on this process's driver: the cases of matrix.SWITCH_SAMPLE (45);
- a small real matrix (4 cases, every driver x switch) and its report, checked against every driver's
  expectations; a regression in a copy of an expectations file is found; and each switch is shown to change the
  path a kernel takes;
- the full matrix, as a test of its own command: VKEP_FULL_MATRIX=1 pytest tests/test_conformance.py -k full_matrix.

Also: the output check follows onnx's backend test runner, and the pool survives a crashed or hung worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import conformance, options, runner
from vkep.conformance import expectations, matrix
from vkep.conformance import report as conformance_report
from vkep.conformance.worker import CPU, compare

VULKAN = "VulkanExecutionProvider"


def _this_driver() -> tuple[dict, dict | None]:
    key = expectations.this_driver_key()
    return key, expectations.load(expectations.path_for(key))


def _check(records: list[dict], doc: dict, switch: str, optimization: str, names: set[str], where: str) -> None:
    failures = expectations.regressions(doc, records, switch, optimization)
    failures += [f"{r['name']}: {r['validation']['count']} validation message(s): {r['validation']['first']}"
                 for r in records if r.get("validation")]
    failures += [f"{name}: not in the test cases of this onnx package"
                 for name in sorted(names - {r["name"] for r in records})]
    assert not failures, (f"{len(failures)} of the {len(names)} expected cases regressed on {where} (if that is "
                          f"intended: {conformance.REGENERATE}):\n" + "\n".join(failures))


@pytest.mark.parametrize("optimization", ["default", "disable_all"])
def test_expected_cases_still_pass_on_vkep(ep_devices, optimization):
    """This process's driver, every expected case: at ORT's default optimizations and with every optimization
    off (where ORT folds nothing on the CPU and reuses the memory of every intermediate value), memory reuse on."""
    key, doc = _this_driver()
    path = expectations.path_for(key)
    want = expectations.expected(doc, "default", optimization) if doc else None
    if want is None:
        pytest.skip(f"no {expectations.list_key(optimization)} expectations for {key} in {path.name} "
                    f"(generate: {conformance.REGENERATE})")
    names = want[0] | want[1]
    records, _ = conformance.run_cases(conformance.corpus(names=names), jobs=2, timeout=120, validation=True,
                                       session={"optimization": optimization, "mem_reuse": True})
    _check(records, doc, "default", optimization, names, path.name)


def _other_targets() -> list[matrix.Target]:
    this = expectations.this_driver_key()
    return [t for t in matrix.targets(matrix.drivers()) if t.key != this]


def test_other_drivers_keep_their_expected_cases():
    """Every other driver present that has expectations: every 8th expected case, in workers started with
    VK_DRIVER_FILES naming that driver alone."""
    targets = [t for t in _other_targets() if expectations.path_for(t.key).exists()]
    if not targets:
        pytest.skip("no other Vulkan driver with expectations is present (Mesa 25 lavapipe: "
                    "eval \"$(tools/mesa_backports.sh)\" unpacks it into .cache/)")
    for target in targets:
        doc = expectations.load(expectations.path_for(target.key))
        names = set(sorted(doc["pass_vkep"])[::8])
        assert names, f"no pass_vkep cases for {target.label}"
        records, info = conformance.run_cases(conformance.corpus(names=names), jobs=2, timeout=120, validation=True,
                                              session={"mem_reuse": True, "ep_options": target.ep_options},
                                              env=target.driver.env, cmd=target.driver.worker_command())
        assert expectations.key_of(info["devices"][target.device["index"]]) == target.key
        _check(records, doc, "default", "default", names, f"{target.label} ({target.driver.icd})")


# cases whose optional inputs are absent (address 0 in the shader): Mesa 26's lavapipe crashed the process on
# Clip's before its shaders read such inputs from a valid address (common.glsl PRESENT_OR)
ABSENT_INPUTS = r"^test_(clip_default_.*|dequantizelinear|quantizelinear|gemm_default_no_bias|convinteger_.*)$"


def test_absent_optional_inputs_on_every_driver():
    """Every driver present (Mesa 26 lavapipe once tools/mesa_trixie.sh has set it up): the cases that leave
    optional inputs out run without a crash or a wrong answer."""
    cases = conformance.corpus(ABSENT_INPUTS)
    assert len(cases) >= 8, [c.name for c in cases]
    for target in matrix.targets(matrix.drivers()):
        records, _ = conformance.run_cases(cases, jobs=2, timeout=120, validation=True,
                                           session={"mem_reuse": True, "ep_options": target.ep_options},
                                           env=target.driver.env, cmd=target.driver.worker_command())
        bad = [f"{r['name']}: {r['status']} {r.get('message', '')}" for r in records
               if r["status"] in ("error", "wrong")]
        assert not bad, f"on {target.label}:\n" + "\n".join(bad)


@pytest.mark.parametrize("switch", [s for s in matrix.switches() if s.name != matrix.DEFAULT], ids=lambda s: s.name)
def test_switch_sample_keeps_its_expected_cases(ep_devices, switch):
    """Each feature switch on this process's driver: the sample's expected cases (all on vkep, or passing with
    some nodes on the CPU EP) still do."""
    key, doc = _this_driver()
    want = expectations.expected(doc, switch.name) if doc else None
    if want is None:
        pytest.skip(f"no expectations for switch {switch.name} on {key} (generate: vkep conformance --device all "
                    "--update-expectations)")
    cases = conformance.corpus(matrix.SWITCH_SAMPLE)
    names = {c.name for c in cases} & (want[0] | want[1])
    assert len(names) >= 30, f"the sample's expected cases for {switch.name}: {sorted(names)}"
    records, info = conformance.run_cases([c for c in cases if c.name in names], jobs=2, timeout=120,
                                          validation=True, env=dict(switch.env),
                                          session={"mem_reuse": True, "ep_options": dict(switch.ep_options)})
    for name, value in switch.env:  # a process-wide switch: its workers read it
        assert info["process_switches"][name] == options.SETTINGS[name].parse(value)
    _check(records, doc, switch.name, "default", names, f"{key['driver_id_name']} {key['driver_version']} "
                                                         f"with {switch.name}")


# ---- a small real matrix ------------------------------------------------------------------------------

MATRIX_CASES = ["test_add", "test_add_uint8", "test_max_float16", "test_matmul_2d", "test_exp"]


@pytest.fixture(scope="module")
def small_matrix(tmp_path_factory):
    """5 cases on every driver present, under every switch: the report as JSON and markdown."""
    out = tmp_path_factory.mktemp("matrix")
    cases = conformance.corpus(names=set(MATRIX_CASES))
    doc = matrix.run_matrix(cases, matrix.drivers(), matrix.switches(), jobs=1, timeout=120, validation=True,
                            quiet=True)
    matrix.write(doc, str(out / "m.json"), str(out / "m.md"))
    return json.loads((out / "m.json").read_text()), (out / "m.md").read_text()


def _status(doc: dict, target: str, switch: str, case: str) -> str:
    run = next(r for r in doc["runs"] if r["target"] == target and r["switch"] == switch)
    return next(r["status"] for r in run["cases"] if r["name"] == case)


def test_small_matrix_report(small_matrix):
    doc, page = small_matrix
    key = expectations.this_driver_key()
    here = next(r["target"] for r in doc["runs"] if r["key"] == key)
    names = [s.name for s in matrix.switches()]
    assert names[:1] == ["default"] and {"fp16=0", "int8=0", "subgroups=0", "VKEP_FORCE_DISCRETE=1",
                                         "host_import=0"} <= set(names)
    assert [r["switch"] for r in doc["runs"] if r["target"] == here] == names
    assert not [r for r in doc["runs"] if r.get("error")]
    # the process-wide switches reached the workers of their run only
    for run in doc["runs"]:
        seen = run["process_switches"]
        assert seen["VKEP_FORCE_DISCRETE"] is (run["switch"] == "VKEP_FORCE_DISCRETE=1")
    # every case passes everywhere; the switches move nodes off vkep, never make a case fail
    for run in doc["runs"]:
        assert {r["name"]: r["status"] for r in run["cases"] if r["status"] not in matrix.PASSING} == {}
    assert _status(doc, here, "default", "test_max_float16") == "pass-vkep"
    assert _status(doc, here, "fp16=0", "test_max_float16") == "pass-cpu"
    assert _status(doc, here, "default", "test_add_uint8") == "pass-vkep"
    assert _status(doc, here, "int8=0", "test_add_uint8") == "pass-cpu"
    # op x dtype x driver x switch, with pass/fail and the largest error
    cell = next(c for c in doc["cells"] if (c["op"], c["dtype"], c["target"], c["switch"]) ==
                ("MatMul", "float", here, "subgroups=0"))
    assert cell["cases"] == cell["pass"] == cell["pass_vkep"] == 1 and cell["fail"] == 0
    # (none where equal: on x86-64 with AVX2 and FMA vkep's small MatMul follows the CPU EP's order, numpy's here)
    assert cell["max_abs"] is None or cell["max_abs"] < 1e-4
    exp = next(c for c in doc["cells"] if (c["op"], c["dtype"], c["target"], c["switch"]) == ("Exp", "float", here,
                                                                                              "default"))
    assert exp["pass_vkep"] == 1 and 0 < exp["max_abs"] < 1e-4
    assert len(doc["cells"]) == len({(c["op"], c["dtype"]) for c in doc["cells"]}) * len(doc["runs"])
    assert "| Max | float16 | 1/1 |" in page and "1/1 (0 on vkep)" in page
    assert f"| {here} | `fp16=0` | test_max_float16 | pass-vkep | pass-cpu |" in page
    # the drivers that offer no device here are listed, not errors
    assert all(d["devices"] or d["absent"] for d in doc["drivers"])


def test_matrix_runs_each_driver_apart(small_matrix):
    """With the backports driver unpacked, both lavapipes are columns of their own, each run by workers that
    saw that driver alone (the key the workers reported is the probe's)."""
    doc, _ = small_matrix
    if not matrix.BACKPORTS_ICD.exists():
        pytest.skip("Mesa 25 lavapipe is not unpacked here (eval \"$(tools/mesa_backports.sh)\")")
    keys = {r["target"]: r["key"]["driver_version"] for r in doc["runs"]}
    assert len(set(keys.values())) >= 2, keys
    backports = next(d for d in doc["drivers"] if d["icd"] == str(matrix.BACKPORTS_ICD))
    assert backports["devices"] and backports["devices"][0]["driver_info"].startswith("Mesa 25")


def test_regression_in_an_expectations_file_is_found(small_matrix, tmp_path):
    """A copy of this driver's expectations that says a case passes all on vkep where the run had it on the
    CPU EP (test_add_uint8 with int8=0), or passes where it failed, fails the check; the true file does not."""
    doc, _ = small_matrix
    key, expected = _this_driver()
    if expected is None:
        pytest.skip(f"no expectations for {key}")
    runs = {r["switch"]: r["cases"] for r in doc["runs"] if r["key"] == key}
    assert expectations.regressions(expected, runs["default"]) == []
    assert expectations.regressions(expected, runs["int8=0"], "int8=0") == []  # ([] too where not recorded)
    edited = json.loads(json.dumps(expected))
    entry = edited.setdefault("switches", {}).setdefault("int8=0", {"pass_vkep": [], "pass": []})
    entry["pass_vkep"] = sorted(set(entry["pass_vkep"]) | {"test_add_uint8"})
    copy = tmp_path / expectations.path_for(key).name
    copy.write_text(json.dumps(edited))
    found = expectations.regressions(expectations.load(copy), runs["int8=0"], "int8=0")
    assert len(found) == 1 and found[0].startswith("test_add_uint8: pass-cpu, expected pass-vkep")
    failed = [dict(r, status="wrong", message="output 0: 1 of 4 elements differ") if r["name"] == "test_add"
              else r for r in runs["default"]]
    found = expectations.regressions(expected, failed)
    assert len(found) == 1 and found[0].startswith("test_add: wrong, expected pass-vkep (output 0: 1 of 4")


def _matrix_failures(doc: dict) -> list[str]:
    """Each run that could not run, each validation message, and each case that did worse than its driver's
    expectations for its switch."""
    out = [f"{r['target']} [{r['switch']}]: {r['error']}" for r in doc["runs"] if r.get("error")]
    for run in doc["runs"]:
        where = f"{run['target']} [{run['switch']}]"
        out += [f"{where}: {r['name']}: {r['validation']['count']} validation message(s): {r['validation']['first']}"
                for r in run["cases"] if r.get("validation")]
        expected = expectations.load(expectations.path_for(run["key"]))
        if expected:
            out += [f"{where}: {line}" for line in expectations.regressions(expected, run["cases"], run["switch"])]
    return out


def test_small_matrix_keeps_every_driver_s_expectations(small_matrix):
    doc, _ = small_matrix
    assert _matrix_failures(doc) == []


FULL_MATRIX = os.environ.get("VKEP_FULL_MATRIX", "")


@pytest.mark.skipif(not FULL_MATRIX, reason="the full matrix, its own command (every case x driver x switch: 1-4 min "
                    "each on lavapipe): VKEP_FULL_MATRIX=1 pytest tests/test_conformance.py -k full_matrix (or "
                    "VKEP_FULL_MATRIX=REGEX: the cases whose name matches)")
def test_full_matrix_keeps_every_driver_s_expectations():
    """`vkep conformance --device all` as a test: every case on every driver present under every switch; a
    regression on any driver that has expectations fails it."""
    cases = conformance.corpus(None if FULL_MATRIX == "1" else FULL_MATRIX)
    doc = matrix.run_matrix(cases, matrix.drivers(), matrix.switches(), jobs=2, timeout=120, validation=True,
                            quiet=True)
    failures = _matrix_failures(doc)
    assert not failures, f"{len(failures)} regression(s) (if intended: {conformance.REGENERATE}):\n" + "\n".join(
        failures)


# ---- switches change the path ---------------------------------------------------------------------------


def _one_node(op: str, dtype: int, opset: int = 14):
    x = helper.make_tensor_value_info("x", dtype, [4])
    graph = helper.make_graph([helper.make_node(op, ["x", "x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", dtype, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("switch, dtype, np_dtype", [("fp16", TensorProto.FLOAT16, np.float16),
                                                      ("int8", TensorProto.UINT8, np.uint8)])
def test_type_switch_leaves_its_nodes_to_the_cpu_ep(ep_devices, switch, dtype, np_dtype):
    x = np.arange(4, dtype=np_dtype)
    for value, ep in (("auto", VULKAN), ("0", CPU)):
        session = runner.vkep_session(_one_node("Add", dtype), ep_options={switch: value})
        assert [e for _, _, e in runner.placement(session)] == [ep]
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], x + x)


def _conv_and_matmul():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]), helper.make_node("MatMul", ["v", "b"], ["z"])]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8]),
           helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 64])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")]
    graph = helper.make_graph(nodes, "g", ins, outs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_subgroups_off_takes_the_variants_without_subgroup_operations(ep_devices, monkeypatch):
    """From the pipelines each kernel used: with subgroups the 3x3 Conv runs as Winograd (winograd.comp shares
    weights with subgroupBroadcast) and the one-row MatMul in matmul.comp's pair mode (spec constant PAIRS 2, B
    interleaved); with subgroups=0, conv.comp's implicit GEMM and PAIRS 0 (no subgroup operation). (mlas_gemm.comp,
    which would take this small product in the CPU EP's order, uses no subgroup operation: switched off here.)"""
    from vkep.kernels import mlas_gemm
    from vkep.ort.kernel import KERNELS

    monkeypatch.setattr(mlas_gemm, "ENABLED", False)

    model = _conv_and_matmul()
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32),
             "v": np.random.default_rng(2).standard_normal((1, 64)).astype(np.float32)}
    want = runner.cpu_session(model).run(None, feeds)
    used = {}
    for value in ("auto", "0"):
        first = max(KERNELS, default=0)
        session = runner.vkep_session(model, ep_options={"subgroups": value}, disable_cpu_fallback=True)
        for got, ref in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        mine = {k.spec.op: k for i, k in list(KERNELS.items()) if i > first}
        used[value] = {op: sorted(k.pipelines) for op, k in mine.items()}
        used[value]["interleaved"] = mine["MatMul"].impl.b_interleaved
    assert {shader for shader, _, _ in used["auto"]["Conv"]} == {"winograd.comp"}
    assert [(s, dict(c)["pairs"]) for s, _, c in used["auto"]["MatMul"]] == [("matmul.comp", 2)] and used["auto"]["interleaved"]
    assert {shader for shader, _, _ in used["0"]["Conv"]} == {"conv.comp"}
    assert [(s, dict(c)["pairs"]) for s, _, c in used["0"]["MatMul"]] == [("matmul.comp", 0)] and not used["0"]["interleaved"]


PROCESS_SWITCHES = """
import json, numpy as np
from vkep import runner
from vkep.gpu.device import open_device
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
s = runner.vkep_session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8))
assert (s.run(None, {"x": np.ones(4, np.float32)})[0] == 2).all()
d = open_device(0)
print(json.dumps({"host_import": d.host_import_alignment, "unified": d.memory.unified}))
"""


@pytest.mark.parametrize("env, field, on, off", [("VKEP_FORCE_DISCRETE", "unified", True, False)])
def test_process_wide_switch_in_its_own_process(env, field, on, off):
    """VKEP_FORCE_DISCRETE=1 runs the unified device as a discrete one. Process-wide: in a process of its own."""
    import os

    values = {}
    for value in ("", options.SETTINGS[env].switch_off):
        done = subprocess.run([sys.executable, "-c", PROCESS_SWITCHES], env={**os.environ, env: value},
                              capture_output=True, text=True, timeout=300, check=True)
        values[value] = json.loads(done.stdout.strip().splitlines()[-1])[field]
    assert values[""] != values[options.SETTINGS[env].switch_off] == off
    if on is not None:
        assert values[""] == on
    else:
        assert values[""] > 0  # lavapipe imports host memory


def test_pool_records_crash_and_timeout_and_goes_on():
    """A worker that dies or hangs costs its case only: the pool starts a new worker for the rest."""
    cases = conformance.corpus(names={"test_abs", "test_relu", "test_neg", "test_sigmoid"})
    debug = {"test_relu": "crash", "test_neg": "hang"}
    records, info = conformance.run_cases(cases, ep=CPU, jobs=1, timeout=3, debug=debug)
    status = {r["name"]: r for r in records}
    assert [r["name"] for r in records] == [c.name for c in cases]
    assert status["test_abs"]["status"] == status["test_sigmoid"]["status"] == "pass-cpu"
    assert status["test_relu"]["status"] == "error" and "crashed (signal SIGABRT)" in status["test_relu"]["message"]
    assert status["test_neg"]["status"] == "error" and "timeout" in status["test_neg"]["message"]
    assert info["onnxruntime"]


def test_compare_follows_onnx_runner():
    f = np.array([1.0, np.nan, np.inf, -2.0], dtype=np.float32)
    assert compare([f], [f.copy()], 1e-3, 1e-7).ok  # NaN equals NaN, inf equals inf
    near = compare([f * 1.0005], [f], 1e-3, 1e-7)
    assert near.ok and 0 < near.max_rel <= 1e-3
    far = compare([f + 0.01], [f], 1e-3, 1e-7)
    assert not far.ok and far.max_abs == pytest.approx(0.01, rel=1e-3) and far.mismatched == 2
    assert "shape" in compare([f[:3]], [f], 1e-3, 1e-7).message
    assert "dtype" in compare([f.astype(np.float64)], [f], 1e-3, 1e-7).message
    assert "differ" in compare([np.array([True, False])], [np.array([True, True])], 1e-3, 1e-7).message
    assert compare([[f, f]], [[f, f]], 1e-3, 1e-7).ok  # sequences
    assert "sequence of 1" in compare([[f]], [[f, f]], 1e-3, 1e-7).message
    assert compare([None], [None], 1e-3, 1e-7).ok  # an empty optional
    assert compare([np.array(["a", "b"], dtype=object)], [np.array(["a", "b"], dtype=object)], 0, 0).ok
    assert "2 outputs" in compare([f, f], [f], 1e-3, 1e-7).message


def test_report_and_comparison_render():
    records = [{"name": "test_a", "op": "Add", "status": "pass-vkep", "nodes": {"VulkanExecutionProvider": 1}},
               {"name": "test_b", "op": "Conv", "status": "pass-cpu", "cpu_ops": ["Conv"]},
               {"name": "test_c", "op": "Add", "status": "wrong", "message": "output 0: 1 of 4 elements differ",
                "max_abs": 0.5, "max_rel": 0.25}]
    doc = {"format": conformance_report.FORMAT, "ep": "VulkanExecutionProvider", "versions": {"onnxruntime": "x"},
           "devices": [{"name": "dev", "driver": "drv"}], "settings": {"jobs": 2}, "elapsed_s": 1.0,
           "summary": conformance_report.summarize(records), "cases": records}
    assert doc["summary"]["by_status"]["pass-vkep"] == 1 and doc["summary"]["off_ep_ops"] == {"Conv": 1}
    page = conformance_report.markdown(doc)
    assert "| test_c | wrong | max abs 0.5, max rel 0.25; output 0" in page
    other = dict(doc, ep="WebGpuExecutionProvider")
    table = conformance_report.compare(doc, other)
    assert "vkep@drv" in table and "webgpu@drv" in table and "| Add | 2 | 1 | 0 | 1 | 1 | 0 | 1 |" in table


def test_matrix_cells_keep_the_largest_error_json_safe():
    """A cell's largest error over its cases, "inf"/"nan" where a case had one (the report stays valid JSON)."""
    runs = [{"target": "t", "switch": "default", "cases": [
        {"name": "a", "op": "Add", "dtype": "float", "status": "pass-vkep", "max_abs": 1e-7, "max_rel": 1e-6},
        {"name": "b", "op": "Add", "dtype": "float", "status": "wrong", "max_abs": "inf", "max_rel": "inf"},
        {"name": "c", "op": "Add", "dtype": "float16", "status": "pass-cpu"},
        {"name": "d", "op": "Add", "dtype": "float16", "status": "skip-cpu"}]}]
    float32, float16 = matrix.cells(runs)  # (sorted by op, then dtype)
    assert (float32["cases"], float32["pass"], float32["fail"], float32["max_abs"]) == (2, 1, 1, "inf")
    assert (float16["pass"], float16["pass_vkep"], float16["skip_cpu"], float16["max_abs"]) == (1, 0, 1, None)
    json.dumps(matrix.cells(runs), allow_nan=False)
    assert matrix._cell_text(float32) == "**1/2 FAIL** ≤inf" and matrix._cell_text(float16) == "1/1 (0 on vkep)"
