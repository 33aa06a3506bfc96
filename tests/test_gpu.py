"""The gpu layer on its own: memory, hazards, pipelines, validation reporting."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from vkep.gpu import device as gpu_device
from vkep.gpu.memory import _give, _take
from vkep.gpu.stream import pack_spans
from vkep.gpu.vk import ffi, lib
from vkep.kernels.elementwise import WORKGROUP


@pytest.fixture(scope="module")
def dev():
    return gpu_device.open_device(next(d.index for d in gpu_device.physical_devices() if d.usable))


def test_sub_allocation_coalesces():
    class FakeBlock:
        free = [[0, 1024]]
        used = 0

    block = FakeBlock()
    a, b, c = (_take(block, 256) for _ in range(3))
    assert (a, b, c) == (0, 256, 512)
    _give(block, b, 256)
    _give(block, a, 256)
    _give(block, c, 256)
    assert block.free == [[0, 1024]] and block.used == 0


def test_addresses_resolve_both_ways(dev):
    pool = dev.memory.device_pool
    addr = pool.alloc(1000)
    try:
        block, offset = dev.memory.resolve(addr + 10)
        assert block.device_address + offset == dev.memory.device_address(addr) + 10
        if block.host_address:
            assert dev.memory.resolve(block.host_address + offset)[0] is block
        with pytest.raises(ValueError, match="not vkep memory"):
            dev.memory.resolve(8)
    finally:
        pool.free(addr)


def _host_view(dev, addr, n):
    return np.frombuffer(ffi.buffer(ffi.cast("void*", dev.memory.host_pointer(addr)), 4 * n), dtype=np.float32)


def _add(dev, stream, a, b, y, n):
    pipeline = dev.pipelines.get("binary.comp", {"DTYPE": 0}, {"op": 0})
    push = dev.pipelines.push_layout(pipeline).pack({"a": a, "b": b, "y": y, "n": n, "rank": 1, "shape": [n],
                                                     "stride_a": [1], "stride_b": [1], "scale": 1.0,
                                                     "inner_divisor": [0, 0]})  # (one dimension: no division)
    stream.dispatch(pipeline, push, ((n + WORKGROUP - 1) // WORKGROUP, 1, 1),
                    pack_spans([(a, a + 4 * n), (b, b + 4 * n)], [(y, y + 4 * n)]), 2, 1)


def test_barriers_only_on_real_hazards(dev):
    if not dev.memory.unified:  # (VKEP_FORCE_DISCRETE=1 maps no device memory)
        pytest.skip("host views of device memory need unified memory")
    n = 64
    pool = dev.memory.device_pool
    bufs = [pool.alloc(4 * n) for _ in range(6)]
    for i, b in enumerate(bufs):
        _host_view(dev, b, n)[:] = i
    stream = dev.new_stream()
    try:
        start = stream.rec.barriers
        _add(dev, stream, bufs[0], bufs[1], bufs[2], n)  # independent of ...
        _add(dev, stream, bufs[0], bufs[1], bufs[3], n)  # ... this one: no barrier between them
        independent = stream.rec.barriers - start
        _add(dev, stream, bufs[2], bufs[3], bufs[4], n)  # reads both results: one barrier
        _add(dev, stream, bufs[4], bufs[4], bufs[2], n)  # RAW on 4 and WAR on 2
        recorded = stream.rec.barriers - start
        stream.finish()  # (opens the next command buffer, which begins with its own barrier)
        assert independent == 1  # the one at the start of the command buffer
        assert recorded == 3
        np.testing.assert_array_equal(_host_view(dev, bufs[2], n), 4.0)
    finally:
        stream.destroy()
        for b in bufs:
            pool.free(b)


def test_host_memory_is_read_and_written_in_place(dev):
    """Host arrays vkep does not own, at addresses off the import alignment, used by a shader in place:
    the result appears in the host's own array, and nothing is copied."""
    from vkep.gpu.external import InPlace

    if not dev.host_import_alignment:
        pytest.skip("the device cannot import host memory")
    n = 300
    backing = np.zeros(3 * n + 7, dtype=np.float32)  # three arrays sharing pages, none page-aligned
    a, b, y = backing[1:n + 1], backing[n + 3:2 * n + 3], backing[2 * n + 5:3 * n + 5]
    a[:] = np.arange(n)
    b[:] = 0.5
    stream = dev.new_stream()
    host = InPlace(dev)
    copies = dev.transfer_stats.staging_copies + dev.transfer_stats.uploads
    elided = dev.transfer_stats.elided_copies
    try:
        addrs = [host.address(arr.ctypes.data, arr.nbytes) for arr in (a, b, y)]
        assert host.imports and dev.transfer_stats.elided_copies == elided + 3
        _add(dev, stream, *addrs, n)
    finally:
        host.done(stream)
        stream.destroy()
    np.testing.assert_array_equal(y, np.arange(n) + 0.5)
    assert backing[2 * n + 4] == 0 and backing[-1] == 0  # nothing around the arrays was written
    assert dev.transfer_stats.staging_copies + dev.transfer_stats.uploads == copies
    assert not host.imports


def test_pipelines_are_built_once_and_cached_on_disk(dev):
    first = dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"op": 0})
    assert dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"OP": 0}) is first  # (the shader's name, case aside)
    assert dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"op": 0}) is first
    assert dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"op": 1}) is not first
    dev.pipelines.save()
    assert dev.pipelines._file.exists() and dev.pipelines._file.stat().st_size > 0


