#!/usr/bin/env python3
"""ORT GenAI's own Generator on vkep and on the CPU EP, over tools/tiny_llm.py's decoder written as a GenAI
model folder (model.onnx + genai_config.json): greedy tokens of both, and how many node runs vkep did.

onnxruntime-genai goes in its own virtualenv (it pins its onnxruntime; the builder wants torch):
`python3 -m venv .venv-genai && .venv-genai/bin/pip install onnxruntime-genai`. This tool runs in .venv (vkep's
plugin library runs its Python in the host interpreter, so vkep must import there) and takes
onnxruntime_genai from .venv-genai's site-packages; both virtualenvs must hold the same onnxruntime version.

    .venv/bin/python tools/genai_generate.py [--steps 16] [--float16] [--genai-site .venv-genai/lib/python3.11/site-packages]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tools"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import tiny_llm  # noqa: E402

EP = "VulkanExecutionProvider"


def generate(og, folder: Path, prompt: list[int], steps: int, on_vkep: bool) -> list[int]:
    config = og.Config(str(folder))
    config.clear_providers()
    if on_vkep:
        config.append_provider(EP)
        config.set_provider_option(EP, "allow_cpu_device", "1")
    model = og.Model(config)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + steps, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([prompt], np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    return [int(t) for t in generator.get_sequence(0)[len(prompt):]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--float16", action="store_true", help="the builder's GPU form (float16)")
    parser.add_argument("--genai-site", default=str(next((ROOT / ".venv-genai" / "lib").glob("python3*/site-packages"),
                                                           "")))
    args = parser.parse_args()
    sys.path.append(args.genai_site)  # after .venv's own packages: vkep's onnxruntime stays the one loaded
    import onnxruntime_genai as og

    import vkep

    config = tiny_llm.Config(float16=args.float16)
    prompt = tiny_llm.prompt_tokens(config)[0].tolist()
    og.register_execution_provider_library(EP, vkep.get_library_path())
    try:
        with tempfile.TemporaryDirectory(prefix="vkep-genai-") as tmp:
            folder = tiny_llm.write_genai_folder(config, Path(tmp))
            cpu = generate(og, folder, prompt, args.steps, on_vkep=False)
            before = vkep.stats()["process"]
            got = generate(og, folder, prompt, args.steps, on_vkep=True)
            after = vkep.stats()["process"]
    finally:
        # before Python finalizes: GenAI would otherwise release vkep's factory from its static destructors
        og.unregister_execution_provider_library(EP)
    runs = sum(after.values()) - sum(before.values())
    print(f"cpu:  {cpu}\nvkep: {got}\nvkep ran {runs} nodes ({len(tiny_llm.build(config).graph.node)} in the "
          f"graph, {args.steps} runs); tokens {'equal' if got == cpu else 'DIFFER'}")
    return 0 if got == cpu else 1


if __name__ == "__main__":
    sys.exit(main())
