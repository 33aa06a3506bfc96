#!/usr/bin/env python3
"""A small Llama-style decoder in the form ORT GenAI's model builder exports it, and a greedy generation loop
that keeps the KV cache in an EP's device memory across steps (ORT IOBinding).

The graph follows `python -m onnxruntime_genai.models.builder -p int4 -e cpu` (onnxruntime-genai 0.18) node
for node: names, op types, attributes and input/output names, so that ORT GenAI's Generator could run it
(genai_config.json beside it: `write_genai_folder`). Weights are random (fixed seed), quantized to
symmetric int4 blocks as the builder's MatMulNBitsQuantizer stores them (no zero points). `--compare
MODEL.onnx` checks a graph made here against one the builder exported (same config), node by node.

    .venv/bin/python tools/tiny_llm.py [--layers N --hidden N ...] [--steps N] [--compare MODEL.onnx]

prints the tokens vkep and ORT's CPU EP generate from the same prompt.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
MASK = "/model/attn_mask_reformat/attn_mask_subgraph"
ONE_1D, ONE = "/model/constants/INT64/[1]", "/model/constants/INT64/1"
SEQLENS, TOTAL = f"{MASK}/Sub/Cast/output_0", f"{MASK}/Gather/Cast/output_0"


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int = 256
    hidden: int = 64
    intermediate: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    context: int = 128  # max_position_embeddings: rows of the cos/sin caches and GenAI's max_length
    block_size: int = 32
    accuracy_level: int = 4  # what the builder writes for -e cpu -p int4
    packed_qkv: bool = True  # the builder packs q/k/v into one MatMulNBits where it can
    rope_theta: float = 10000.0
    eps: float = 1e-6
    logit_scale: float = 4.0  # lm_head weights' scale over the others: decisive logits, stable greedy choices
    seed: int = 0
    float16: bool = False  # activations, KV cache and float weights in float16, as the builder's GPU exports (-e webgpu)

    @property
    def head_size(self) -> int:
        return self.hidden // self.heads

    @property
    def dtype(self) -> type:
        return np.float16 if self.float16 else np.float32


def _quantize_int4(w: np.ndarray, block: int, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """w [K, N] -> (packed uint8 [N, K/block, block/2], scales float [N, K/block]): symmetric int4 blocks
    (zero point 8, ORT's default when MatMulNBits has no zero_points input), low nibble first."""
    k, n = w.shape
    blocks = w.T.reshape(n, k // block, block)
    scales = np.abs(blocks).max(-1) / 7.0
    scales[scales == 0] = 1.0
    q = np.clip(np.round(blocks / scales[..., None]) + 8, 0, 15).astype(np.uint8)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8), scales.astype(dtype)


class _Graph:
    def __init__(self, config: Config):
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def node(self, op: str, name: str, inputs: list[str], outputs: list[str] | None = None, domain: str = "",
             **attrs) -> str:
        outputs = outputs or [f"{name}/output_0"]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0]

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def norm_weight(self, name: str) -> str:
        return self.init(name, (1.0 + 0.1 * self.rng.standard_normal(self.config.hidden)).astype(self.config.dtype))

    def matmul_nbits(self, path: str, weight: str, x: str, k: int, n: int, scale: float = 1.0,
                     output: str | None = None) -> str:
        c = self.config
        w = self.rng.standard_normal((k, n)).astype(np.float32) * scale / np.sqrt(k)
        packed, scales = _quantize_int4(w, c.block_size, c.dtype)
        inputs = [x, self.init(f"{weight}.MatMul.weight_Q4", packed),
                  self.init(f"{weight}.MatMul.weight_scales", scales)]
        return self.node("MatMulNBits", f"{path}/MatMul_Q4", inputs, [output] if output else
                         [f"{path}/MatMul/output_0"], domain=MS, K=k, N=n, accuracy_level=c.accuracy_level,
                         bits=4, block_size=c.block_size)