def test_pipelines_build_in_parallel_and_each_once(dev):
    """Threads asking for pipelines at once (a session's warm-up) build different ones in parallel and the
    same one once: every caller of a key gets the same VkPipeline."""
    from concurrent.futures import ThreadPoolExecutor

    keys = [("unary.comp", {"DTYPE": 0}, {"op": op}) for op in (9001, 9002, 9003)] * 4  # codes no test uses
    before = dev.pipelines.built
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda k: dev.pipelines.get(*k), keys))
    for i, key in enumerate(keys):
        assert got[i] == got[keys.index(key)]
    assert len({int(ffi.cast("uintptr_t", p)) for p in got}) == 3
    assert dev.pipelines.built - before == 3


def test_a_damaged_or_foreign_pipeline_cache_is_not_given_to_the_driver(dev):
    """The cache file's header must be this device's: anything else (truncated, another GPU or driver) is
    ignored, the pipelines still build, and the next save rewrites the file."""
    from vkep.gpu.pipeline import PipelineCache, cache_data_fits

    info = dev.info
    dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"op": 0})
    dev.pipelines._dirty = True
    dev.pipelines.save()
    good = dev.pipelines._file.read_bytes()
    assert cache_data_fits(good, info.vendor_id, info.device_id, info.pipeline_cache_uuid)
    foreign = good[:8] + struct.pack("<I", info.vendor_id ^ 1) + good[12:]
    for bad in (good[:20], foreign, b"\xff" * 64):
        assert not cache_data_fits(bad, info.vendor_id, info.device_id, info.pipeline_cache_uuid)
        dev.pipelines._file.write_bytes(bad)
        fresh = PipelineCache(dev)
        try:
            assert fresh.get("unary.comp", {"DTYPE": 0}, {"op": 0})
            fresh.save()
            assert cache_data_fits(fresh._file.read_bytes(), info.vendor_id, info.device_id, info.pipeline_cache_uuid)
        finally:
            fresh.destroy()


def test_validation_layer_reports_misuse(dev):
    """The check every test relies on can fail: a real misuse is reported."""
    if not dev.instance.validation:
        pytest.skip("validation layer off")
    gpu_device.validation_messages()
    bad = ffi.new("VkBufferCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": 0,
                                          "usage": lib.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
    out = ffi.new("VkBuffer*")
    result = lib.vkCreateBuffer(dev.handle, bad, ffi.NULL, out)
    if result == 0:
        lib.vkDestroyBuffer(dev.handle, out[0], ffi.NULL)
    count, text = gpu_device.validation_messages()
    assert count >= 1 and "VUID-VkBufferCreateInfo-size" in text


def test_push_constants_must_fill_the_shaders_block(dev):
    """Every dispatch records exactly the bytes its shader's push-constant block spans, read from the SPIR-V
    (less the group base the recorder pushes): a kernel's packing and its shader cannot drift apart unseen."""
    from vkep.gpu.push import push_block
    from vkep.gpu.shaders import compile_shader

    members = push_block(compile_shader("unary.comp", {"DTYPE": 0})[1])
    assert members[0] == ("x", 0, "Q", 1) and members[-1] == ("vkep_group_base", 116, "I", 3)
    pipeline = dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"op": 0})
    want = dev.pipelines.push_bytes(pipeline)
    assert want == max(m.offset + m.size for m in members[:-1])
    stream = dev.default_stream()
    with pytest.raises(ValueError, match=f"{want - 4} bytes of push constants for a shader whose push-constant "
                                         f"block asks for {want}"):
        stream.dispatch(pipeline, bytes(want - 4), (1, 1, 1), b"", 0, 0)
    # a shader without the group base: its whole block
    conv = push_block(compile_shader("conv_integer.comp", {"DTYPE": 4})[1])
    assert "vkep_group_base" not in [m.name for m in conv]
    assert dev.pipelines.push_bytes(dev.pipelines.get("conv_integer.comp", {"DTYPE": 4}, {"requant": 0})) == max(
        m.offset + m.size for m in conv)


def test_subgroup_pipelines_run_at_the_size_kernels_plan_with(dev):
    """A shader that uses subgroup operations is pinned to the device's subgroup size (the one kernels plan lanes
    and grids with; a GPU may otherwise pick another per pipeline), with full subgroups where its workgroup's width
    is a multiple of it; one without subgroup operations is left to the driver. The validation layer checks the
    create info (lavapipe: subgroupSizeControl and computeFullSubgroups, 8 lanes)."""
    if not dev.info.features.get("subgroupSizeControl"):
        pytest.skip("the device lets no pipeline require a subgroup size")
    size = dev.info.subgroup_size
    broadcast = dev.pipelines.get("matmul.comp", {"DTYPE": 0}, {"mode": 3, "local_size_x": 8, "local_size_y": 1})
    assert dev.pipelines.required_subgroup_size(broadcast) == (size, dev.info.features["computeFullSubgroups"])
    narrow = dev.pipelines.get("matmul.comp", {"DTYPE": 0}, {"mode": 3, "local_size_x": size + 1, "local_size_y": 1})
    assert dev.pipelines.required_subgroup_size(narrow) == (size, False)  # (not a multiple: partial subgroups)
    assert dev.pipelines.required_subgroup_size(dev.pipelines.get("unary.comp", {"DTYPE": 0}, {"op": 0})) is None
