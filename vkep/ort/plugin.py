"""Entry of the embedded interpreter: binds the plugin module and defines every ORT callback."""

from __future__ import annotations

from vkep.gpu.diagnose import VulkanUnavailable


def attach(ffi, lib) -> None:
    from vkep.ort import api, interrupts

    api.bind(ffi, lib)
    interrupts.reraise_at_run_end()
    try:
        _attach_all(ffi, lib)
    except VulkanUnavailable as exc:  # no Vulkan loader: registration fails with what to install
        _attach_unavailable(ffi, str(exc))
    lib.vkep_py_ready = 1


def _attach_all(ffi, lib) -> None:
    # importing these defines their extern "Python" callbacks
    # the per-node replay records straight into vkep's gpu recorder
    from vkep.gpu.vk import ffi as vk_ffi
    from vkep.gpu.vk import lib as vk_lib
    from vkep.ort import (  # noqa: F401
        capture,
        control_flow,
        ep,
        factory,
        fusion,
        importer,
        kernel,
        memory,
        prepack,
        profiler,
    )

    def fn(name: str) -> int:
        return int(vk_ffi.cast("uintptr_t", getattr(vk_lib, name)))

    lib.vkep_set_gpu_fns(fn("vkep_ready_fn"), fn("vkep_dispatch_fn"), fn("vkep_translate_fn"), fn("vkep_lock_fn"),
                         fn("vkep_unlock_fn"), fn("vkep_submit_open_fn"), fn("vkep_wait_recorder_fn"))


def _attach_unavailable(ffi, message: str) -> None:
    """Entry points that only report `message`: ORT then creates no factory, so no other callback runs."""
    from vkep.ort import api

    @ffi.def_extern(name="vkep_py_create_factories")
    def create_factories(registered_name, base, logger, factories, max_factories, num_factories):
        num_factories[0] = 0
        return api.lib.ort_CreateStatus(api.ORT_EP_FAIL, message.encode(errors="replace"))  # as make_status

    @ffi.def_extern(name="vkep_py_release_factory")
    def release_factory(ptr):
        return ffi.NULL
