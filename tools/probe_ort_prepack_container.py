"""Does ORT share pre-packed weights across sessions? Two sessions of tests/test_weights.py's model, created
through ORT's C API (ctypes) with one OrtPrepackedWeightsContainer (ORT's Python API cannot pass one), with
vkep's prepack_cache=ort or =vkep; prints the bytes each session moved, the live device memory, and how many
distinct buffers ORT handed vkep's kernels through SetSharedPrePackedWeight. From a checkout:

    .venv/bin/python tools/probe_ort_prepack_container.py ort

ORT 1.31.1, 2026-11-25: ort -> each session packs and keeps buffers of its own (the second session's
kernels get new addresses: 18 distinct for 9 weights in 2 sessions; live memory doubles, and drops by half
when one session is released); vkep -> the second session moves nothing and shares the first's weights.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import onnxruntime  # noqa: E402

import vkep  # noqa: E402
from tests.test_weights import weights_model  # noqa: E402
from vkep.gpu.weights import WeightCache  # noqa: E402
from vkep.ort.abi import ORT_API, ORT_API_VERSION  # noqa: E402

# OrtApi slots (vkep/ort/abi.py; tests/test_ort_abi.py checks them against ORT's headers)
GET_ERROR_MESSAGE, CREATE_ENV, CREATE_SESSION_OPTIONS, ADD_CONFIG_ENTRY = (
    ORT_API[name] for name in ("GetErrorMessage", "CreateEnv", "CreateSessionOptions", "AddSessionConfigEntry"))
CREATE_CONTAINER, CREATE_SESSION_FROM_ARRAY_WITH_CONTAINER, RELEASE_SESSION = (
    ORT_API[name] for name in ("CreatePrepackedWeightsContainer", "CreateSessionFromArrayWithPrepackedWeightsContainer",
                               "ReleaseSession"))
REGISTER_EP_LIBRARY, GET_EP_DEVICES, APPEND_EP_V2, EP_DEVICE_EP_NAME = (
    ORT_API[name] for name in ("RegisterExecutionProviderLibrary", "GetEpDevices",
                               "SessionOptionsAppendExecutionProvider_V2", "EpDevice_EpName"))
MOVED = ("uploads", "upload_bytes", "downloads", "download_bytes", "staging_copies", "staging_bytes")
P = ctypes.c_void_p


class OrtC:
    """The few C API calls this probe makes."""

    def __init__(self):
        path = os.path.join(os.path.dirname(onnxruntime.__file__), "capi", f"libonnxruntime.so.{onnxruntime.__version__}")
        lib = ctypes.CDLL(path)
        lib.OrtGetApiBase.restype = ctypes.POINTER(P)
        get_api = ctypes.CFUNCTYPE(ctypes.POINTER(P), ctypes.c_uint32)(lib.OrtGetApiBase()[0])
        self.api = get_api(ORT_API_VERSION)
        self.message = ctypes.CFUNCTYPE(ctypes.c_char_p, P)(self.api[GET_ERROR_MESSAGE])

    def call(self, slot: int, argtypes: list, *args, restype=P):
        result = ctypes.CFUNCTYPE(restype, *argtypes)(self.api[slot])(*args)
        if restype is P and result:
            raise RuntimeError(f"ORT slot {slot}: {self.message(result).decode()}")
        return result


def main(cache: str) -> None:
    ort = OrtC()
    out = ctypes.POINTER(P)
    env, container = P(), P()
    ort.call(CREATE_ENV, [ctypes.c_int, ctypes.c_char_p, out], 2, b"probe", ctypes.byref(env))
    ort.call(REGISTER_EP_LIBRARY, [P, ctypes.c_char_p, ctypes.c_char_p], env, b"vkep", vkep.get_library_path().encode())
    devices, count = ctypes.POINTER(P)(), ctypes.c_size_t()
    ort.call(GET_EP_DEVICES, [P, ctypes.POINTER(ctypes.POINTER(P)), ctypes.POINTER(ctypes.c_size_t)], env,
             ctypes.byref(devices), ctypes.byref(count))
    mine = [devices[i] for i in range(count.value)
            if ort.call(EP_DEVICE_EP_NAME, [P], devices[i], restype=ctypes.c_char_p) == vkep.EP_NAME.encode()]
    ort.call(CREATE_CONTAINER, [out], ctypes.byref(container))
    model, weight_bytes = weights_model()

    def session() -> P:
        options, created = P(), P()
        ort.call(CREATE_SESSION_OPTIONS, [out], ctypes.byref(options))
        keys, values = (ctypes.c_char_p * 2)(b"prepack_cache", b"allow_cpu_device"), (ctypes.c_char_p * 2)(
            cache.encode(), b"1")
        ort.call(APPEND_EP_V2, [P, P, P, ctypes.c_size_t, P, P, ctypes.c_size_t], options, env,
                 (P * len(mine))(*mine), len(mine), keys, values, 2)
        ort.call(ADD_CONFIG_ENTRY, [P, ctypes.c_char_p, ctypes.c_char_p], options,
                 b"session.disable_cpu_ep_fallback", b"1")
        ort.call(CREATE_SESSION_FROM_ARRAY_WITH_CONTAINER, [P, P, ctypes.c_size_t, P, P, out], env, model, len(model),
                 options, container, ctypes.byref(created))
        return created

    shared: list[int] = []  # the buffer of each SetSharedPrePackedWeight call (prepack_cache=ort)
    adopt = WeightCache.adopt

    def counting_adopt(self, address: int, nbytes: int):
        shared.append(address)
        return adopt(self, address, nbytes)

    WeightCache.adopt = counting_adopt

    def live() -> int:
        return vkep.stats()[0]["live_bytes"]

    vkep.reset_stats()
    first = session()
    report = {"first": {k: vkep.stats()[0][k] for k in MOVED}, "live_after_first": live()}
    vkep.reset_stats()
    second = session()
    report.update(second={k: vkep.stats()[0][k] for k in MOVED}, live_after_second=live(),
                  distinct_shared_buffers=len(set(shared)), shared_calls=len(shared), weights=weight_bytes)
    ort.call(RELEASE_SESSION, [P], second, restype=None)
    report["live_after_releasing_the_second"] = live()
    ort.call(RELEASE_SESSION, [P], first, restype=None)
    report["live_after_releasing_both"] = live()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ort")
