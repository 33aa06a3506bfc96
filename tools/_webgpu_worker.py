"""Worker for tools/bench_overhead.py: times one model on ORT's WebGPU EP.

Runs inside `.venv-webgpu` (the `onnxruntime-webgpu` wheel replaces the `onnxruntime` module, so it
cannot share a virtualenv with vkep). Depends only on numpy and onnxruntime, not on vkep.

    python _webgpu_worker.py MODEL.onnx INPUTS.npz [--runs N] [--warmup N] [--outputs OUT.npz]

Prints one JSON line on stdout: {"ort_version", "providers", "times_s", "nodes_by_ep", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

PLACED = re.compile(r"placed on \[(\w+)\]\. Number of nodes: (\d+)")


def assignment_info(sess) -> dict[str, int]:
    """Nodes per EP from get_provider_graph_assignment_info(), {} when absent or empty."""
    counts: dict[str, int] = {}
    get_info = getattr(sess, "get_provider_graph_assignment_info", None)
    if get_info is None:
        return counts
    try:
        for subgraph in get_info() or []:
            counts[subgraph.ep_name] = counts.get(subgraph.ep_name, 0) + len(subgraph.get_nodes())
    except Exception:
        return {}
    return counts


def placement_from_log(model: str, provider: str) -> dict[str, int]:
    """Nodes per EP parsed from ORT's verbose log ("... placed on [EP]. Number of nodes: N").

    ORT's default logger writes to fd 2, so fd 2 is pointed at a temporary file meanwhile.
    """
    so = ort.SessionOptions()
    so.log_severity_level = 0
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as log:
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(model, sess_options=so, providers=[provider], enable_fallback=0)
        except Exception:
            pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
    counts: dict[str, int] = {}
    for ep, n in PLACED.findall(text):
        counts[ep] = counts.get(ep, 0) + int(n)
    return counts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("inputs", help=".npz with one array per graph input")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--provider", default="WebGpuExecutionProvider")
    ap.add_argument("--outputs", help="write the first run's outputs to this .npz (for checking)")
    args = ap.parse_args()

    result: dict = {"ort_version": ort.__version__, "available": ort.get_available_providers()}
    if args.provider not in result["available"]:
        result["error"] = f"{args.provider} is not in this onnxruntime build"
        print(json.dumps(result))
        return 1

    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    t0 = time.perf_counter()
    try:
        # enable_fallback=0: when the EP fails (e.g. Dawn finds no adapter), fail instead of silently
        # re-creating the session on the CPU EP.
        sess = ort.InferenceSession(args.model, sess_options=so, providers=[args.provider], enable_fallback=0)
    except Exception as e:
        result["error"] = f"session creation failed: {type(e).__name__}: {str(e).strip()[:600]}"
        print(json.dumps(result))
        return 1
    result["session_create_s"] = time.perf_counter() - t0
    result["providers"] = sess.get_providers()

    counts = assignment_info(sess)
    if counts:
        result["nodes_by_ep"] = counts
    else:
        # onnxruntime-webgpu 1.27 has the API but returns [] for WebGPU nodes: read ORT's verbose
        # "Node placements" log of a second, untimed session instead.
        counts = placement_from_log(args.model, args.provider)
        if counts:
            result["nodes_by_ep"] = counts
            result["nodes_by_ep_source"] = "verbose log"
        else:
            result["nodes_by_ep_error"] = "no placement info from this wheel"

    with np.load(args.inputs) as npz:
        feeds = {name: npz[name] for name in npz.files}

    t0 = time.perf_counter()
    outputs = sess.run(None, feeds)
    result["first_run_s"] = time.perf_counter() - t0
    if args.outputs:
        names = [o.name for o in sess.get_outputs()]
        np.savez(args.outputs, **dict(zip(names, outputs, strict=True)))
    for _ in range(args.warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    result["times_s"] = times
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
