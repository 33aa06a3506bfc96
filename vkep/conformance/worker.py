"""Worker side of `vkep conformance`: runs ONNX backend node test cases, one at a time, on one EP.

A worker is a separate process (a driver bug may crash or hang it; the parent in `vkep.conformance`
then records the case and starts a new worker). It reads pickled tasks from one pipe and writes pickled
records to another, so nothing that ORT, Dawn or a Vulkan driver prints can corrupt the channel:

    python -m vkep.conformance.worker EP FD_IN FD_OUT

It needs only numpy and onnxruntime (vkep only when EP is VulkanExecutionProvider), so the WebGPU tool
runs the same code from the `onnxruntime-webgpu` virtualenv (tools/_conformance_webgpu_worker.py).

Per case: ORT's CPU EP runs it first (for another EP; a failure there is `skip-cpu`), then the EP under
test, and its outputs are checked against the case's expected outputs the way onnx's backend test runner
checks them (`np.testing.assert_allclose` with the case's rtol/atol, NaN equal to NaN, exact dtypes and
shapes, strings equal, bfloat16 with at least 2**-6 relative tolerance).
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import tempfile
import time
import traceback

import numpy as np

VULKAN = "VulkanExecutionProvider"
CPU = "CPUExecutionProvider"
WEBGPU = "WebGpuExecutionProvider"
MEMCPY = {"MemcpyFromHost", "MemcpyToHost"}  # ORT's copies at EP boundaries: not a node of the model


NODE_STATUS = re.compile(r"Non-zero status code returned while running (\w+) node\. Name:'[^']*' Status Message: ")


def first_line(exc: BaseException | str, limit: int = 400) -> str:
    """The first line of an error, with ORT's "Non-zero status code ... Status Message: " shortened to
    "Op: " so that the EP's own message fits."""
    text = str(exc).strip() or type(exc).__name__
    line = NODE_STATUS.sub(r"\1: ", text.splitlines()[0].strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# ---- output comparison ------------------------------------------------------------------------------


class Mismatch:
    """What `compare` found: ok, the largest errors, and a message when not ok."""

    def __init__(self):
        self.ok = True
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.mismatched = 0
        self.message = ""

    def fail(self, message: str) -> None:
        if self.ok:
            self.message = message
        self.ok = False


def _as_float(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind in "fiu" else a.astype(np.float32).astype(np.float64)


def _compare_array(out, ref, rtol: float, atol: float, where: str, m: Mismatch) -> None:
    out, ref = np.asarray(out), np.asarray(ref)
    if out.shape != ref.shape:
        m.fail(f"{where}: shape {out.shape}, expected {ref.shape}")
        return
    if ref.dtype == object or ref.dtype.kind in "SU":
        if not np.array_equal(out, ref):
            m.fail(f"{where}: strings differ")
        return
    if out.dtype != ref.dtype:
        m.fail(f"{where}: dtype {out.dtype}, expected {ref.dtype}")
        return
    if ref.dtype.name == "bfloat16":
        rtol = max(rtol, 2**-6)  # as onnx's runner: two bfloat16 ULPs
    if ref.dtype == bool:
        bad = out != ref
        diff = bad.astype(np.float64)
    else:
        o, r = _as_float(out), _as_float(ref)
        bad = ~np.isclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(o - r)
        same = (o == r) | (np.isnan(o) & np.isnan(r))  # inf == inf, nan "==" nan
        diff = np.where(same, 0.0, np.where(np.isnan(diff), np.inf, diff))
    if diff.size:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            rel = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(_as_float(ref)), 1e-6))
        m.max_abs = max(m.max_abs, float(diff.max()))
        m.max_rel = max(m.max_rel, float(np.nan_to_num(rel, nan=np.inf).max()))
    n = int(np.count_nonzero(bad))
    if n:
        m.mismatched += n
        m.fail(f"{where}: {n} of {bad.size} elements differ beyond rtol={rtol:g} atol={atol:g}")


def _compare_value(out, ref, rtol, atol, where, m: Mismatch) -> None:
    if ref is None or out is None:
        if (ref is None) != (out is None):
            m.fail(f"{where}: {'None' if out is None else 'a value'}, expected {'None' if ref is None else 'a value'}")
        return
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)):
            m.fail(f"{where}: {type(out).__name__}, expected a sequence")
        elif len(out) != len(ref):
            m.fail(f"{where}: sequence of {len(out)}, expected {len(ref)}")
        else:
            for j, (o, r) in enumerate(zip(out, ref, strict=True)):
                _compare_value(o, r, rtol, atol, f"{where}[{j}]", m)
        return
    if isinstance(out, (list, tuple)):
        m.fail(f"{where}: a sequence, expected a tensor")
        return
    _compare_array(out, ref, rtol, atol, where, m)


def compare(outputs, expected, rtol: float, atol: float, m: Mismatch | None = None) -> Mismatch:
    """Check `outputs` against `expected` as onnx's backend test runner does; collect the largest errors."""
    m = m or Mismatch()
    if len(outputs) != len(expected):
        m.fail(f"{len(outputs)} outputs, expected {len(expected)}")
        return m
    for i, (out, ref) in enumerate(zip(outputs, expected, strict=True)):
        _compare_value(out, ref, rtol, atol, f"output {i}", m)
    return m


