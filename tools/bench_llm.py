#!/usr/bin/env python3
"""LLM generation speed: prefill and decode tokens/s of tools/tiny_llm.py's int4 decoder (the form ORT GenAI's
model builder exports) on vkep, ORT's CPU EP and, with --webgpu, ORT's WebGPU EP, in one run, as ratios.

Greedy generation: a prompt of --prompt tokens (prefill: one run), then --steps - 1 decode runs of one token,
the KV cache kept in the EP's memory through IOBinding (GenAI's shared past/present buffer). Each EP warms up
with one generation, then the best of --repeats generations counts. The tokens of every EP are compared
with the CPU EP's.

    .venv/bin/python tools/bench_llm.py [--webgpu] [--hidden 512 --layers 4 ...] [--steps 32] [--json]

ORT's WebGPU EP needs Mesa 25 lavapipe here: eval "$(tools/mesa_backports.sh)" first; it runs from its own
virtualenv (.venv-webgpu, tools/bench_overhead.py makes it) through tools/_llm_worker.py. A benchmark, not a
test: it asserts nothing; compare ratios of one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
for path in (ROOT, TOOLS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import numpy as np  # noqa: E402
import tiny_llm  # noqa: E402
from _llm_worker import timed_generation  # noqa: E402

# big enough that the matrix work shows, small enough for lavapipe on 2 cores
BENCH = {"vocab": 4096, "hidden": 512, "intermediate": 1536, "layers": 4, "heads": 8, "kv_heads": 2, "context": 256}


def log(msg: str) -> None:
    print(f"bench_llm: {msg}", file=sys.stderr, flush=True)


def run_vkep(config: tiny_llm.Config, model, prompt, args) -> dict:
    import vkep
    from vkep import runner

    devices = vkep.register()
    t0 = time.perf_counter()
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    created = time.perf_counter() - t0
    placed: dict[str, int] = {}
    for _, _, ep in runner.placement(session):
        placed[ep] = placed.get(ep, 0) + 1
    generator = tiny_llm.Generator(session, config, tiny_llm.vkep_memory_info(devices))
    return {"session_create_s": created, "nodes_by_ep": placed, "kv_cache": "vkep",
            **timed_generation(generator, prompt, args.steps, args.repeats)}


def run_cpu(config: tiny_llm.Config, model, prompt, args) -> dict:
    from vkep import runner

    session = runner.cpu_session(model)
    return {"nodes_by_ep": {"CPUExecutionProvider": len(runner.placement(session))}, "kv_cache": "cpu",
            **timed_generation(tiny_llm.Generator(session, config), prompt, args.steps, args.repeats)}


def run_webgpu(config: tiny_llm.Config, args) -> dict:
    from bench_overhead import NO_ADAPTER_HINT, webgpu_python

    try:
        py = webgpu_python()
    except (subprocess.CalledProcessError, OSError) as e:
        return {"error": f"cannot set up .venv-webgpu: {e}"}
    cmd = [str(py), str(TOOLS / "_llm_worker.py"), json.dumps(dataclasses.asdict(config)), "--prompt",
           str(args.prompt), "--steps", str(args.steps), "--repeats", str(args.repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        return {"error": f"worker exited {proc.returncode}: {tail}"}
    data = json.loads(lines[-1])
    if "No supported adapters" in data.get("error", ""):
        data["error"] += " " + NO_ADAPTER_HINT
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tiny_llm.add_config_args(parser)
    parser.set_defaults(**BENCH)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--steps", type=int, default=32, help="generated tokens (the prefill gives the first)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--webgpu", action="store_true", help="also ORT's WebGPU EP (needs Mesa 25 lavapipe)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    config = tiny_llm.config_from_args(args)
    model = tiny_llm.build(config)
    prompt = tiny_llm.prompt_tokens(config, length=args.prompt)
    env = {k: os.environ[k] for k in ("LP_NUM_THREADS", "VK_DRIVER_FILES", "VK_ICD_FILENAMES") if k in os.environ}
    log(f"{dataclasses.asdict(config)} prompt {args.prompt}, {args.steps} tokens, best of {args.repeats} {env}")

    results: dict[str, dict] = {}
    for name, run in (("cpu", lambda: run_cpu(config, model, prompt, args)),
                      ("vkep", lambda: run_vkep(config, model, prompt, args)),
                      ("webgpu", lambda: run_webgpu(config, args))):
        if name == "webgpu" and not args.webgpu:
            continue
        log(f"{name} ...")
        try:
            results[name] = run()
        except Exception as e:  # one EP failing still reports the others
            results[name] = {"error": f"{type(e).__name__}: {e}"}

    cpu = results["cpu"]
    for r in results.values():
        if "prefill_s" in r:
            r["prefill_tok_s"] = args.prompt / r["prefill_s"]
            r["decode_tok_s"] = 1.0 / r["decode_s"]
            # leading tokens equal to the CPU EP's (int8 activations: a rounding flip can part them later)
            ours, theirs = np.array(r["tokens"]).ravel(), np.array(cpu["tokens"]).ravel()
            differ = np.flatnonzero(ours != theirs)
            r["tokens_equal_cpu"] = f"{differ[0] if differ.size else ours.size}/{ours.size}"
            if differ.size:  # the CPU EP's margin between its top two logits where they part
                r["cpu_margin_where_parted"] = cpu["margins"][int(differ[0]) % len(cpu["margins"])]
    if args.json:
        print(json.dumps({"config": dataclasses.asdict(config), "prompt": args.prompt, "steps": args.steps,
                          "results": results}))
        return 0
    print(f"{'EP':8} {'prefill tok/s':>14} {'x CPU':>7} {'decode tok/s':>13} {'x CPU':>7}  same tokens  nodes")
    for name, r in results.items():
        if "prefill_s" not in r:
            print(f"{name:8} {r.get('error', 'no result')}")
            continue
        print(f"{name:8} {r['prefill_tok_s']:14.1f} {r['prefill_tok_s'] / cpu['prefill_tok_s']:7.3f} "
              f"{r['decode_tok_s']:13.1f} {r['decode_tok_s'] / cpu['decode_tok_s']:7.3f}  "
              f"{r['tokens_equal_cpu']:11} {r.get('nodes_by_ep')} (KV cache: {r.get('kv_cache')}"
              + (f"; {r['kv_cache_error']}" if r.get("kv_cache_error") else "") + ")"
              + (f" parted where the CPU EP's top-2 margin is {r['cpu_margin_where_parted']:.3f}"
                 if "cpu_margin_where_parted" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
