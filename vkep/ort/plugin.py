"""Entry of the embedded interpreter: binds the plugin module and defines every ORT callback."""

from __future__ import annotations


def attach(ffi, lib) -> None:
    from vkep.ort import api

    api.bind(ffi, lib)
    # importing these defines their extern "Python" callbacks
    from vkep.ort import ep, factory, kernel, memory  # noqa: F401

    lib.vkep_py_ready = 1
