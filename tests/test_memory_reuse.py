"""ORT reusing memory hard: seeded random graphs of small nodes against ORT's CPU EP, at ORT's default
optimizations and with every optimization off (ORT then folds nothing, so every node runs), memory
reuse on.

Each graph mixes what makes hazards (docs/design.md, "Host access and reused memory"): device nodes in
chains and diamonds, values produced on the device and read by the host (a Reshape or Slice whose shape
or starts come out of a device Add; an If whose condition a device comparison computes), If branches
reading outer values, in-place candidates (Identity, Reshape, Squeeze/Unsqueeze), and nodes left on the
CPU EP. Every run feeds new values, so a result one run late or a buffer read before it was written
shows up as a difference. The same graphs run once more with `VKEP_DEBUG_HAZARDS=1`, where any host
access to memory with pending GPU work fails the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import vkep
from vkep import models, runner

SEEDS = list(range(12))
LEVELS = {"default": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
          "disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
ROWS, COLS = 4, 8


class GraphBuilder:
    """A random graph over float32 [ROWS, COLS] values, one node kind at a time."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.values = ["x"]
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, array: np.ndarray) -> str:
        name = self.name("c")
        self.inits.append(onnx.numpy_helper.from_array(array, name))
        return name

    def pick(self) -> str:
        # recent values more often: long chains, and diamonds back to older ones
        k = len(self.values)
        return self.values[max(0, k - 1 - int(self.rng.geometric(0.4)) + 1)]

    def add(self, op: str, inputs: list[str], graph: list | None = None, **attrs) -> str:
        out = self.name("v")
        (self.nodes if graph is None else graph).append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def step(self) -> None:
        kind = self.rng.choice(["unary", "binary", "binary", "matmul", "transpose", "gpu_shape", "gpu_slice",
                                "if", "inplace", "cpu_ep", "shape_of"])
        a = self.pick()
        if kind == "unary":
            out = self.add(str(self.rng.choice(["Relu", "Neg", "Sigmoid", "Abs", "Tanh"])), [a])
        elif kind == "binary":
            out = self.add(str(self.rng.choice(["Add", "Mul", "Sub", "Max"])), [a, self.pick()])
        elif kind == "matmul":
            w = self.const(self.rng.standard_normal((COLS, COLS)).astype(np.float32) * 0.3)
            out = self.add("MatMul", [a, w])
        elif kind == "transpose":
            out = self.add("Transpose", [self.add("Transpose", [a], perm=[1, 0])], perm=[1, 0])
        elif kind == "gpu_shape":
            # the target shape is computed by a device Add, then read by Reshape on the host
            flat = self.add("Add", [self.const(np.array([ROWS * COLS - 1], np.int64)),
                                    self.const(np.array([1], np.int64))])
            shape = self.add("Add", [self.const(np.array([ROWS - 1, COLS - 1], np.int64)),
                                     self.const(np.array([1, 1], np.int64))])
            out = self.add("Reshape", [self.add("Reshape", [a, flat]), shape])
        elif kind == "gpu_slice":
            # starts and ends computed on the device, read on the host by Slice; then padded back
            starts = self.add("Sub", [self.const(np.array([1], np.int64)), self.const(np.array([1], np.int64))])
            ends = self.add("Add", [starts, self.const(np.array([COLS // 2], np.int64))])
            half = self.add("Slice", [a, starts, ends, self.const(np.array([1], np.int64))])
            out = self.add("Concat", [half, self.add("Neg", [half])], axis=1)
        elif kind == "if":
            # a condition computed on the device; branches read outer values (implicit inputs)
            b = self.pick()
            total = self.add("ReduceSum", [a], keepdims=0)
            cond = self.add("Greater", [total, self.const(np.array(0.0, np.float32))])
            then_nodes: list = []
            else_nodes: list = []
            t = self.add("Add", [a, b], graph=then_nodes)
            if self.rng.random() < 0.5:  # the branch output made by a CPU-EP node (tied to the If: ties.py)
                t = self.add(models.UNSUPPORTED_OP, [t], graph=then_nodes, domain=models.UNSUPPORTED_DOMAIN)
            e = self.add("Mul", [self.add("Neg", [a], graph=else_nodes), b], graph=else_nodes)
            vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["rows", COLS]) for n in (t, e)]
            out = self.name("v")
            self.nodes.append(helper.make_node(
                "If", [cond], [out],
                then_branch=helper.make_graph(then_nodes, self.name("then"), [], [vi[0]]),
                else_branch=helper.make_graph(else_nodes, self.name("else"), [], [vi[1]])))
        elif kind == "inplace":
            axes = self.const(np.array([0], np.int64))
            out = self.add("Identity", [self.add("Squeeze", [self.add("Unsqueeze", [a, axes]), axes])])
            out = self.add("Relu", [out])
        elif kind == "cpu_ep":
            out = self.add(models.UNSUPPORTED_OP, [a], domain=models.UNSUPPORTED_DOMAIN)  # stays on the CPU EP
        else:  # a shape read on the host, used to build a value of the same size on the device
            zeros = self.add("ConstantOfShape", [self.add("Shape", [a])],
                             value=helper.make_tensor("z", TensorProto.FLOAT, [1], [0.5]))
            out = self.add("Add", [zeros, a])
        self.values.append(out)

    def model(self, steps: int) -> bytes:
        for _ in range(steps):
            self.step()
        # the last value plus one earlier value as outputs, both read after the run
        outputs = [self.values[-1], self.values[len(self.values) // 2]]
        graph = helper.make_graph(
            # rows known only at run time: ORT then plans values (and If outputs) of run-time shape
            self.nodes, "reuse", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", COLS])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["rows", COLS]) for o in dict.fromkeys(outputs)],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid(models.UNSUPPORTED_DOMAIN, 1)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model.SerializeToString()


def _session(model: bytes, level, devices=None):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if devices is None:
        return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])
    so.add_provider_for_devices(devices, {"allow_cpu_device": "1"})
    return ort.InferenceSession(model, sess_options=so, enable_fallback=0)


def check_seed(seed: int, level_name: str, devices) -> dict:
    """Run one seeded graph on vkep and on the CPU EP, 3 runs with new feeds; the largest difference."""
    model = GraphBuilder(seed).model(steps=18)
    level = LEVELS[level_name]
    ours, ref = _session(model, level, devices), _session(model, level)
    rng = np.random.default_rng(1000 + seed)
    worst = 0.0
    for _ in range(3):
        x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        for got, want in zip(ours.run(None, {"x": x}), ref.run(None, {"x": x}), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"seed {seed}, optimization level {level_name}")
            worst = max(worst, float(np.max(np.abs(got - want), initial=0.0)))
    placed = [n for sub in ours.get_provider_graph_assignment_info() for n in sub.get_nodes()]
    on_vkep = sum(1 for sub in ours.get_provider_graph_assignment_info()
                  if sub.ep_name == "VulkanExecutionProvider" for _ in sub.get_nodes())
    return {"max_abs": worst, "nodes": len(placed), "on_vkep": on_vkep}


@pytest.mark.parametrize("level_name", list(LEVELS))
@pytest.mark.parametrize("seed", SEEDS)
def test_random_graph_matches_cpu_ep(ep_devices, seed, level_name):
    result = check_seed(seed, level_name, ep_devices)
    assert result["on_vkep"] >= result["nodes"] // 2, result  # the graph really ran on vkep


def test_hazard_debug_mode_finds_no_conflict():
    """The same graphs with VKEP_DEBUG_HAZARDS=1: every host access is checked against pending work."""
    code = ("import json, sys, vkep, tests.test_memory_reuse as t\n"
            "devices = vkep.register()\n"
            "print(json.dumps([t.check_seed(s, lv, devices) for s in t.SEEDS[:6] for lv in t.LEVELS]))\n")
    env = dict(os.environ, VKEP_DEBUG_HAZARDS="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 12 and all(r["on_vkep"] for r in results)


def test_hazard_debug_mode_flags_a_pending_write(ep_devices):
    """The checker itself: a host read of memory that a recorded, unfinished dispatch writes fails; after
    the stream finishes, it passes."""
    code = ("import numpy as np, vkep\n"
            "from vkep.gpu import hazards\n"
            "from vkep.gpu.device import open_device\n"
            "gpu = open_device(0)\n"
            "stream = gpu.default_stream()\n"
            "buf = gpu.memory.device_pool.alloc(256)\n"
            "addr = gpu.memory.device_address(buf)\n"
            "stream.copy(addr, addr + 128, 64)\n"
            "try:\n"
            "    hazards.check_host_access(gpu, addr + 128, 64, False, 'test read')\n"
            "    print('NOT FLAGGED')\n"
            "except hazards.HazardError as e:\n"
            "    print('FLAGGED', e)\n"
            "hazards.check_host_access(gpu, addr, 64, False, 'read of the copy source')\n"
            "try:\n"
            "    hazards.check_host_access(gpu, addr, 64, True, 'write of the copy source')\n"
            "    print('NOT FLAGGED')\n"
            "except hazards.HazardError as e:\n"
            "    print('FLAGGED', e)\n"
            "stream.finish()\n"
            "hazards.check_host_access(gpu, addr + 128, 64, True, 'after finish')\n"
            "print('CLEAN')\n")
    env = dict(os.environ, VKEP_DEBUG_HAZARDS="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["FLAGGED", "FLAGGED", "CLEAN"], done.stdout
    assert "host read of 64 bytes" in lines[0] and "host write" in lines[1]


def test_vkep_is_registered():
    assert vkep.register()


def test_if_branch_output_made_by_the_cpu_ep(ep_devices, monkeypatch):
    """onnx's test_affine_grid_2d_expanded with the last Concat of its 2-D branch left to the CPU EP (as vkep
    declines nodes it cannot run): the If's output, theta_3d, of run-time shape, came back as zeros on the
    unified path (ORT leaves it as its memory was when the If and the node that makes it run on different EPs
    there). vkep now runs such an If on the same EP as that node (tests/test_control_flow.py has the small
    cases, both ways round)."""
    from onnx.backend.test.case.node import collect_testcases

    from vkep.ort import ep as ep_module

    refused = ep_module._refused

    def refuse_the_branch_output(node, ep):
        lib, ffi = ep_module.api.lib, ep_module.api.ffi
        op, name, count = ffi.new("const char**"), ffi.new("const char**"), ffi.new("size_t*")
        lib.ort_Node_GetOperatorType(node, op)
        if ffi.string(op[0]) == b"Concat":
            outputs = ffi.new("const OrtValueInfo*[]", 1)
            lib.ort_Node_GetNumOutputs(node, count)
            lib.ort_Node_GetOutputs(node, outputs, 1)
            lib.ort_GetValueInfoName(outputs[0], name)
            if ffi.string(name[0]).endswith(b"theta_then"):
                return "left to the CPU EP by this test"
        return refused(node, ep)

    monkeypatch.setattr(ep_module, "_refused", refuse_the_branch_output)
    case = next(c for c in collect_testcases() if c.name == "test_affine_grid_2d_expanded")
    session = runner.vkep_session(case.model)
    placed = {(op, ep) for _, op, ep in runner.placement(session)}
    assert ("Concat", "CPUExecutionProvider") in placed
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    assert (("If", "CPUExecutionProvider") in placed) == shares_host_memory(physical_devices()[0]), placed
    inputs, outputs = case.data_sets[0]
    feeds = {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs, strict=True)}
    np.testing.assert_allclose(session.run(None, feeds)[0], np.asarray(outputs[0]), rtol=1e-3, atol=1e-6)


def test_a_cast_pair_that_ort_removes_still_finishes_the_producer(ep_devices):
    """vkep's Softmax, then its float16 Cast, then LpNormalization, which no EP runs in float16: ORT puts
    float32 Casts around it on the CPU EP after partitioning, and then removes vkep's Cast with the inserted
    one (they undo each other), so the CPU EP reads the Softmax output that, at GetCapability, only vkep's
    Cast read. The Softmax must finish its work before returning (ep._host_reads); without that the CPU read
    the previous run's values or none (every run feeds new values)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),  # (a host-fed first node finishes; this one must not)
             helper.make_node("Softmax", ["r"], ["s"], axis=-1),
             helper.make_node("Cast", ["s"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("LpNormalization", ["h"], ["y"], axis=-1, p=2)]
    graph = helper.make_graph(nodes, "cast_pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [16, 256])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    session, cpu = runner.vkep_session(model), runner.cpu_session(model)
    placed = {op: ep for _, op, ep in runner.placement(session)}
    assert placed["Softmax"] == "VulkanExecutionProvider" and placed["LpNormalization"] == "CPUExecutionProvider"
    rng = np.random.default_rng(0)
    for _ in range(4):
        feeds = {"x": rng.standard_normal((16, 256)).astype(np.float32) * 4}
        np.testing.assert_allclose(session.run(None, feeds)[0].astype(np.float32),
                                   cpu.run(None, feeds)[0].astype(np.float32), rtol=2e-3, atol=2e-3)
