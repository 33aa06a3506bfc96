"""Worker for tools/conformance_webgpu.py: runs inside `.venv-webgpu` (the onnxruntime-webgpu wheel).

    .venv-webgpu/bin/python tools/_conformance_webgpu_worker.py EP FD_IN FD_OUT

It is vkep's own worker (`vkep.conformance.worker`, which needs only numpy, onnx and onnxruntime when the
EP is not vkep), imported from this source tree rather than installed into the WebGPU virtualenv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vkep.conformance.worker import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
