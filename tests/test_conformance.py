"""Conformance: the ONNX backend node test cases that passed with every node on vkep when the expectations
were last generated (`vkep/expected/expected-<driver>.json`, written by `vkep conformance
--update-expectations`) still do. They run through the same worker pool as `vkep conformance` (a case that
crashes the driver cannot take pytest down), with the Vulkan validation layer on as everywhere in the tests.

Also: the output check follows onnx's backend test runner, and the pool survives a crashed or hung worker.
"""

from __future__ import annotations

import numpy as np
import pytest

from vkep import conformance
from vkep.conformance import report as conformance_report
from vkep.conformance.worker import CPU, compare


@pytest.mark.parametrize("optimization", ["default", "disable_all"])
def test_expected_cases_still_pass_on_vkep(ep_devices, optimization):
    """At ORT's default optimizations and with every optimization off (where ORT folds nothing on the CPU
    and reuses the memory of every intermediate value), memory reuse on."""
    path = conformance.expectations_path()
    expected = conformance.load_expectations(path)
    key = conformance.expectations_key(optimization)
    if expected is None or key not in expected:
        pytest.skip(f"no {key} expectations for this driver in {path.name} (generate: {conformance.REGENERATE})")
    names = set(expected[key])
    cases = conformance.corpus(names=names)
    missing = sorted(names - {c.name for c in cases})
    records, _ = conformance.run_cases(cases, jobs=2, timeout=120, validation=True,
                                       session={"optimization": optimization, "mem_reuse": True})
    failures = [f"{r['name']}: {r['status']}: {conformance_report.detail(r) or 'nodes ' + str(r.get('nodes'))}"
                for r in records if r["status"] != "pass-vkep"]
    failures += [f"{r['name']}: {r['validation']['count']} validation message(s): {r['validation']['first']}"
                 for r in records if r.get("validation")]
    failures += [f"{name}: not in the test cases of this onnx package" for name in missing]
    assert not failures, (f"{len(failures)} of the {len(names)} cases in {path.name} no longer pass with every "
                          f"node on vkep (if that is intended: {conformance.REGENERATE}):\n" + "\n".join(failures))


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
