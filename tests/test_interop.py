"""External memory shared between processes by opaque fd, imported into vkep (the gpu layer of interop)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap

import pytest

from vkep.gpu import device as gpu_device
from vkep.gpu import interop
from vkep.gpu.stream import pack_spans

PRODUCER = textwrap.dedent("""
    import socket, sys
    import numpy as np
    from vkep.gpu import device, transfer
    from vkep.gpu.interop import ExportableMemory
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
    assert interop.can_import_memory(info, "opaque_fd") == bool(
        interop.lib.vkep_external_memory_features(info.handle, interop.MEMORY_HANDLE_TYPES["opaque_fd"])
        & interop.lib.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT)
    assert not interop.can_import_memory(info, "d3d12_resource")
    assert not interop.can_import_memory(info, "no_such_type")


def test_memory_from_another_process_is_read_and_written_in_place(dev, tmp_path):
    if not interop.can_import_memory(dev.info, "opaque_fd"):
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
        imported = interop.ImportedMemory(dev, "opaque_fd", fds[0], 4096)
        # y = x + x, with x the producer's bytes 0..1023 and y its bytes 1024..2047: no copy either way
        x, y, n = imported.address, imported.address + 1024, 256
        pipeline = dev.pipelines.get("binary.comp", {"DTYPE": 0}, (0,))
        push = struct.pack("<3Q2I18I", x, x, y, n, 1, n, *[0] * 5, 1, *[0] * 5, 1, *[0] * 5)
        stream = dev.default_stream()
        stream.dispatch(pipeline, push, (1, 1, 1), pack_spans([(x, x + 4 * n)], [(y, y + 4 * n)]), 1, 1)
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
    if not interop.can_import_memory(dev.info, "opaque_fd"):
        pytest.skip(f"{dev.info.name} cannot import opaque-fd memory")
    with pytest.raises(interop.InteropError, match="not an open file descriptor"):
        interop.ImportedMemory(dev, "opaque_fd", 987654, 4096)
    shared = interop.ExportableMemory(dev, 4096)
    fd = shared.export_fd()
    try:
        with pytest.raises(interop.InteropError, match="outside an allocation"):
            interop.ImportedMemory(dev, "opaque_fd", fd, 4096, offset=4096)
        with pytest.raises(interop.InteropError, match="cannot import d3d12_heap"):
            interop.ImportedMemory(dev, "d3d12_heap", 1234, 4096)
        imported = interop.ImportedMemory(dev, "opaque_fd", fd, 4096, offset=512)
        assert imported.address == imported.block.device_address + 512
        assert dev.memory.resolve(imported.address)[0] is imported.block
        imported.release()
        with pytest.raises(interop.InteropError, match="released twice"):
            imported.release()
        with pytest.raises(ValueError, match="not vkep memory"):
            dev.memory.resolve(imported.address)
    finally:
        shared.release()


def test_external_timeline_semaphores_where_supported(dev):
    supported = [k for k in interop.SEMAPHORE_HANDLE_TYPES if interop.can_import_semaphore(dev.info, k)]
    if not supported:
        pytest.skip(f"{dev.info.name} ({dev.info.driver_name}) exports and imports no timeline semaphores")
    assert "opaque_fd" in supported or os.name == "nt"
