"""Compute pipelines: built lazily, once per (SPIR-V, specialization constants), with an on-disk cache.

All pipelines share one layout: no descriptor sets, only push constants (tensors are passed as
64-bit buffer device addresses), so recording a dispatch never allocates or binds descriptors.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Mapping

from vkep import __version__
from vkep.gpu.push import (
    GROUP_BASE_NAME,
    GROUP_BASE_OFFSET,
    PUSH_CONSTANT_BYTES,
    PushLayout,
    PushMember,
    push_block,
)
from vkep.gpu.shaders import (
    compile_shader,
    describe,
    specialization_constants,
    uses_subgroups,
    workgroup_size,
)
from vkep.gpu.vk import check, ffi, lib, new
from vkep.resources import cache_dir


def reads_group_base(spirv: bytes) -> bool:
    """Whether the shader's push block declares common.glsl's GROUP_BASE (by its member name, at byte 116): it
    then reads its workgroup ids through it, so a grid past the device's limit can be recorded in pieces
    (recorder.c). SPIR-V stripped of names counts as not splittable, the safe side."""
    return _splits(push_block(spirv))


def _splits(members: list[PushMember]) -> bool:
    return any(m.name == GROUP_BASE_NAME and m.offset == GROUP_BASE_OFFSET for m in members)


def specialization_data(shader: str, defines: dict, spirv: bytes,
                        constants: Mapping[str, int | float]) -> tuple[list[int], bytes]:
    """(constant ids, their 32-bit values) for a pipeline's VkSpecializationInfo: each name matched to the
    shader's declaration (case aside), each value packed as its declared type; a name it lacks is an error."""
    declared = {name.upper(): c for name, c in specialization_constants(spirv).items()}
    entries = []  # (constant id, its value's bytes)
    for name, value in constants.items():
        found = declared.get(name.upper())
        if found is None:
            raise ValueError(f"{shader} ({describe(defines)}) declares no specialization constant {name} "
                             f"(it declares: {', '.join(sorted(declared)) or 'none'})")
        fmt = {"float": "<f", "int": "<i"}.get(found.type, "<I")
        try:
            entries.append((found.id, struct.pack(fmt, value)))
        except struct.error:
            raise ValueError(f"{shader}: specialization constant {name} = {value!r} does not fit its type "
                             f"({found.type})") from None
    # in constant_id order: the validation layer checks a cooperative matrix's sizes against the device's as if
    # the map entries were (seen on Mesa 26 lavapipe: matmul_coop.comp's TM, TN read as its RM, RN otherwise)
    entries.sort(key=lambda entry: entry[0])
    return [i for i, _ in entries], b"".join(value for _, value in entries)


def _constants_key(constants: Mapping | None) -> tuple:
    """Specialization constants as part of a pipeline's key: names case aside (`op` is the shader's OP)."""
    return tuple(sorted((name.upper(), value) for name, value in (constants or {}).items()))


def cache_data_fits(data: bytes, vendor_id: int, device_id: int, uuid: bytes) -> bool:
    """Whether pipeline cache data carries this device's header (VkPipelineCacheHeaderVersionOne: header size,
    version 1, vendor id, device id, pipeline cache UUID): drivers should reject a foreign or damaged one
    themselves, but not every driver does it gracefully."""
    if len(data) < 32:
        return False
    size, version, vendor, device = struct.unpack_from("<4I", data)
    return size >= 32 and size <= len(data) and version == 1 and (vendor, device) == (vendor_id, device_id) \
        and data[16:32] == uuid


