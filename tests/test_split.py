"""Dispatches past the device's workgroup-count limit are recorded in pieces (gpu/native/recorder.c, common.glsl
GROUP_BASE). VKEP_MAX_WORKGROUP_COUNT lowers the limit to 7 in a child process, so ordinary shapes take the split
path through every converted kernel, on the Python path and in native replay, cheaply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

F, I64 = TensorProto.FLOAT, TensorProto.INT64
MS = "com.microsoft"


def _many_ops() -> bytes:
    """One node each of kernels whose shaders read the group base, all fed by a first node's device output
    (so that later runs replay natively), with grids of 8 or more workgroups in x or y."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Neg", ["x"], ["xn"]),
        helper.make_node("Add", ["xn", "xn"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Softmax", ["r"], ["softmax"], axis=-1),
        helper.make_node("ReduceMax", ["xn"], ["reduce"], keepdims=1, axes=[3]),
        helper.make_node("MaxPool", ["xn"], ["pool"], kernel_shape=[2, 2]),
        helper.make_node("Gather", ["xn", "idx"], ["gather"], axis=3),
        helper.make_node("LayerNormalization", ["xn", "scale"], ["norm"], axis=-1),
        helper.make_node("CumSum", ["xn", "axis"], ["cumsum"]),
        helper.make_node("ArgMax", ["xn"], ["argmax"], axis=3),
        helper.make_node("Resize", ["xn", "", "scales"], ["resize"], mode="linear"),
        helper.make_node("ConvTranspose", ["xn", "ct_w"], ["convtranspose"], strides=[1, 2]),
        helper.make_node("Reshape", ["xn", "rows"], ["xr"]),
        # 8-row groups of the LANES mode: 96 rows are 12 groups in y
        helper.make_node("MatMulNBits", ["xr", "b", "bscales"], ["nbits"], domain=MS, K=50, N=32, bits=4,
                         block_size=16),
        # matmul.comp: the broadcast mode (5 column groups), the few-rows mode (4 rows: 5 column groups), and as
        # Einsum (6 batches in z)
        helper.make_node("MatMul", ["xr", "mw"], ["matmul"]),
        helper.make_node("Slice", ["xr", "zero", "four", "zero"], ["x4"]),
        helper.make_node("MatMul", ["x4", "mw_wide"], ["matmul_few_rows"]),
        helper.make_node("Einsum", ["xn", "xn"], ["einsum"], equation="bhqd,bhkd->bhqk"),
        # conv.comp's MODE 3 (13 pixel groups) and direct mode (fewer than 8 outputs), a 1x1 conv as matmul.comp's
        # broadcast GEMM, and im2col.comp then that GEMM (128 outputs, stride 2)
        helper.make_node("Conv", ["xn", "cw"], ["conv"], pads=[1, 1, 1, 1], dilations=[1, 2]),
        helper.make_node("Conv", ["xn", "cw_few"], ["conv_direct"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["xn", "cw_1x1"], ["conv_1x1"]),
        helper.make_node("Conv", ["xn", "cw_many"], ["conv_im2col"], pads=[1, 1, 1, 1], strides=[2, 2]),
    ]
    outputs = ["softmax", "reduce", "pool", "gather", "norm", "cumsum", "argmax", "resize", "convtranspose", "nbits",
               "matmul", "matmul_few_rows", "einsum", "conv", "conv_direct", "conv_1x1", "conv_im2col"]
    inits = [numpy_helper.from_array(np.array([0, 3, 7, 49], np.int64), "idx"),
             numpy_helper.from_array(np.linspace(0.5, 2, 50).astype(np.float32), "scale"),
             numpy_helper.from_array(np.array(2, np.int64), "axis"),
             numpy_helper.from_array(np.array([1, 1, 1.5, 0.5], np.float32), "scales"),
             numpy_helper.from_array(np.array([-1, 50], np.int64), "rows"),
             numpy_helper.from_array(rng.standard_normal((3, 2, 1, 2)).astype(np.float32), "ct_w"),
             numpy_helper.from_array(rng.integers(0, 256, (32, 4, 8), dtype=np.uint8), "b"),
             numpy_helper.from_array(rng.uniform(0.01, 0.1, 32 * 4).astype(np.float32), "bscales"),
             numpy_helper.from_array(rng.standard_normal((50, 300)).astype(np.float32), "mw"),
             numpy_helper.from_array(rng.standard_normal((50, 1100)).astype(np.float32), "mw_wide"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([4], np.int64), "four"),
             numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "cw"),
             numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "cw_few"),
             numpy_helper.from_array(rng.standard_normal((16, 3, 1, 1)).astype(np.float32), "cw_1x1"),
             numpy_helper.from_array(rng.standard_normal((128, 3, 3, 3)).astype(np.float32), "cw_many")]
    graph = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", F, [2, 3, 16, 50])],
                              [helper.make_tensor_value_info(n, I64 if n == "argmax" else F, None) for n in outputs],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                             ir_version=8).SerializeToString()


