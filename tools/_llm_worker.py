"""Worker for tools/bench_llm.py: times greedy generation with tools/tiny_llm.py's decoder on one ORT EP that
is not vkep (ORT's WebGPU EP from .venv-webgpu, whose onnxruntime-webgpu wheel replaces the onnxruntime module).
Depends on numpy, onnx and onnxruntime only.

    python _llm_worker.py CONFIG_JSON [--provider WebGpuExecutionProvider] [--device DEVICE] [--prompt N]
                          [--steps N] [--repeats N]

Prints one JSON line on stdout: {"ort_version", "nodes_by_ep", "tokens", "prefill_s", "decode_s", ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_llm  # noqa: E402
from _webgpu_worker import assignment_info, placement_from_log  # noqa: E402


def timed_generation(generator: tiny_llm.Generator, prompt, steps: int, repeats: int) -> dict:
    """Best prefill time and best mean decode-step time over `repeats` generations (after one warm-up)."""
    generator.generate(prompt, steps)  # warm-up: pipelines, allocations
    prefill, decode = [], []
    marks: list[float] = []
    for _ in range(repeats):
        marks[:] = [time.perf_counter()]
        tokens = generator.generate(prompt, steps, lambda step, ids: marks.append(time.perf_counter()))
        prefill.append(marks[1] - marks[0])
        decode.append((marks[-1] - marks[1]) / max(1, steps - 1))
    top2 = np.sort(np.stack(generator.logits), -1)[..., -2:]
    return {"tokens": tokens.tolist(), "prefill_s": min(prefill), "decode_s": min(decode),
            "margins": (top2[..., 1] - top2[..., 0]).min(-1).tolist()}  # each step's top-2 logit margin


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", help="tiny_llm.Config fields as JSON")
    ap.add_argument("--provider", default="WebGpuExecutionProvider")
    # (IOBinding the presents to "webgpu" and feeding them back corrupts onnxruntime-webgpu 1.27's heap on
    # Mesa 25 lavapipe: "corrupted double-linked list" in run_with_iobinding. So CPU memory by default.)
    ap.add_argument("--device", default="", help="IOBinding device for the KV cache ('': CPU memory)")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    result: dict = {"ort_version": ort.__version__}
    if args.provider not in ort.get_available_providers():
        result["error"] = f"{args.provider} is not in this onnxruntime build"
        print(json.dumps(result))
        return 1
    config = tiny_llm.Config(**json.loads(args.config))
    model = tiny_llm.build(config).SerializeToString()
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    try:
        session = ort.InferenceSession(model, sess_options=so, providers=[args.provider], enable_fallback=0)
    except Exception as e:
        result["error"] = f"session creation failed: {type(e).__name__}: {str(e).strip()[:600]}"
        print(json.dumps(result))
        return 1
    # (onnxruntime-webgpu 1.27 records only the CPU EP's nodes: ORT's verbose log has them all)
    placed = assignment_info(session)
    logged = placement_from_log(model, args.provider)
    result["nodes_by_ep"] = logged if sum(logged.values()) > sum(placed.values()) else placed
    prompt = tiny_llm.prompt_tokens(config, length=args.prompt)
    generator = tiny_llm.Generator(session, config, device=args.device or None)
    try:
        result.update(timed_generation(generator, prompt, args.steps, args.repeats))
        result["kv_cache"] = args.device or "cpu"
    except Exception as e:  # (the EP's OrtValue device may not be in this wheel's Python binding)
        result["kv_cache_error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
        result.update(timed_generation(tiny_llm.Generator(session, config), prompt, args.steps, args.repeats))
        result["kv_cache"] = "cpu"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