def build(config: Config = Config()) -> onnx.ModelProto:
    """The decoder as the model builder exports it for -p int4 -e cpu (float32), or -e webgpu (float16)."""
    c, g = config, _Graph(config)
    f32, hd = helper.np_dtype_to_tensor_dtype(np.dtype(config.dtype)), config.head_size
    # seqlens_k = sum(attention_mask) - 1 and total_sequence_length = attention_mask's width, as int32
    g.node("Constant", "/model/constant_nodes/INT64/[1]", [], [ONE_1D],
           value=numpy_helper.from_array(np.array([1], np.int64), ONE_1D))
    mask_sum = g.node("ReduceSum", f"{MASK}/ReduceSum", ["attention_mask", ONE_1D], keepdims=0)
    sub = g.node("Sub", f"{MASK}/Sub", [mask_sum, ONE_1D])
    g.node("Cast", f"{MASK}/Sub/Cast", [sub], [SEQLENS], to=TensorProto.INT32)
    shape = g.node("Shape", f"{MASK}/Shape", ["attention_mask"])
    g.node("Constant", "/model/constant_nodes/INT64/1", [], [ONE],
           value=numpy_helper.from_array(np.array(1, np.int64), ONE))
    width = g.node("Gather", f"{MASK}/Gather", [shape, ONE], axis=0)
    g.node("Cast", f"{MASK}/Gather/Cast", [width], [TOTAL], to=TensorProto.INT32)

    embed = g.init("model.embed_tokens.weight", g.rng.standard_normal((c.vocab, c.hidden)).astype(c.dtype))
    x = g.node("Gather", "/model/embed_tokens/Gather", [embed, "input_ids"])
    norm = g.node("SimplifiedLayerNormalization", "/model/layers.0/input_layernorm/LayerNorm",
                  [x, g.norm_weight("model.layers.0.input_layernorm.weight")],
                  ["/model/layers.0/input_layernorm/output_0"], epsilon=c.eps, axis=-1, stash_type=1)
    inv_freq = 1.0 / c.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    angles = np.arange(c.context, dtype=np.float64)[:, None] * inv_freq[None, :]
    g.init("cos_cache", np.cos(angles).astype(c.dtype))
    g.init("sin_cache", np.sin(angles).astype(c.dtype))
    residual = x
    for i in range(c.layers):
        layer, weights = f"/model/layers.{i}", f"model.layers.{i}"
        q_out, kv_out = c.heads * hd, c.kv_heads * hd
        if c.packed_qkv:
            qkv = [g.matmul_nbits(f"{layer}/attn/qkv_proj", f"{weights}.attn.qkv_proj", norm, c.hidden,
                                  q_out + 2 * kv_out), "", ""]
        else:
            qkv = [g.matmul_nbits(f"{layer}/attn/{p}_proj", f"{weights}.attn.{p}_proj", norm, c.hidden, n)
                   for p, n in (("q", q_out), ("k", kv_out), ("v", kv_out))]
        attn = g.node("GroupQueryAttention", f"{layer}/attn/GroupQueryAttention",
                      [*qkv, f"past_key_values.{i}.key", f"past_key_values.{i}.value", SEQLENS, TOTAL,
                       "cos_cache", "sin_cache", "", "", ""],
                      [f"{layer}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                      domain=MS, num_heads=c.heads, kv_num_heads=c.kv_heads, scale=float(1 / np.sqrt(hd)),
                      local_window_size=-1, softcap=0.0, do_rotary=1, rotary_interleaved=0)
        o = g.matmul_nbits(f"{layer}/attn/o_proj", f"{weights}.attn.o_proj", attn, q_out, c.hidden)
        post = f"{layer}/post_attention_layernorm"
        g.node("SkipSimplifiedLayerNormalization", f"{post}/SkipLayerNorm",
               [residual, o, g.norm_weight(f"{weights}.post_attention_layernorm.weight")],
               [f"{post}/output_0", "", "", f"{post}/output_3"], domain=MS, epsilon=c.eps)
        norm, residual = f"{post}/output_0", f"{post}/output_3"
        gate = g.matmul_nbits(f"{layer}/mlp/gate_proj", f"{weights}.mlp.gate_proj", norm, c.hidden,
                              c.intermediate)
        up = g.matmul_nbits(f"{layer}/mlp/up_proj", f"{weights}.mlp.up_proj", norm, c.hidden, c.intermediate)
        sig = g.node("Sigmoid", f"{layer}/mlp/act_fn/Sigmoid", [gate])
        act = g.node("Mul", f"{layer}/mlp/act_fn/Mul", [gate, sig])
        mlp = g.node("Mul", f"{layer}/mlp/Mul", [act, up])
        down = g.matmul_nbits(f"{layer}/mlp/down_proj", f"{weights}.mlp.down_proj", mlp, c.intermediate,
                              c.hidden)
        # the next layer's input norm (or the final norm) adds the residual
        last = i == c.layers - 1
        nxt = f"/model/layers.{i + 1}/" + ("final_norm_layernorm" if last else "input_layernorm")
        weight = f"model.layers.{i + 1}." + ("final_norm_layernorm" if last else "input_layernorm") + ".weight"
        outputs = [f"{nxt}/output_0"] + ([] if last else ["", "", f"{nxt}/output_3"])
        g.node("SkipSimplifiedLayerNormalization", f"{nxt}/SkipLayerNorm", [residual, down, g.norm_weight(weight)],
               outputs, domain=MS, epsilon=c.eps)
        norm, residual = f"{nxt}/output_0", f"{nxt}/output_3"
    g.matmul_nbits("/lm_head", "lm_head", norm, c.hidden, c.vocab, scale=c.logit_scale, output="logits")

    # (the builder names the head size too: kv_cache_dim)
    cache = ["batch_size", c.kv_heads, "past_sequence_length", "kv_cache_dim"]
    present = ["batch_size", c.kv_heads, "total_sequence_length", "kv_cache_dim"]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"])]
    inputs += [helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", f32, cache)
               for kv in ("key", "value") for i in range(c.layers)]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", c.vocab])]
    outputs += [helper.make_tensor_value_info(f"present.{i}.{kv}", f32, present)
                for kv in ("key", "value") for i in range(c.layers)]
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22), helper.make_opsetid(MS, 1)],
                             ir_version=10, producer_name="vkep tools/tiny_llm.py")