def _child(code: str, limit: str = "7") -> dict:
    """Run `code` in a process with the lowered limit; it prints one JSON line last."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VKEP_MAX_WORKGROUP_COUNT": limit, "VKEP_VALIDATION": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])




def test_split_dispatches_match_the_cpu_ep(tmp_path):
    path = tmp_path / "many_ops.onnx"
    path.write_bytes(_many_ops())
    code = f"""
        import json
        import numpy as np, vkep
        from vkep import runner
        from vkep.gpu.device import validation_messages
        model = open({str(path)!r}, "rb").read()
        x = np.random.default_rng(0).standard_normal([2, 3, 16, 50]).astype(np.float32)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        want = runner.cpu_session(model).run(None, {{"x": x}})
        runs = []
        for _ in range(3):
            vkep.reset_stats()
            got = session.run(None, {{"x": x}})
            s = vkep.stats()
            runs.append({{"errors": [float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want)],
                         "pieces": s[0]["dispatch_pieces"], "native": s["process"]["nodes_replayed_natively"]}})
        print(json.dumps({{"eps": sorted({{ep for _, _, ep in runner.placement(session)}}), "runs": runs,
                          "validation": validation_messages()}}))
    """
    result = _child(code, limit="4")  # (4: the elementwise nodes' 4,800 elements take 5 WIDE workgroups)
    assert result["eps"] == ["VulkanExecutionProvider"]
    assert result["validation"][0] == 0, result["validation"][1]
    for run in result["runs"]:
        assert max(run["errors"]) < 1e-4, run["errors"]
        assert run["pieces"] > 100  # (every kernel's grid went in pieces)
    # Add and Relu (device inputs and outputs) replay their plans in C, through the same split
    assert result["runs"][-1]["native"] >= 2
    assert len({run["pieces"] for run in result["runs"]}) == 1


def test_a_shader_that_cannot_split_fails_cleanly():
    """strided_copy.comp does not read the group base (its 1-D grids never reach a real device's limit): past the
    (lowered) limit its dispatch is refused with an error, never recorded whole on a device that could not run
    it."""
    graph = helper.make_graph([helper.make_node("Transpose", ["a"], ["y"], perm=[0, 1, 3, 2])], "transpose",
                              [helper.make_tensor_value_info("a", F, [1, 3, 16, 50])],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    code = f"""
        import json
        import numpy as np
        from vkep import runner
        session = runner.vkep_session(bytes.fromhex("{model.hex()}"), disable_cpu_fallback=True)
        try:
            session.run(None, {{"a": np.ones([1, 3, 16, 50], np.float32)}})
            print(json.dumps("ran"))
        except Exception as exc:
            print(json.dumps(str(exc)))
    """
    message = _child(code)
    assert "cannot be split" in message, message



def test_conv_transpose_past_65535_batches(ep_devices):
    """At the device's own limit (65,535 on lavapipe): 65,537 batches of a 1x1 ConvTranspose are a grid of
    65,537 in z, recorded as two pieces (the kernel declined it before the split)."""
    batch = 65537
    w = numpy_helper.from_array(np.array([[[[0.5, -1.0]]]], np.float32), "w")
    graph = helper.make_graph([helper.make_node("ConvTranspose", ["x", "w"], ["y"])], "ct",
                              [helper.make_tensor_value_info("x", F, [batch, 1, 1, 1])],
                              [helper.make_tensor_value_info("y", F, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(3).standard_normal([batch, 1, 1, 1]).astype(np.float32)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0])


def test_splittable_shaders_read_ids_only_through_the_group_base():
    """A shader that declares GROUP_BASE is split past the limit: a built-in id or count left in it would
    be a piece's, not the grid's (common.glsl). Its SPIR-V carries the marker the pipeline cache looks for."""
    from vkep.gpu import pipeline, shaders

    splittable = [p for p in sorted(shaders.SHADER_DIR.glob("*.comp")) if "GROUP_BASE;" in p.read_text()]
    assert len(splittable) >= 26
    for path in splittable:
        text = path.read_text()
        for builtin in ("gl_WorkGroupID", "gl_GlobalInvocationID", "gl_NumWorkGroups", "flat_index("):
            assert builtin not in text, f"{path.name} reads {builtin}"
    assert pipeline.reads_group_base(shaders.compile_shader("unary.comp", {"DTYPE": 0})[1])
    assert not pipeline.reads_group_base(shaders.compile_shader("strided_copy.comp", {"DTYPE": 0})[1])


def test_matmul_past_65535_batches(ep_devices):
    """At the device's own limit (65,535 on lavapipe): 65,537 [1, 2] x [2, 3] products are a grid of 65,537 in z,
    recorded as two pieces (MatMul declined it before matmul.comp read the group base)."""
    batch = 65537
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                              [helper.make_tensor_value_info("a", F, [batch, 1, 2]),
                               helper.make_tensor_value_info("b", F, [batch, 2, 3])],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rng = np.random.default_rng(4)
    feeds = {"a": rng.standard_normal([batch, 1, 2]).astype(np.float32),
             "b": rng.standard_normal([batch, 2, 3]).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0],
                               rtol=1e-5, atol=1e-6)


def test_conv_past_65535_pixel_groups(ep_devices):
    """A 2050 x 2050 image: on CPU devices conv.comp's broadcast GEMM takes 64 pixels a workgroup, 65,666 in x,
    past lavapipe's own limit: recorded as two pieces (declined before conv.comp read the group base). Elsewhere
    the same conv takes conv.comp's other modes, which split the same way."""
    side = 2050
    w = numpy_helper.from_array(np.random.default_rng(5).standard_normal((8, 1, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                              [helper.make_tensor_value_info("x", F, [1, 1, side, side])],
                              [helper.make_tensor_value_info("y", F, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(6).standard_normal([1, 1, side, side]).astype(np.float32)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_allclose(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)
