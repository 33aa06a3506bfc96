"""`vkep run`: a model on vkep beside ORT's CPU EP, with a verdict in words.

dims.py chooses the free dimensions, inputs.py the feeds, execute.py runs one EP, render.py writes the
report as text; this module decides the verdict:

- `ok` / `differs`: vkep and the CPU EP both ran; every output matches (or not) within tolerance;
- `inputs-do-not-fit`: both fail: the inputs are the problem, and a hint says which dimensions to set;
- `model-fails`: the CPU EP cannot even create a session for the model (e.g. an IR version ORT lacks);
- `vkep-fails`: only vkep fails: a vkep bug, with the node and how to report it;
- `cpu-fails`: only the CPU EP fails: vkep accepted what it should reject (errors behave as the CPU EP's).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import vkep
from vkep import runner
from vkep.run import dims, execute, inputs, profile, render

CANDIDATE_SIZES = (224, 640, 32)  # tried on the CPU EP for the dimensions set by default, for the hint
EXIT_OK, EXIT_FAILED = 0, 1


def command(args: argparse.Namespace) -> int:
    if args.model is None and any(f.endswith(".onnx") for f in args.inputs or []):
        # `--inputs a.npy model.onnx`: the files of --inputs (nargs="+") took the model too
        args.model = next(f for f in args.inputs if f.endswith(".onnx"))
        args.inputs = [f for f in args.inputs if f != args.model]
    model, reference_model, label = _load_model(args.model, args.fp16)
    if not vkep.register():  # not a verdict on the model: nothing to run it on
        raise RuntimeError("vkep found no Vulkan device it can use (see `vkep devices`)")
    names = list(dims.graph_inputs(model))
    given = inputs.load(args.inputs or [], names)
    choice = dims.choose(model, dict(map(dims.parse_dim, args.dim or [])),
                         dict(map(dims.parse_shape, args.shape or [])), given)
    feeds, how = inputs.make(model, choice, given, args.seed)
    report: dict[str, Any] = {
        "model": label,
        "dims": [{"name": d.key, "value": d.value, "how": d.how, "inputs": [list(p) for p in d.places]}
                 for d in choice.dims],
        "inputs": [{"name": n, "shape": list(v.shape), "dtype": str(v.dtype), "how": how[n]} for n, v in feeds.items()],
        "seed": args.seed,
    }
    if not args.json:
        print(render.header(report), flush=True)
    if args.stats:
        vkep.reset_stats()
    profile_prefix = str(Path(args.profile).with_suffix("")) + ".ort" if args.profile else None
    result = execute.attempt("vkep", lambda: runner.vkep_session(
        model, free_dims=choice.overrides, log_severity=execute.SESSION_LOG_SEVERITY, profile_prefix=profile_prefix),
        feeds, args.runs)
    if result.profile_file:
        report["profile"] = _profile(result.profile_file, args.profile)
    # the reference: the CPU EP on the same values (a float16 model's float32 twin gets them widened)
    ref_feeds = feeds if reference_model is None else {
        k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()}
    reference = execute.attempt("cpu", lambda: runner.cpu_session(
        reference_model or model, free_dims=choice.overrides, log_severity=execute.SESSION_LOG_SEVERITY),
        ref_feeds, args.runs if result.ok else 0)
    report["outputs"] = execute.compare(result, reference) if result.ok and reference.ok else []
    report.update(_verdict(model, choice, given, args.seed, result, reference, report["outputs"]))
    report["placement"] = execute.placement_summary(result) if result.placement else None
    report["latency"] = {"vkep": result.timing.as_dict(), "cpu": reference.timing.as_dict()}
    report["vkep_error"] = result.failure.as_dict() if result.failure else None
    report["cpu_error"] = reference.failure.as_dict() if reference.failure else None
    report["versions"] = _versions()
    if args.stats:
        report["stats"] = vkep.stats()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render.body(report))
        if report.get("profile"):
            print(profile.render(report["profile"], args.profile))
    return EXIT_OK if report["verdict"] in ("ok", "differs") else EXIT_FAILED


def _profile(written: str, path: str) -> dict[str, Any]:
    """Move ORT's trace to `path` and summarize it, beside the FMA ceiling of the device the session ran on."""
    from vkep.gpu.ceiling import fma_gflops

    os.replace(written, path)
    with open(path) as f:
        events = json.load(f)
    # the device vkep's events name (its index is its key in vkep.stats())
    ran_on = {e["args"]["device"] for e in events if e.get("cat") == "Kernel" and "device" in (e.get("args") or {})}
    index = next((int(key) for key, entry in vkep.stats().items() if key != "process" and entry["device"] in ran_on),
                 None)
    ceiling, _ = fma_gflops(index)
    return profile.summarize(events, ceiling)