def genai_config(config: Config) -> dict:
    """genai_config.json as the builder writes it for this model (greedy search, shared KV buffer)."""
    c = config
    decoder = {"session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
               "filename": "model.onnx", "head_size": c.head_size, "hidden_size": c.hidden,
               "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                          "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
               "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                           "present_value_names": "present.%d.value"},
               "num_attention_heads": c.heads, "num_hidden_layers": c.layers, "num_key_value_heads": c.kv_heads}
    search = {"diversity_penalty": 0.0, "do_sample": False, "early_stopping": True, "length_penalty": 1.0,
              "max_length": c.context, "min_length": 0, "no_repeat_ngram_size": 0, "num_beams": 1,
              "num_return_sequences": 1, "past_present_share_buffer": True, "repetition_penalty": 1.0,
              "temperature": 1.0, "top_k": 50, "top_p": 1.0}
    return {"model": {"bos_token_id": 1, "context_length": c.context, "decoder": decoder, "eos_token_id": 2,
                      "pad_token_id": 0, "type": "llama", "vocab_size": c.vocab}, "search": search}


def write_genai_folder(config: Config, folder: Path) -> Path:
    """model.onnx and genai_config.json in `folder`, for ORT GenAI's og.Model(folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(build(config), folder / "model.onnx")
    (folder / "genai_config.json").write_text(json.dumps(genai_config(config), indent=4))
    return folder


def compare(ours: onnx.ModelProto, theirs: onnx.ModelProto) -> list[str]:
    """Differences in graph structure (node names, ops, domains, inputs, outputs, attributes other than
    Constant values; graph inputs/outputs; initializer names, types and shapes) between two exports."""
    diffs: list[str] = []
    opsets = [sorted((o.domain, o.version) for o in m.opset_import) for m in (ours, theirs)]
    if opsets[0] != opsets[1]:
        diffs.append(f"opsets {opsets[0]} here, {opsets[1]} there")

    def attrs(n: onnx.NodeProto) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in n.attribute if n.op_type != "Constant"}

    if len(ours.graph.node) != len(theirs.graph.node):
        diffs.append(f"{len(ours.graph.node)} nodes here, {len(theirs.graph.node)} there")
    for a, b in zip(ours.graph.node, theirs.graph.node, strict=False):  # (a count mismatch is reported above)
        for what, x, y in (("name", a.name, b.name), ("op", a.op_type, b.op_type), ("domain", a.domain, b.domain),
                           ("inputs", list(a.input), list(b.input)), ("outputs", list(a.output), list(b.output))):
            if x != y:
                diffs.append(f"{b.name}: {what} {x} here, {y} there")
        ours_attrs, theirs_attrs = attrs(a), attrs(b)
        for key in set(ours_attrs) | set(theirs_attrs):
            x, y = ours_attrs.get(key), theirs_attrs.get(key)
            if not (x == y or (isinstance(x, float) and isinstance(y, float) and np.isclose(x, y, rtol=1e-6))):
                diffs.append(f"{b.name}: attribute {key} {x} here, {y} there")

    def values(vs) -> list:
        return [(v.name, v.type.tensor_type.elem_type,
                 [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]) for v in vs]

    for what in ("input", "output"):
        x, y = values(getattr(ours.graph, what)), values(getattr(theirs.graph, what))
        if sorted(x) != sorted(y):
            diffs.append(f"graph {what}s: {x} here, {y} there")
    x = sorted((t.name, t.data_type, list(t.dims)) for t in ours.graph.initializer)
    y = sorted((t.name, t.data_type, list(t.dims)) for t in theirs.graph.initializer)
    if x != y:
        diffs.append(f"initializers differ: {sorted(set(map(str, x)) ^ set(map(str, y)))}")
    return diffs


# ---- greedy generation with the KV cache kept in the EP's memory ----------------------------------------------


class Generator:
    """Greedy decoding through IOBinding. The KV cache lives in OrtValues of `memory_info` (an EP's memory;
    None: ORT's CPU memory): with `shared` (GenAI's past_present_share_buffer) one buffer of the context's
    length per cache, bound as past and present at once; otherwise the present of step t, allocated in that
    memory, is bound as the past of step t + 1. With `device` (a device name IOBinding knows, e.g. "webgpu",
    for an EP without OrtEpDevices) ORT allocates each present there and it is bound as the next past.
    Nothing of the cache goes through the host between steps; only the logits of the last position come
    back (argmax)."""

    def __init__(self, session: ort.InferenceSession, config: Config, memory_info=None, shared: bool = True,
                 device: str | None = None):
        self.session, self.config, self.memory_info, self.device = session, config, memory_info, device
        self.shared = shared and device is None
        self.names = [f"{i}.{kv}" for kv in ("key", "value") for i in range(config.layers)]
        self.logits: list[np.ndarray] = []  # the last position's logits of each step of the last generate()

    def _value(self, shape: list[int]) -> ort.OrtValue:
        if self.memory_info is None:
            return ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, self.config.dtype))
        value = ort.OrtValue.ortvalue_from_shape_and_type(shape, self.config.dtype, memory_info=self.memory_info)
        if self.shared:
            value.update_inplace(np.zeros(shape, self.config.dtype))  # rows past the valid ones: zeros, as GenAI's
        return value

    def generate(self, prompt: np.ndarray, steps: int, on_step=None) -> np.ndarray:
        """Tokens [batch, steps] following `prompt` [batch, length] (int64); `on_step(step, tokens)` is called
        after each run (step 0: the prefill), e.g. to time it."""
        c, batch, length = self.config, prompt.shape[0], prompt.shape[1]
        if length + steps > c.context:
            raise ValueError(f"{length} + {steps} tokens past the context of {c.context}")
        hd = c.head_size
        rows = c.context if self.shared else 0
        past = {n: self._value([batch, c.kv_heads, rows, hd]) for n in self.names}
        binding = self.session.io_binding()
        ids, out = prompt.astype(np.int64), []
        self.logits = []
        for step in range(steps):
            total = length + step
            binding.clear_binding_inputs()
            binding.clear_binding_outputs()
            binding.bind_cpu_input("input_ids", ids)
            binding.bind_cpu_input("attention_mask", np.ones((batch, total), np.int64))
            binding.bind_output("logits", "cpu")
            present = past if self.shared or self.device else {
                n: self._value([batch, c.kv_heads, total, hd]) for n in self.names}
            for n in self.names:
                binding.bind_ortvalue_input(f"past_key_values.{n}", past[n])
                if self.device:
                    binding.bind_output(f"present.{n}", self.device)
                else:
                    binding.bind_ortvalue_output(f"present.{n}", present[n])
            self.session.run_with_iobinding(binding)
            outputs = binding.get_outputs()
            if self.device:  # (outputs in binding order: logits, then the presents)
                present = dict(zip(self.names, outputs[1:], strict=True))
            logits = outputs[0].numpy()[:, -1]
            self.logits.append(logits)
            ids = logits.argmax(-1)[:, None].astype(np.int64)
            out.append(ids)
            past = present
            if on_step is not None:
                on_step(step, ids)
        return np.concatenate(out, axis=1)


def prompt_tokens(config: Config, batch: int = 1, length: int = 16, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, config.vocab, (batch, length)).astype(np.int64)


def vkep_memory_info(ep_devices):
    """The memory vkep's tensors live in: HOST_ACCESSIBLE on a unified-memory device, DEFAULT otherwise."""
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    kind = "HOST_ACCESSIBLE" if shares_host_memory(physical_devices()[0]) else "DEFAULT"
    return ep_devices[0].memory_info(getattr(ort.OrtDeviceMemoryType, kind))


