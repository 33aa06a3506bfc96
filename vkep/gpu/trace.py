"""A device's host operations (uploads, downloads, staging copies, submits, waits) told to whoever listens: a
profiler (vkep/ort/profiler.py) while ORT profiles a session on the device. With nobody listening, each hook costs
one test of `device.tracers` (an empty tuple) on paths that already call into Vulkan or copy memory."""

from __future__ import annotations

import functools
import time
from typing import Protocol


class Listener(Protocol):
    def operation_starting(self) -> None:
        """A host operation is about to begin (before its start time is read: `operation_start`)."""

    def host_event(self, name: str, start_ns: int, end_ns: int, args: dict[str, str]) -> None: ...

    def submitted(self, stream, value: int, start_ns: int, end_ns: int) -> None: ...

    def waited(self, stream, value: int, start_ns: int, end_ns: int) -> None: ...

    def batch_opened(self, stream) -> None:
        """A command buffer was begun on `stream` (Python's path: the native one begins its own)."""

    def batch_closing(self, stream) -> None:
        """The stream's open command buffer is about to be ended and submitted."""


def now() -> int:
    """The host clock every event and calibration uses (CLOCK_MONOTONIC)."""
    return time.perf_counter_ns()


def operation_start(device) -> int:
    """now() at the start of a host operation, the listeners told first: a profiler reads the wall clock there,
    before anything the operation starts (a submit's GPU work begins before vkQueueSubmit returns)."""
    for listener in device.tracers:
        listener.operation_starting()
    return now()


def listen(device, listener: Listener) -> None:
    device.tracers = (*device.tracers, listener)


def stop_listening(device, listener: Listener) -> None:
    device.tracers = tuple(t for t in device.tracers if t is not listener)


def emit(device, name: str, start_ns: int, args: dict[str, str]) -> None:
    end = now()
    for listener in device.tracers:
        listener.host_event(name, start_ns, end, args)


def submitted(stream, value: int, start_ns: int) -> None:
    end = now()
    for listener in stream.device.tracers:
        listener.submitted(stream, value, start_ns, end)


def waited(stream, value: int, start_ns: int) -> None:
    end = now()
    for listener in stream.device.tracers:
        listener.waited(stream, value, start_ns, end)


def host_operation(name, nbytes_at: int):
    """Report calls of a transfer function `fn(device, *args)` as `name` (or `name(args)`) with the byte count
    at args[nbytes_at]."""

    def wrap(fn):
        @functools.wraps(fn)
        def traced(device, *args):
            if not device.tracers:
                return fn(device, *args)
            start = operation_start(device)
            try:
                return fn(device, *args)
            finally:
                emit(device, name(args) if callable(name) else name, start, {"bytes": str(args[nbytes_at])})

        return traced

    return wrap


def batch_opened(stream) -> None:
    for listener in stream.device.tracers:
        listener.batch_opened(stream)


def batch_closing(stream) -> None:
    for listener in stream.device.tracers:
        listener.batch_closing(stream)