class PipelineCache:
    def __init__(self, device):
        self.device = device
        self._lock = threading.Lock()
        self._pipelines: dict[tuple, object] = {}
        self._building: dict[tuple, threading.Lock] = {}  # pipelines being built, each held by its builder
        self._modules: dict[str, object] = {}
        # pipeline → (whether its shader reads the group base: splits; its push-constant block: push_layout),
        # read from its SPIR-V
        self._layouts: dict[int, tuple[bool, PushLayout]] = {}
        self._subgroups: dict[int, tuple[int, bool] | None] = {}  # pipeline -> its required subgroup size
        self._module_shader: dict[str, str] = {}  # SPIR-V key → the shader file it was compiled from
        self._keep = []
        self.built = 0  # pipelines created (vkep.stats: a cold start's progress)
        self.warmed = 0  # of those, compiled before a session's first run (vkep.ort.warmup)
        self._warming: dict[int, list[int]] = {}  # [done, total] of each session compiling its pipelines now
        self._warming_next = 0
        dev = device.handle
        rng = ffi.new("VkPushConstantRange*", {"stageFlags": lib.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0,
                                               "size": PUSH_CONSTANT_BYTES})
        info = new("VkPipelineLayoutCreateInfo", sType=lib.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                   pushConstantRangeCount=1, pPushConstantRanges=rng)
        out = ffi.new("VkPipelineLayout*")
        check(lib.vkCreatePipelineLayout(dev, info, ffi.NULL, out), "vkCreatePipelineLayout")
        self.layout = out[0]
        pi = device.info
        # one file per device, driver build and vkep version; its header is checked before the driver sees it
        self._file = cache_dir() / (f"pipelines-{pi.vendor_id:x}-{pi.device_id:x}-{pi.driver_version:x}-"
                                    f"{pi.pipeline_cache_uuid.hex()}-{__version__}.bin")
        initial = self._file.read_bytes() if self._file.exists() else b""
        if initial and not cache_data_fits(initial, pi.vendor_id, pi.device_id, pi.pipeline_cache_uuid):
            initial = b""  # truncated, or written by another device or driver: start empty (rewritten on save)
        data = ffi.from_buffer(initial) if initial else ffi.NULL
        cinfo = new("VkPipelineCacheCreateInfo", sType=lib.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                    initialDataSize=len(initial), pInitialData=data)
        cache = ffi.new("VkPipelineCache*")
        check(lib.vkCreatePipelineCache(dev, cinfo, ffi.NULL, cache), "vkCreatePipelineCache")
        self.cache = cache[0]
        self._dirty = False

    # -- compiling ahead (vkep.ort.warmup): sessions created at once on several threads each count theirs
    def warming_started(self, total: int) -> int:
        with self._lock:
            self._warming_next += 1
            self._warming[self._warming_next] = [0, total]
            return self._warming_next

    def warmed_one(self, job: int) -> None:
        with self._lock:
            self._warming[job][0] += 1
            self.warmed += 1

    def warming_ended(self, job: int) -> None:
        with self._lock:
            self._warming.pop(job, None)

    @property
    def warming(self) -> list[int] | None:
        """[compiled, total] over the sessions compiling ahead now (vkep run's progress line), or None."""
        with self._lock:
            jobs = list(self._warming.values())
        return [sum(j[0] for j in jobs), sum(j[1] for j in jobs)] if jobs else None

    def get(self, shader: str, defines: dict | None = None, constants: Mapping[str, int | float] | None = None):
        """The VkPipeline for shader + defines (compile-time variant) + specialization constants by name (the
        shader's `layout(constant_id = N) const uint NAME`, case aside; those not given keep the shader's
        defaults). Different pipelines build in parallel (a session's, ahead of its first run: vkep.ort.warmup);
        a second caller of the same one waits for the first."""
        key = (shader, tuple(sorted((defines or {}).items())), _constants_key(constants))
        pipeline = self._pipelines.get(key)
        if pipeline is not None:
            return pipeline
        with self._lock:
            pipeline = self._pipelines.get(key)
            if pipeline is not None:
                return pipeline
            building = self._building.get(key)
            mine = building is None
            if mine:
                building = self._building[key] = threading.Lock()
                building.acquire()
        if not mine:
            with building:  # the builder's lock: released when it is done
                pass
            return self.get(shader, defines, constants)  # built, or (the builder failed) build it here
        try:
            pipeline = self._build(shader, defines or {}, dict(key[2]))
            self._pipelines[key] = pipeline
        finally:
            with self._lock:
                del self._building[key]
            building.release()
        return pipeline

    def _build(self, shader: str, defines: dict, constants: dict[str, int | float]):
        dev = self.device.handle
        spv_key, code = compile_shader(shader, defines)
        with self._lock:  # (shared by the variants' parallel builds)
            module = self._modules.get(spv_key)
            if module is None:
                words = ffi.new("uint32_t[]", len(code) // 4)
                ffi.memmove(words, code, len(code))
                minfo = new("VkShaderModuleCreateInfo", sType=lib.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                            codeSize=len(code), pCode=words)
                out = ffi.new("VkShaderModule*")
                check(lib.vkCreateShaderModule(dev, minfo, ffi.NULL, out), "vkCreateShaderModule")
                module = self._modules[spv_key] = out[0]
                self._module_shader[spv_key] = shader
        entry = ffi.new("char[]", b"main")
        spec = ffi.NULL
        if constants:
            ids, raw = specialization_data(shader, defines, code, constants)
            entries = ffi.new("VkSpecializationMapEntry[]", [(i, 4 * k, 4) for k, i in enumerate(ids)])
            data = ffi.new("char[]", raw)
            spec = ffi.new("VkSpecializationInfo*", {"mapEntryCount": len(ids), "pMapEntries": entries,
                                                     "dataSize": len(raw), "pData": data})
            self._keep.append((entries, data))
        info = new("VkComputePipelineCreateInfo", sType=lib.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                   layout=self.layout, basePipelineIndex=-1)
        info.stage.sType = lib.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO
        info.stage.stage = lib.VK_SHADER_STAGE_COMPUTE_BIT
        info.stage.module = module
        info.stage.pName = entry
        info.stage.pSpecializationInfo = spec
        subgroup = self._subgroup_size(code, constants)
        if subgroup:
            required, full = subgroup
            size_info = new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo", requiredSubgroupSize=required,
                            sType=lib.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO)
            info.stage.pNext = size_info
            info.stage.flags = lib.VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT if full else 0
        out = ffi.new("VkPipeline*")
        check(lib.vkCreateComputePipelines(dev, self.cache, 1, info, ffi.NULL, out), f"pipeline for {shader}")
        members = push_block(code)
        layout = (_splits(members), PushLayout(shader, members))
        with self._lock:
            self._dirty = True
            self.built += 1
            self._layouts[int(ffi.cast("uintptr_t", out[0]))] = layout
            self._subgroups[int(ffi.cast("uintptr_t", out[0]))] = subgroup
        return out[0]

    def _subgroup_size(self, spirv: bytes, constants: Mapping[str, int | float]) -> tuple[int, bool] | None:
        """(the subgroup size a pipeline must run at, whether its subgroups must be full) for a shader that uses
        subgroup operations, on a device that lets a pipeline require one; else None. The size is the device's
        default subgroup size, the one kernels plan their grids and lanes with (a GPU may otherwise pick another
        per pipeline: Intel 8/16/32, AMD 32/64); full subgroups where the workgroup's width is a multiple of it."""
        features = self.device.info.features
        if not features.get("subgroupSizeControl") or not uses_subgroups(spirv):
            return None
        size = self.device.info.subgroup_size
        width = workgroup_size(spirv)[0]
        if isinstance(width, str):  # (a specialization constant: the pipeline's value, else its default)
            declared = {name.upper(): c for name, c in specialization_constants(spirv).items()}
            by_id = {declared[name.upper()].id: value for name, value in constants.items() if name.upper() in declared}
            width = by_id.get(declared[width.upper()].id, declared[width.upper()].default)
        return size, bool(features.get("computeFullSubgroups")) and int(width) % size == 0

    def required_subgroup_size(self, pipeline) -> tuple[int, bool] | None:
        """What `_subgroup_size` required of this pipeline (None: nothing)."""
        return self._subgroups.get(int(ffi.cast("uintptr_t", pipeline)))

    def splits(self, pipeline) -> bool:
        """Whether a grid past the device's workgroup-count limit may be recorded in pieces for this
        pipeline (its shader adds the piece's group base to gl_WorkGroupID)."""
        return self._layouts.get(int(ffi.cast("uintptr_t", pipeline)), (False, 0))[0]

    def push_layout(self, pipeline) -> PushLayout:
        """How a dispatch of this pipeline fills its push constants: its shader's block, read from the SPIR-V."""
        return self._layouts[int(ffi.cast("uintptr_t", pipeline))][1]

    def push_bytes(self, pipeline) -> int | None:
        """The bytes of push constants a dispatch of this pipeline must record (its block less the group base the
        recorder pushes)."""
        layout = self._layouts.get(int(ffi.cast("uintptr_t", pipeline)))
        return layout[1].bytes if layout else None

    def forget_shader(self, shader: str) -> list:
        """Take every pipeline and shader module built from `shader` out of the cache (its source changed: `vkep
        dev`), so the next get() builds it from the new SPIR-V; returns them for `retire` once nothing uses them."""
        with self._lock:
            stale = [key for key in self._pipelines if key[0] == shader]
            modules = [key for key, name in self._module_shader.items() if name == shader]
            for key in modules:
                del self._module_shader[key]
            return ([("pipeline", self._pipelines.pop(key)) for key in stale]
                    + [("module", self._modules.pop(key)) for key in modules])

    def retire(self, objects: list) -> None:
        """Destroy what `forget_shader` took out, once the device is idle (recorded and submitted work may still
        use the pipelines)."""
        if not objects:
            return
        self.device.synchronize()
        check(lib.vkDeviceWaitIdle(self.device.handle), "vkDeviceWaitIdle")
        for kind, handle in objects:
            if kind == "pipeline":
                with self._lock:  # (a new pipeline may get the handle's value)
                    self._layouts.pop(int(ffi.cast("uintptr_t", handle)), None)
                    self._subgroups.pop(int(ffi.cast("uintptr_t", handle)), None)
                lib.vkDestroyPipeline(self.device.handle, handle, ffi.NULL)
            else:
                lib.vkDestroyShaderModule(self.device.handle, handle, ffi.NULL)

    def save(self) -> None:
        if not self._dirty:
            return
        size = ffi.new("size_t*")
        lib.vkGetPipelineCacheData(self.device.handle, self.cache, size, ffi.NULL)
        buf = ffi.new("char[]", size[0])
        lib.vkGetPipelineCacheData(self.device.handle, self.cache, size, buf)
        tmp = self._file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(ffi.buffer(buf, size[0])[:])
        tmp.replace(self._file)
        self._dirty = False

    def destroy(self) -> None:
        dev = self.device.handle
        self.save()
        for pipeline in self._pipelines.values():
            lib.vkDestroyPipeline(dev, pipeline, ffi.NULL)
        for module in self._modules.values():
            lib.vkDestroyShaderModule(dev, module, ffi.NULL)
        lib.vkDestroyPipelineCache(dev, self.cache, ffi.NULL)
        lib.vkDestroyPipelineLayout(dev, self.layout, ffi.NULL)
        self._pipelines.clear()
        self._modules.clear()
