"""External memory shared between processes by opaque fd, imported into vkep (the gpu layer of interop)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from vkep.gpu import device as gpu_device
from vkep.gpu import external
from vkep.gpu.stream import pack_spans
from vkep.kernels.base import grid_1d
from vkep.kernels.elementwise import WORKGROUP

PRODUCER = textwrap.dedent("""
    import socket, sys
    import numpy as np
    from vkep.gpu import device, transfer
    from vkep.gpu.external import ExportableMemory
    dev = device.open_device(0)
    shared = ExportableMemory(dev, 4096)
    data = np.arange(256, dtype=np.float32)
    transfer.upload(dev, data.ctypes.data, shared.address, data.nbytes)   # the input, written by the producer
    fd = shared.export_fd()
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(sys.argv[1])
    socket.send_fds(sock, [b"m"], [fd])
    assert sock.recv(1) == b"d"                                             # the consumer has written its output
    out = np.empty(256, np.float32)
    transfer.download(dev, shared.address + 1024, out.ctypes.data, out.nbytes)
    print("producer read back:", bool(np.array_equal(out, 2 * data)), out[:4].tolist())
    count, text = device.validation_messages()
    print("producer validation messages:", count, text)
""")


@pytest.fixture(scope="module")
def dev():
    return gpu_device.open_device(0)


def test_capabilities_follow_the_device(dev):
    info = dev.info
    # Linux: the fd types are the only candidates; whatever the device says is what vkep says
    assert external.can_import_memory(info, "opaque_fd") == bool(
        external.lib.vkep_external_memory_features(info.handle, external.MEMORY_HANDLE_TYPES["opaque_fd"])
        & external.lib.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT)
    assert not external.can_import_memory(info, "d3d12_resource")
    assert not external.can_import_memory(info, "no_such_type")


def test_memory_from_another_process_is_read_and_written_in_place(dev, tmp_path):
    if not external.can_import_memory(dev.info, "opaque_fd"):
        pytest.skip(f"{dev.info.name} cannot import opaque-fd memory")
    path = str(tmp_path / "share.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        server.settimeout(120)
        conn, _ = server.accept()
        _, fds, _, _ = socket.recv_fds(conn, 1, 1)
        imported = external.ImportedMemory(dev, "opaque_fd", fds[0], 4096)
        # y = x + x, with x the producer's bytes 0..1023 and y its bytes 1024..2047: no copy either way
        x, y, n = imported.address, imported.address + 1024, 256
        pipeline = dev.pipelines.get("binary.comp", {"DTYPE": 0}, {"op": 0})
        push = dev.pipelines.push_layout(pipeline).pack({"a": x, "b": x, "y": y, "n": n, "rank": 1, "shape": [n],
                                                         "stride_a": [1], "stride_b": [1], "scale": 1.0,
                                                         "inner_divisor": [0, 0]})  # (one dimension: no division)
        stream = dev.default_stream()
        stream.dispatch(pipeline, push, grid_1d(n, WORKGROUP), pack_spans([(x, x + 4 * n)], [(y, y + 4 * n)]), 1, 1)
        stream.finish()
        conn.sendall(b"d")
        out, err = producer.communicate(timeout=120)
        imported.release()
    finally:
        if producer.poll() is None:
            producer.kill()
        server.close()
    assert producer.returncode == 0, err
    assert "producer read back: True [0.0, 2.0, 4.0, 6.0]" in out, out
    assert "producer validation messages: 0" in out, out


def test_bad_imports_are_clear_errors(dev):
    if not external.can_import_memory(dev.info, "opaque_fd"):
        pytest.skip(f"{dev.info.name} cannot import opaque-fd memory")
    with pytest.raises(external.InteropError, match="not an open file descriptor"):
        external.ImportedMemory(dev, "opaque_fd", 987654, 4096)
    shared = external.ExportableMemory(dev, 4096)
    fd = shared.export_fd()
    try:
        with pytest.raises(external.InteropError, match="outside an allocation"):
            external.ImportedMemory(dev, "opaque_fd", fd, 4096, offset=4096)
        with pytest.raises(external.InteropError, match="cannot import d3d12_heap"):
            external.ImportedMemory(dev, "d3d12_heap", 1234, 4096)
        imported = external.ImportedMemory(dev, "opaque_fd", fd, 4096, offset=512)
        assert imported.address == imported.block.device_address + 512
        assert dev.memory.resolve(imported.address)[0] is imported.block
        imported.release()
        with pytest.raises(external.InteropError, match="released twice"):
            imported.release()
        with pytest.raises(ValueError, match="not vkep memory"):
            dev.memory.resolve(imported.address)
    finally:
        shared.release()


def test_external_timeline_semaphores_where_supported(dev):
    """A stream waits on the GPU for another API's semaphore and signals it when its work is done."""
    if not external.can_import_semaphore(dev.info, "opaque_fd"):
        pytest.skip(f"{dev.info.name} ({dev.info.driver_name}) exports and imports no timeline semaphores")
    producer = external.ExportableSemaphore(dev)
    imported = external.ImportedSemaphore(dev, "opaque_fd", producer.export_fd())
    try:
        pool = dev.memory.device_pool
        x, y, n = pool.alloc(1024), pool.alloc(1024), 256
        pipeline = dev.pipelines.get("binary.comp", {"DTYPE": 0}, {"op": 0})
        push = dev.pipelines.push_layout(pipeline).pack({"a": x, "b": x, "y": y, "n": n, "rank": 1, "shape": [n],
                                                         "stride_a": [1], "stride_b": [1], "scale": 1.0,
                                                         "inner_divisor": [0, 0]})  # (one dimension: no division)
        stream = dev.new_stream()
        stream.wait_external(imported.semaphore, 1)  # the work below starts once the producer says 1
        stream.dispatch(pipeline, push, grid_1d(n, WORKGROUP), pack_spans([(x, x + 1024)], [(y, y + 1024)]), 1, 1)
        stream.signal_external(imported.semaphore, 2)  # ... and then says 2 to the producer
        assert producer.value() == 0
        producer.signal(1)
        stream.finish()
        assert producer.value() == 2
        stream.destroy()
        pool.free(x)
        pool.free(y)
    finally:
        imported.release()
        producer.release()


