"""The facts about one Vulkan device that vkep relies on, as `vkep report` writes them: what `vkep devices`
shows, and the limits, features, extensions and timestamp support that vkep.gpu.device reads and that the
feature switches (vkep.options: fp16, int8, subgroups) and kernels choose by."""

from __future__ import annotations

from vkep.gpu.device import (
    HOST_IMPORT_EXTENSION,
    SWITCHED_FEATURES,
    PhysicalDeviceInfo,
    device_extensions,
    physical_devices,
)

# the device extensions vkep enables where present (gpu.device.Device._wanted_extensions), and why
EXTENSIONS = {"VK_KHR_external_memory_fd": "interop: GPU memory shared with other APIs",
              "VK_KHR_external_semaphore_fd": "interop: timeline semaphores shared with other APIs",
              HOST_IMPORT_EXTENSION: "host memory the device reads in place (EP option host_import)"}
# what each feature is used for (the ones gpu.device reads; the first three are required)
FEATURES = {"bufferDeviceAddress": "required: every kernel addresses buffers by pointer",
            "timelineSemaphore": "required: streams and ORT's sync",
            "shaderInt64": "required: 64-bit addresses in shaders",
            "storageBuffer16BitAccess": "float16 tensors (fp16 switch)",
            "shaderFloat16": "float16 arithmetic (fp16 switch)",
            "storageBuffer8BitAccess": "8-bit tensors: int8, uint8, bool (int8 switch)",
            "shaderInt8": "8-bit arithmetic (int8 switch)",
            "shaderInt16": "16-bit integer arithmetic",
            "subgroupBallotCompute": "subgroupBroadcast in compute shaders (subgroups switch)"}


def choose(index: int | None) -> PhysicalDeviceInfo:
    """Device `index`, or where None the one a session with device=auto and allow_cpu_device=1 takes: the
    first usable GPU, else the first usable device."""
    found = physical_devices()
    if index is not None:
        if not 0 <= index < len(found):
            raise ValueError(f"no Vulkan device #{index}: `vkep devices` lists {len(found)}")
        return found[index]
    usable = [d for d in found if d.usable]
    if not usable:
        raise RuntimeError("no Vulkan device vkep can use: " + "; ".join(f"{d.name} lacks {', '.join(d.missing)}"
                                                                        for d in found))
    return next((d for d in usable if not d.cpu_implemented), usable[0])


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def describe(info: PhysicalDeviceInfo) -> dict:
    """{"summary": what `vkep devices --json` shows, "limits": {name: text}, "features": {name: bool},
    "switches": {switch: bool}, "extensions": {name: bool}, "timestamps": text}."""
    from vkep.gpu.timing import timestamp_support

    limits = {
        "subgroup size": str(info.subgroup_size),
        "maxComputeWorkGroupCount": " x ".join(map(str, info.max_workgroup_count)),
        "maxComputeWorkGroupSize": " x ".join(map(str, info.max_workgroup_size)),
        "maxComputeWorkGroupInvocations": str(info.max_workgroup_invocations),
        "maxComputeSharedMemorySize": f"{info.max_shared_memory:,} bytes",
        "maxPushConstantsSize": f"{info.max_push_constants} bytes",
        "memory heaps": ", ".join(_mib(size) for size in info.heap_sizes),
        "memory types (property flags, heap)": ", ".join(f"0x{flags:x}/{heap}" for flags, heap in info.memory_types),
        "compute queue family": str(info.compute_queue_family),
    }
    try:
        bits, period = timestamp_support(info) if info.compute_queue_family is not None else (0, 0.0)
        timestamps = f"{bits} valid bits, {period:g} ns a tick" if bits else "none on the compute queue"
    except Exception as exc:  # noqa: BLE001 — a fact the report can do without
        timestamps = f"not read: {exc}"
    available = device_extensions(info.handle)
    return {"summary": info.summary(), "limits": limits,
            "features": {name: info.features.get(name, False) for name in FEATURES},
            "switches": {switch: info.has(switch) for switch in SWITCHED_FEATURES},
            "extensions": {name: name in available for name in EXTENSIONS}, "timestamps": timestamps}


def markdown(facts: dict) -> list[str]:
    s = facts["summary"]
    usable = "yes" if s["usable"] else "no: lacks " + ", ".join(s["missing"])
    rows = [("name", s["name"]), ("index in `vkep devices`", s["index"]), ("type", s["type"]),
            ("vendor", f"{s['vendor']} (0x{s['vendor_id']:04x}), device id 0x{s['device_id']:04x}"),
            ("driver", f"{s['driver']}: {s['driver_info']}"),
            ("driver version, VkDriverId", f"{s['driver_version']}, {s['driver_id_name']} ({s['driver_id']})"),
            ("Vulkan", s["api_version"]), ("uuid", s["uuid"]), ("unified memory", "yes" if s["unified_memory"] else "no"),
            ("usable by vkep", usable), ("timestamps", facts["timestamps"]),
            *facts["limits"].items()]
    lines = ["| fact | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]
    lines += ["", "| feature | present | vkep uses it for |", "|---|---|---|"]
    lines += [f"| `{name}` | {'yes' if on else 'no'} | {FEATURES[name]} |" for name, on in facts["features"].items()]
    lines += ["", "| feature switch (EP option) | device has every feature it needs |", "|---|---|"]
    lines += [f"| `{name}` | {'yes' if on else 'no'} |" for name, on in facts["switches"].items()]
    lines += ["", "| extension | present | vkep uses it for |", "|---|---|---|"]
    lines += [f"| `{name}` | {'yes' if on else 'no'} | {EXTENSIONS[name]} |" for name, on in facts["extensions"].items()]
    return lines
