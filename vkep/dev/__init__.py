"""`vkep dev KERNEL`: a live shader loop for kernel authors.

    vkep dev Relu                      # an op: its manifest entries, their shader and includes
    vkep dev unary.comp                # a shader: every manifest entry that uses it
    vkep dev ~/work/shaders/unary.comp # a shader in a copy of the shader directory (compiled from there)
    vkep dev Relu --shader-dir DIR     # the same, naming the copy (or VKEP_SHADER_DIR=DIR)
    vkep dev Relu --model m.onnx       # also rerun a model in one live session after each save
    vkep dev Relu --once               # one cycle, then exit (scripts, tests)

On every save of the shader, a file it includes or the manifest: the kernel's variants are compiled by
glslangValidator and validated by spirv-val (`target`), swapped into the live sessions (`vkep.ort.swap`), its
generated reference cases run against the CPU EP (`cases`, from vkep.conformance.generated), one case is timed
with GPU timestamps (`vkep.gpu.timing`; host timing where the queue writes none, labelled so), and each figure is
printed beside the previous save's (`loop`). A compile error prints the compiler's file:line messages and keeps
the last good pipelines.
"""

from __future__ import annotations

import argparse

import vkep
from vkep.gpu import shaders


def command(args: argparse.Namespace) -> int:
    if args.shader_dir:
        shaders.set_shader_dir(args.shader_dir)
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # errors only: ORT warns on every session of an old opset's case
    vkep.register()  # vkep.ort (which vkep.dev.loop uses) lives in the plugin ORT loads
    from vkep.dev.loop import DevLoop

    loop = DevLoop(args.kernel, model=args.model)
    try:
        outcome = loop.cycle()
        if args.once:
            failed = outcome.kept_last_good or any(not r.ok for r in outcome.results)
            return 1 if failed else 0
        loop.watch()
        return 0
    finally:
        loop.close()