# ---- sessions -------------------------------------------------------------------------------------

# ORT's graph optimization levels by the names `vkep conformance --optimization` takes; "default" is
# what a session gets when nobody sets one (ORT_ENABLE_ALL)
OPTIMIZATION_LEVELS = ("default", "basic", "extended", "disable_all")


def configure(so, settings: dict | None):
    """Apply a task's session settings (optimization level, memory reuse) to ORT SessionOptions."""
    import onnxruntime as ort

    settings = settings or {}
    level = settings.get("optimization", "default")
    so.graph_optimization_level = {
        "default": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
    so.enable_mem_reuse = bool(settings.get("mem_reuse", True))
    return so

PLACED = re.compile(r"(?:All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)")


def _feed_value(v):
    if isinstance(v, (list, tuple)):
        return [_feed_value(x) for x in v]
    if isinstance(v, np.generic):
        return np.asarray(v)  # ORT takes arrays, not numpy scalars
    return v


def feeds_for(session, inputs) -> dict:
    """Positional inputs of a test case -> ORT feeds, as onnxruntime.backend does it."""
    return {arg.name: _feed_value(v) for arg, v in zip(session.get_inputs(), inputs, strict=False)}


class Runner:
    """Sessions for one EP in this process: ORT's CPU EP as the reference, and the EP under test."""

    def __init__(self, ep: str):
        import onnxruntime as ort

        self.ort = ort
        self.ep = ep
        ort.set_default_logger_severity(3)
        self.validation = False
        self.settings: dict = {}  # the current task's session settings (see configure)
        if ep == VULKAN:
            import vkep
            from vkep import runner
            from vkep.gpu.device import validation_wanted

            if not vkep.register():
                raise RuntimeError("vkep registered no device (is a Vulkan driver installed?)")
            self.vkep_runner = runner
            self.validation = validation_wanted()
        elif ep not in ort.get_available_providers():
            raise RuntimeError(f"{ep} is not in this onnxruntime build ({ort.__version__}): "
                               f"{', '.join(ort.get_available_providers())}")

    def info(self) -> dict:
        info = {"onnxruntime": self.ort.__version__, "providers": self.ort.get_available_providers(),
                "python": sys.version.split()[0], "validation": self.validation}
        if self.ep == VULKAN:
            import vkep
            from vkep.kernels import manifest

            info["vkep"] = vkep.__version__
            from vkep.gpu.device import physical_devices

            info["devices"] = [d.summary() for d in physical_devices()]
            from vkep import options

            # the process-wide feature switches as this worker read them (a matrix run checks they took)
            info["process_switches"] = {s.name: options.env(s.name) for s in options.FEATURE_SWITCHES
                                        if s.scope == options.PROCESS}
            info["manifest"] = [str(p) for p in manifest.manifest_paths()]
        return info

    def cpu_session(self, model: bytes):
        so = configure(self.ort.SessionOptions(), self.settings)
        return self.ort.InferenceSession(model, sess_options=so, providers=[CPU])

    def session(self, model: bytes) -> tuple[object, dict[str, int], list[str]]:
        """(session, nodes per EP, op types not on the EP under test)."""
        ort = self.ort
        if self.ep == CPU:
            return self.cpu_session(model), {}, []
        if self.ep == VULKAN:
            so = configure(self.vkep_runner.session_options(ep_options=self.settings.get("ep_options")),
                           self.settings)
            so.log_severity_level = 3
            sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
            placed = [(op, ep) for _, op, ep in self.vkep_runner.placement(sess) if op not in MEMCPY]
            counts: dict[str, int] = {}
            for _, ep in placed:
                counts[ep] = counts.get(ep, 0) + 1
            return sess, counts, sorted({op for op, ep in placed if ep != self.ep})
        return self._session_with_log(model)

    def _session_with_log(self, model: bytes):
        """A session on another EP; placement from ORT's verbose "Node placements" log (the WebGPU
        wheel's get_provider_graph_assignment_info() does not list its nodes). ORT logs to fd 2."""
        so = configure(self.ort.SessionOptions(), self.settings)
        so.log_severity_level = 0
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as log:
            os.dup2(log.fileno(), 2)
            try:
                sess = self.ort.InferenceSession(model, sess_options=so, providers=[self.ep], enable_fallback=0)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            log.seek(0)
            lines = log.read().decode("utf-8", "replace").splitlines()
        counts: dict[str, int] = {}
        off_ep: set[str] = set()
        for i, line in enumerate(lines):
            hit = PLACED.search(line)
            if not hit:
                continue
            ep, n = hit.group(1), int(hit.group(2))
            nodes = re.findall(r"(\w+) \(", lines[i + 1]) if "Node(s)" in line and i + 1 < len(lines) else []
            n -= sum(op in MEMCPY for op in nodes)
            counts[ep] = counts.get(ep, 0) + n
            if ep != self.ep:
                off_ep.update(op for op in nodes if op not in MEMCPY)
        return sess, {k: v for k, v in counts.items() if v}, sorted(off_ep)

    def ready_check(self) -> None:
        """Fail early when the EP cannot run at all (e.g. Dawn finds no adapter), not once per case."""
        if self.ep == CPU:
            return
        from onnx import TensorProto, helper

        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
        graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "probe", [x],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        sess, nodes, _ = self.session(model.SerializeToString())
        out = sess.run(None, {"x": np.arange(4, dtype=np.float32)}, self.run_options())[0]
        if not np.array_equal(out, 2 * np.arange(4, dtype=np.float32)):
            raise RuntimeError(f"{self.ep}: a probe Add returned {out}")
        if self.ep not in nodes:
            raise RuntimeError(f"{self.ep} did not take the probe model's Add node (placement: {nodes or 'none'})")

    def run_options(self):
        ro = self.ort.RunOptions()
        ro.log_severity_level = 3
        return ro


def _check(session, data_sets, rtol, atol, run_options=None) -> Mismatch:
    m = Mismatch()
    for inputs, expected in data_sets:
        outputs = session.run(None, feeds_for(session, inputs), run_options)
        compare(outputs, expected, rtol, atol, m)
    return m


def _json_number(x: float) -> float | str:
    return x if np.isfinite(x) else str(x)  # "inf"/"nan": the reports stay valid JSON


def run_case(runner: Runner, task: dict) -> dict:
    """One test case -> its record: name, status, nodes per EP, errors, message, seconds."""
    start = time.perf_counter()
    rec: dict = {"name": task["name"]}
    debug = task.get("debug")
    if debug == "crash":
        os.abort()
    if debug == "hang":
        time.sleep(3600)
    rtol, atol, data_sets = task["rtol"], task["atol"], task["data_sets"]
    runner.settings = task.get("session") or {}
    try:
        if runner.ep != CPU:
            try:
                m = _check(runner.cpu_session(task["model"]), data_sets, rtol, atol)
                if not m.ok:
                    rec.update(status="skip-cpu", message=f"CPU EP: {m.message}")
            except Exception as exc:  # noqa: BLE001 — the reference fails: not the EP's case
                rec.update(status="skip-cpu", message=f"CPU EP: {first_line(exc)}")
            if "status" in rec:
                return rec
        stage = "session"
        try:
            sess, nodes, off_ep = runner.session(task["model"])
            rec["nodes"] = nodes
            if off_ep:
                rec["cpu_ops"] = off_ep
            stage = "run"
            m = _check(sess, data_sets, rtol, atol, runner.run_options())
        except Exception as exc:  # noqa: BLE001
            rec.update(status="error", message=f"{stage}: {first_line(exc)}")
            return rec
        if not m.ok:
            rec.update(status="wrong", message=m.message)
            if m.mismatched:  # not for a shape, dtype or sequence-length mismatch
                rec.update(max_abs=_json_number(m.max_abs), max_rel=_json_number(m.max_rel), mismatched=m.mismatched)
            return rec
        if m.max_abs or m.max_rel:  # the largest error of a pass too (the matrix reports it per op and type)
            rec.update(max_abs=_json_number(m.max_abs), max_rel=_json_number(m.max_rel))
        on_ep, total = nodes.get(runner.ep, 0), sum(nodes.values())
        if runner.ep == CPU or on_ep == 0:
            rec["status"] = "pass-cpu"
        else:
            rec["status"] = "pass-vkep" if on_ep == total else "pass-partial"
        return rec
    finally:
        rec["seconds"] = round(time.perf_counter() - start, 4)
        if runner.validation:
            from vkep.gpu.device import validation_messages

            count, text = validation_messages()
            if count:
                rec["validation"] = {"count": count, "first": first_line(text)}


# ---- the worker process ---------------------------------------------------------------------------


def serve(ep: str, fd_in: int, fd_out: int) -> int:
    from multiprocessing.connection import Connection

    tasks, results = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    try:
        runner = Runner(ep)
        runner.ready_check()
        if runner.validation:
            from vkep.gpu.device import validation_messages

            validation_messages()  # the probe's, if any: not the first case's
    except Exception as exc:  # noqa: BLE001 — reported to the parent, which stops the run
        results.send_bytes(pickle.dumps({"ready": False, "error": first_line(exc, 2000),
                                         "traceback": traceback.format_exc()}))
        return 1
    results.send_bytes(pickle.dumps({"ready": True, "info": runner.info(), "pid": os.getpid()}))
    while True:
        try:
            data = tasks.recv_bytes()
        except EOFError:
            return 0
        task = pickle.loads(data)
        if task is None:
            return 0
        results.send_bytes(pickle.dumps(run_case(runner, task)))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: python -m vkep.conformance.worker EP FD_IN FD_OUT", file=sys.stderr)
        return 2
    import faulthandler
    import warnings

    faulthandler.enable()
    warnings.simplefilter("ignore")
    return serve(argv[0], int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    raise SystemExit(main())
