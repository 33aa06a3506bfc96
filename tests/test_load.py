"""Load: threads over shared and separate sessions, sessions created and released while others run, memory
flat (tools/soak.py; `tools/soak.py --seconds 300` is the long form, by hand). Each runs in a process of
its own: what these tests look for ends a process (a crash, an abort) or never ends (a hang)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_four_threads_shared_and_separate_sessions_memory_flat():
    """Two threads on one session, one on its own, one creating and releasing sessions, for 10 s: every
    output checked against the CPU EP, no thread hung, vkep's live bytes and the resident size flat. (The
    soak found vkep.stats() reading an allocator ORT was releasing on another thread: a crash or an abort
    in about one run of three, before allocators took a lock.)"""
    done = _run(["tools/soak.py", "--seconds", "10", "--json"], timeout=240)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert min(report["runs"]) > 0 and not report["failures"] and not report["grew"], report


_STATS_WHILE_RELEASING = textwrap.dedent("""
    import threading
    import vkep
    from vkep import models, runner
    vkep.register()
    model, stop = models.add_chain(8), threading.Event()

    def churn():
        for _ in range(40):
            session = runner.vkep_session(model)
            session.run(None, models.random_inputs(model))
            del session
        stop.set()

    thread = threading.Thread(target=churn)
    thread.start()
    reads = 0
    while not stop.is_set():
        vkep.stats()
        reads += 1
    thread.join()
    print(reads)
""")


def test_stats_while_sessions_are_released_on_another_thread():
    """vkep.stats() on one thread while another creates and releases sessions (and with them ORT's
    allocators over vkep memory): no crash, every read answered."""
    for _ in range(3):
        done = _run(["-c", _STATS_WHILE_RELEASING], timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        assert int(done.stdout.strip().splitlines()[-1]) > 0


_SESSIONS_LEFT_TO_THE_END = textwrap.dedent("""
    import numpy as np
    from onnx import TensorProto, helper
    from vkep import runner
    from vkep.kernels import pool
    counted = pool.window_loops
    pool.window_loops = lambda kd, kh, kw: counted(kd, kh, kw)  # (vkep's module then refers to __main__'s)
    for rows in (3, 4, 5):
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[rows, 1])
        graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        session = runner.vkep_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
        session.run(None, {"x": np.ones((1, 1, 8, 2), np.float32)})
    print("ran")
""")


def test_sessions_released_as_the_interpreter_exits_print_nothing():
    """Sessions an application keeps to the end are released while Python tears its modules down: vkep's release
    callbacks then fail on the cleared globals. They used to print 'Exception ignored from cffi callback ...'
    tracebacks at every exit (10 of them in this script); the callbacks' error handlers now say nothing then."""
    done = _run(["-c", _SESSIONS_LEFT_TO_THE_END], timeout=240)
    assert done.returncode == 0 and done.stdout.strip().endswith("ran"), (done.stdout[-2000:], done.stderr[-4000:])
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-4000:]