def config_from_args(args: argparse.Namespace) -> Config:
    return Config(vocab=args.vocab, hidden=args.hidden, intermediate=args.intermediate, layers=args.layers,
                  heads=args.heads, kv_heads=args.kv_heads, context=args.context, packed_qkv=not args.separate_qkv,
                  float16=args.float16)


def add_config_args(parser: argparse.ArgumentParser) -> None:
    d = Config()
    for name in ("vocab", "hidden", "intermediate", "layers", "heads", "kv_heads", "context"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    parser.add_argument("--separate-qkv", action="store_true", help="q/k/v as three MatMulNBits")
    parser.add_argument("--float16", action="store_true", help="float16 activations (the builder's -e webgpu)")


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import vkep
    from vkep import runner

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--compare", help="a model.onnx the builder exported for the same config")
    parser.add_argument("--genai-folder", help="write model.onnx + genai_config.json there, and stop")
    args = parser.parse_args()
    config = config_from_args(args)
    if args.genai_folder:
        print(write_genai_folder(config, Path(args.genai_folder)))
        return 0
    model = build(config)
    if args.compare:
        diffs = compare(model, onnx.load(args.compare, load_external_data=False))
        print("\n".join(diffs) or "same graph structure as the builder's export")
        return 1 if diffs else 0
    prompt = prompt_tokens(config, length=args.prompt)
    devices = vkep.register()
    got = Generator(runner.vkep_session(model, disable_cpu_fallback=True), config,
                    vkep_memory_info(devices)).generate(prompt, args.steps)
    want = Generator(runner.cpu_session(model), config).generate(prompt, args.steps)
    print("vkep:", got.tolist())
    print("cpu: ", want.tolist())
    return 0 if np.array_equal(got, want) else 1


if __name__ == "__main__":
    sys.exit(main())
