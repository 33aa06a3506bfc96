"""KeyboardInterrupt and SystemExit raised inside a run reach the caller as themselves.

Nothing may cross from vkep's callbacks into ORT's C++, so an interrupt inside one (Ctrl-C lands in whatever
Python runs on the main thread: a kernel, a wait for the device) becomes an error status that ends the run.
The exception itself is held for the thread, and where ORT's Python API returns from the run it is raised
instead of ORT's error. In a Python host that is the only place it can be raised: a signal re-armed
earlier would be caught again by the next callback ORT makes on the way out. A C host has no Python signal
handler (the embedded interpreter installs none), so Ctrl-C stays the host's.
"""

from __future__ import annotations

import functools
import sys
import threading

INTERRUPTS = (KeyboardInterrupt, SystemExit)
RUN_METHODS = ("run", "run_with_ort_values", "run_with_iobinding")
_held = threading.local()


def hold(exc: BaseException) -> None:
    """Keep an interrupt raised inside a callback for the end of the run (the callback returns an error)."""
    if isinstance(exc, INTERRUPTS):
        _held.exc = exc


def take() -> BaseException | None:
    exc = getattr(_held, "exc", None)
    _held.exc = None
    return exc


def _reraising(run):
    @functools.wraps(run)
    def wrapper(self, *args, **kwargs):
        take()  # one left by a run that ended some other way is not this run's
        try:
            result = run(self, *args, **kwargs)
        except Exception:
            held = take()
            if held is not None:
                raise held from None
            raise
        held = take()
        if held is not None:  # interrupted where ORT ignores errors (a release): the run finished, still stop
            raise held
        return result

    wrapper.vkep_reraises_interrupts = True
    return wrapper


def reraise_at_run_end() -> None:
    """Wrap ORT's Python run methods (in a Python host) so that a held interrupt is what the run raises."""
    module = sys.modules.get("onnxruntime.capi.onnxruntime_inference_collection")
    session = getattr(module, "Session", None)
    if session is None:
        return
    for name in RUN_METHODS:
        run = getattr(session, name, None)
        if run is not None and not getattr(run, "vkep_reraises_interrupts", False):
            setattr(session, name, _reraising(run))
