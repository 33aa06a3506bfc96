"""Pipelines compiled ahead of their first use, in the background (docs/design.md, "Cold start").

A session's kernels know most of the pipelines they will use as soon as they exist and have their weights
(vkep/ort/warmup.py plans them dry). `Ahead.start` builds those in a thread pool (a GPU driver compiles in
vkCreateComputePipelines) and executes each once with zero workgroups on a stream of its own, so that a driver
that compiles at first execution (lavapipe, on its one queue's thread) compiles it while the session is still
being made: ORT's graph work and the other kernels' weights go on meanwhile. That stream touches no memory, so it
is not among the device's streams that an upload waits for (Device.synchronize).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

# a pipeline as PipelineCache.get takes it: (shader, its -D defines, its specialization constants), as tuples
Key = tuple[str, tuple, tuple]


class Ahead:
    """One device's background compiles; each pipeline is started once (later starts share its future)."""

    def __init__(self, device):
        self.device = device
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._stream = None  # (made on first use: a Stream not in device.streams)
        self._started: dict[Key, Future] = {}
        self._closed = False

    def start(self, keys: Iterable[Key]) -> list[Future]:
        """Build and compile these pipelines in the background. A future per key: its result is the timeline
        value of the ahead stream at which the pipeline's zero dispatch completes (see wait), or its exception
        is why it could not be built (the first run meets it then, with its node)."""
        futures = []
        with self._lock:
            if self._closed:
                return []
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="vkep-ahead")
            for key in keys:
                future = self._started.get(key)
                if future is None:
                    future = self._started[key] = self._pool.submit(self._compile, key)
                futures.append(future)
        return futures

    def _compile(self, key: Key) -> int:
        shader, defines, constants = key
        pipeline = self.device.pipelines.get(shader, dict(defines), dict(constants))
        with self._lock:
            if self._stream is None:
                from vkep.gpu.stream import Stream

                self._stream = Stream(self.device)
            self._stream.dispatch(pipeline, bytes(16), (0, 0, 0), b"", 0, 0)
            return self._stream.flush()

    def wait(self, value: int) -> None:
        """Until the zero dispatch that completes at `value` (a result of start's futures) has run."""
        if value and self._stream is not None:
            self._stream.wait(value, errors=False)  # (a run's index error is the run's to report)

    def close(self) -> None:
        """Stop: builds under way finish, the others are dropped, the stream goes."""
        with self._lock:
            self._closed = True
            pool = self._pool
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if self._stream is not None:
            self._stream.destroy()
            self._stream = None