def _load_model(path: str | None, fp16: bool) -> tuple[onnx.ModelProto, onnx.ModelProto | None, str]:
    from vkep import models

    if path is None:
        dtype = np.float16 if fp16 else np.float32
        label = f"default model (vkep.models.all_ops, {np.dtype(dtype).name})"
        return models.all_ops(dtype), (models.all_ops(np.float32) if fp16 else None), label
    return onnx.load(path), None, path


def _verdict(model: onnx.ModelProto, choice: dims.Choice, given: dict, seed: int,
             result: execute.Attempt, reference: execute.Attempt, outputs: list[dict]) -> dict[str, Any]:
    if result.ok and reference.ok:
        bad = [r["name"] for r in outputs if not r["matches"]]
        if not bad:
            return {"verdict": "ok", "message": "vkep runs the model; every output matches the CPU EP's.",
                    "hint": None}
        return {"verdict": "differs", "hint": None,
                "message": f"vkep runs the model, but {', '.join(bad)} differ{'s' if len(bad) == 1 else ''} "
                           f"from the CPU EP's beyond tolerance (float32: rtol 1e-3, atol 1e-4)."}
    if result.ok:
        return {"verdict": "cpu-fails", "hint": f"{_suggest(model, choice, given, seed)} About vkep: {_REPORT}",
                "message": f"only the CPU EP fails ({reference.failure.where()}): these inputs do not fit the "
                           "model, and vkep ran them instead of failing as the CPU EP does."}
    if reference.ok:
        return {"verdict": "vkep-fails", "hint": _REPORT,
                "message": f"only vkep fails: the CPU EP runs the same inputs. vkep fails at "
                           f"{result.failure.where()}."}
    if reference.failure.stage == "session" and not _loads_on_cpu(model, choice):
        return {"verdict": "model-fails", "hint": None,
                "message": "the CPU EP cannot create a session for this model either, whatever the inputs: "
                           "the model itself is the problem (see the CPU EP's error above)."}
    hint = _suggest(model, choice, given, seed)
    return {"verdict": "inputs-do-not-fit", "hint": hint,
            "message": f"the CPU EP fails too ({reference.failure.where()}): these inputs do not fit the model."}


def _loads_on_cpu(model: onnx.ModelProto, choice: dims.Choice) -> bool:
    """Whether the CPU EP creates a session without the free-dimension overrides (with them, shape
    inference can fail on values that do not fit the model: then the inputs are the problem)."""
    if not choice.overrides:
        return False  # that is what just failed
    try:
        runner.cpu_session(model, log_severity=4)
    except Exception:  # noqa: BLE001
        return False
    return True


_REPORT = ("please report it to the vkep developers with this command line and its --json output, "
           "`vkep devices --json`, and the model (or the failing node: its op, attributes and input shapes).")


def _suggest(model: onnx.ModelProto, choice: dims.Choice, given: dict, seed: int) -> str:
    """What to try: values for the dimensions set by default that the CPU EP accepts, when some do."""
    guessed = [d for d in choice.dims if d.defaulted]
    if not guessed:
        if given:
            return "check the arrays given with --inputs against the model's inputs (shapes, types, values)."
        return "give real inputs with --inputs FILE.npz or --inputs NAME=FILE.npy."
    for size in CANDIDATE_SIZES:
        trial = choice.with_values({d.key: size for d in guessed}, "tried")
        feeds, _ = inputs.make(model, trial, given, seed)
        probe = execute.attempt("cpu", lambda trial=trial: runner.cpu_session(
            model, free_dims=trial.overrides, log_severity=4), feeds, 0)
        if probe.ok:
            return f"try {_flags(trial, guessed)} (the CPU EP runs the model with these)."
    tried = ", ".join(map(str, CANDIDATE_SIZES))
    return (f"set the free dimensions that nothing in the model explains ({_flags(choice, guessed, value=False)}); "
            f"the CPU EP fails with each of {tried} too, so give real inputs with --inputs.")


def _flags(choice: dims.Choice, which: list[dims.Dim], value: bool = True) -> str:
    """--dim flags for named dimensions, --shape flags for inputs with unnamed ones."""
    keys = {d.key for d in which}
    out = [f"--dim {d.key}={d.value if value else 'N'}" for d in choice.dims if d.key in keys and d.named]
    shapes = choice.shapes()
    for name in dict.fromkeys(n for d in choice.dims if d.key in keys and not d.named for n, _ in d.places):
        out.append(f"--shape {name}={','.join(map(str, shapes[name]))}")
    return " ".join(out)


def _versions() -> dict[str, Any]:
    stats = vkep.stats()
    return {"vkep": vkep.__version__, "onnxruntime": ort.__version__,
            "devices": [entry["device"] for key, entry in stats.items() if key != "process"]}
