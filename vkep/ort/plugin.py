"""Entry of the embedded interpreter: binds the plugin module and defines every ORT callback."""

from __future__ import annotations


def attach(ffi, lib) -> None:
    from vkep.ort import api

    api.bind(ffi, lib)
    # importing these defines their extern "Python" callbacks
    # the per-node replay records straight into vkep's gpu recorder
    from vkep.gpu.vk import ffi as vk_ffi
    from vkep.gpu.vk import lib as vk_lib
    from vkep.ort import control_flow, ep, factory, interop, kernel, memory, prepack  # noqa: F401

    def fn(name: str) -> int:
        return int(vk_ffi.cast("uintptr_t", getattr(vk_lib, name)))

    lib.vkep_set_gpu_fns(fn("vkep_ready_fn"), fn("vkep_dispatch_fn"), fn("vkep_translate_fn"), fn("vkep_lock_fn"),
                         fn("vkep_unlock_fn"))
    lib.vkep_py_ready = 1
