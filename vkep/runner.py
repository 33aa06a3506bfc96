"""Sessions with vkep and with ORT's CPU EP, and where ORT placed each node.

Used by `vkep run` (vkep/run/) and by the tests, through ORT's ordinary Python API only.
"""

from __future__ import annotations

import onnxruntime as ort

import vkep


def session_options(disable_cpu_fallback: bool = False, threads: int = 0,
                    ep_options: dict[str, str] | None = None, free_dims: dict[str, int] | None = None,
                    log_severity: int | None = None, with_vkep: bool = True) -> ort.SessionOptions:
    """Session options with vkep; `ep_options` are vkep's EP options (README: EP options); `free_dims` are
    ORT's free-dimension overrides by name. vkep is asked for explicitly here, so it runs on a
    CPU-implemented device (lavapipe) too where there is no GPU."""
    so = ort.SessionOptions()
    if with_vkep:
        so.add_provider_for_devices(vkep.register(), {"allow_cpu_device": "1", **(ep_options or {})})
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    for name, value in (free_dims or {}).items():
        so.add_free_dimension_override_by_name(name, value)
    if log_severity is not None:
        so.log_severity_level = log_severity
    if disable_cpu_fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if threads:
        so.intra_op_num_threads = threads
    return so


def vkep_session(model, disable_cpu_fallback: bool = False, threads: int = 0,
                 ep_options: dict[str, str] | None = None, free_dims: dict[str, int] | None = None,
                 log_severity: int | None = None, profile_prefix: str | None = None) -> ort.InferenceSession:
    """A session with vkep; enable_fallback=0 so an EP failure is an error, not a silent CPU rerun.
    `profile_prefix`: ORT profiles the session (vkep's events included) into `<prefix>_<date>.json`."""
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    so = session_options(disable_cpu_fallback, threads, ep_options, free_dims, log_severity)
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(data, sess_options=so, enable_fallback=0)


def cpu_session(model, free_dims: dict[str, int] | None = None, log_severity: int | None = None
                ) -> ort.InferenceSession:
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    so = session_options(free_dims=free_dims, log_severity=log_severity, with_vkep=False)
    return ort.InferenceSession(data, sess_options=so, providers=["CPUExecutionProvider"])


def placement(session: ort.InferenceSession) -> list[tuple[str, str, str]]:
    """(node name, op type, EP) for every node, from ORT's own assignment record."""
    return [(node.name, node.op_type, sub.ep_name) for sub in session.get_provider_graph_assignment_info()
            for node in sub.get_nodes()]