CONSUMER = textwrap.dedent("""
    import socket, subprocess, sys, textwrap
    import numpy as np
    from onnx import helper
    import vkep
    from vkep import interop
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sys.argv[1])
    srv.listen(1)
    producer = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1]], stdout=subprocess.PIPE, text=True)
    conn, _ = srv.accept()
    _, fds, _, _ = socket.recv_fds(conn, 1, 1)
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", 1, [1, 256])],
                              [helper.make_tensor_value_info("y", 1, [1, 256])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    rt = interop.Runtime()
    importer = rt.importer()
    print("capabilities:", importer.can_import_memory("opaque_fd"), importer.can_import_memory("d3d12_resource"),
          importer.can_import_memory("vk_memory_win32"), importer.can_import_semaphore("opaque_fd"))
    memory = importer.import_memory("opaque_fd", fds[0], 4096)
    x = importer.tensor(memory, np.float32, [1, 256])
    y = importer.tensor(memory, np.float32, [1, 256], offset=1024)
    session = rt.session(model.SerializeToString(), {"session.disable_cpu_fallback": "1"})
    session.run({"x": x}, outputs={"y": y})  # warm-up: pipelines, plans
    vkep.reset_stats()
    session.run({"x": x}, outputs={"y": y})
    s = vkep.stats()[0]
    print("copies:", s["uploads"], s["downloads"], s["staging_copies"], s["device_copies"])
    conn.sendall(b"d")
    print(producer.communicate(timeout=120)[0].strip())
    for name, bad in [("invalid fd", lambda: importer.import_memory("opaque_fd", 987654, 4096)),
                      ("offset beyond", lambda: importer.import_memory("opaque_fd", 0, 4096, offset=8192)),
                      ("unsupported type", lambda: importer.import_memory("d3d12_heap", 1234, 4096)),
                      ("tensor beyond", lambda: importer.tensor(memory, np.float32, [1, 2000]))]:
        try:
            bad()
            print(name, "-> no error")
        except interop.InteropError as exc:
            print(name, "->", exc)
    del x, y
    memory.release()
    memory.release()  # the second release is reported on stderr, not a crash
    out = session.run({"x": np.ones((1, 256), np.float32)}, ["y"])["y"]
    print("session still usable:", bool(np.all(out == 2)))
""")


def test_ort_interop_api_imports_memory_with_no_copy(tmp_path):
    """Through ORT's own C interop API (vkep.interop), as a C application would do it."""
    if not external.can_import_memory(gpu_device.open_device(0).info, "opaque_fd"):
        pytest.skip("no opaque-fd memory import on this device")
    result = subprocess.run([sys.executable, "-c", CONSUMER, str(tmp_path / "s.sock"), PRODUCER],
                            capture_output=True, text=True, timeout=300, env={**os.environ})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "capabilities: True False False False" in out, out
    assert "copies: 0 0 0 0" in out, out
    assert "producer read back: True [0.0, 2.0, 4.0, 6.0]" in out, out
    assert "producer validation messages: 0" in out, out
    assert "invalid fd -> vkep: 987654 is not an open file descriptor" in out, out
    assert "offset beyond -> vkep: offset 8192 is outside an allocation of 4096 bytes" in out, out
    assert "unsupported type -> vkep: " in out and "cannot import d3d12_heap memory" in out, out
    assert "tensor beyond -> vkep: a 8000-byte tensor at offset 0 exceeds the 4096-byte allocation" in out, out
    assert "released twice" in result.stderr, result.stderr
    assert "session still usable: True" in out, out


@pytest.mark.parametrize("ort_type,kind", [(0, "d3d12_resource"), (1, "d3d12_heap"), (2, "opaque_win32"),
                                           (3, "opaque_fd")])
def test_memory_descriptor_translation(ep_devices, ort_type, kind):
    from vkep.ort import api, importer

    desc = api.ffi.new("OrtExternalMemoryDescriptor*", {"version": 24, "handle_type": ort_type,
                                                        "native_handle": api.ffi.cast("void*", 0x1234),
                                                        "size_bytes": 4096, "offset_bytes": 256})
    assert importer.translate_memory(desc) == (kind, 0x1234, 4096, 256)
    assert external.MEMORY_HANDLE_TYPES[kind]  # each maps to a Vulkan handle type bit


@pytest.mark.parametrize("ort_type,kind", [(0, "d3d12_fence"), (1, "opaque_win32"), (2, "opaque_fd")])
def test_semaphore_descriptor_translation(ep_devices, ort_type, kind):
    from vkep.ort import api, importer

    desc = api.ffi.new("OrtExternalSemaphoreDescriptor*", {"version": 24, "type": ort_type,
                                                           "native_handle": api.ffi.cast("void*", 77)})
    assert importer.translate_semaphore(desc) == (kind, 77)
    assert external.SEMAPHORE_HANDLE_TYPES[kind]
    with pytest.raises(api.OrtError, match="unknown external semaphore type"):
        importer.translate_semaphore(api.ffi.new("OrtExternalSemaphoreDescriptor*", {"type": 9}))
