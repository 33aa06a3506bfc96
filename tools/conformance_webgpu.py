#!/usr/bin/env python3
"""The ONNX backend node tests through ORT's WebGPU EP (Dawn on Vulkan), in the format of `vkep conformance`.

    eval "$(tools/mesa_backports.sh)"     # Dawn needs Mesa 25 lavapipe; Debian 12's Mesa 22.3 has no adapter
    .venv/bin/python tools/conformance_webgpu.py [--filter REGEX] [--json OUT.json] [--markdown OUT.md]
                                                 [--jobs N] [--timeout S]
    .venv/bin/python tools/conformance_webgpu.py --compare A.json B.json

The `onnxruntime-webgpu` wheel replaces the `onnxruntime` module, so the workers run in their own
virtualenv, `.venv-webgpu` (created on first use, as tools/bench_overhead.py does), through
tools/_conformance_webgpu_worker.py, which runs vkep's own worker code (`vkep.conformance.worker`: numpy
and onnxruntime only). This process (vkep's `.venv`) builds the corpus from its onnx package, runs the
pool and writes the reports with `vkep.conformance`; `vkep conformance --ep WebGpuExecutionProvider`
runs this tool. Placement comes from ORT's verbose "Node placements" log: the WebGPU wheel's
get_provider_graph_assignment_info() does not list WebGPU nodes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_overhead import NO_ADAPTER_HINT, WEBGPU_VENV, webgpu_python  # noqa: E402

from vkep import conformance  # noqa: E402
from vkep.conformance import report as conformance_report  # noqa: E402

WORKER = TOOLS / "_conformance_webgpu_worker.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filter", metavar="REGEX", help="only the cases whose name matches (re.search)")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--markdown", metavar="OUT.md")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case before its worker is killed")
    ap.add_argument("--ep", default="WebGpuExecutionProvider", help="an EP of the onnxruntime-webgpu wheel")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="print two reports side by side")
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (conformance_report.load(p) for p in args.compare)
        print(conformance_report.compare(a, b), end="")
        return 0
    try:
        py = webgpu_python()
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"conformance_webgpu: cannot set up {WEBGPU_VENV}: {e}", file=sys.stderr)
        return 1
    try:
        doc = conformance.run(args.ep, args.filter, jobs=args.jobs, timeout=args.timeout,
                              cmd=[str(py), str(WORKER), args.ep],
                              command=["tools/conformance_webgpu.py", *sys.argv[1:]])
    except conformance.WorkerStartError as e:
        hint = f"\n{NO_ADAPTER_HINT}" if "adapter" in str(e).lower() else ""
        print(f"conformance_webgpu: {e}{hint}", file=sys.stderr)
        return 1
    conformance.finish(doc, args.json, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
