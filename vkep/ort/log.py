"""vkep's messages go to ORT's loggers, at ORT's severities.

ORT hands the factory its default logger (`CreateEpFactories`) and each EP its session's logger
(`CreateEp`): a session's `log_severity_level` then shows or hides what vkep says about that session
(where its nodes went and why), and the environment's level what vkep says about registration.
"""

from __future__ import annotations

import sys
import traceback

from vkep.ort import api

VERBOSE, INFO, WARNING, ERROR, FATAL = range(5)  # OrtLoggingLevel
_WIDE = sys.platform == "win32"  # ORTCHAR_T is wchar_t on Windows


class Logger:
    """One OrtLogger; a NULL one drops everything."""

    def __init__(self, ptr=None):
        self.ptr = ptr  # None or NULL: no logger (vkep.ort may be imported before ORT loads the plugin)

    def enabled(self, severity: int) -> bool:
        """Whether ORT would show a message of `severity` (ask before building a costly message)."""
        if self.ptr is None or self.ptr == api.ffi.NULL:
            return False
        level = api.ffi.new("int*")
        status = api.lib.ort_Logger_GetLoggingSeverityLevel(self.ptr, level)
        if status != api.ffi.NULL:
            api.lib.ort_ReleaseStatus(status)
            return True
        return severity >= level[0]

    def log(self, severity: int, message: str, _depth: int = 1) -> None:
        if not self.enabled(severity):
            return
        frame = sys._getframe(_depth)  # where the message comes from, for ORT's "file:line function"
        name = frame.f_code.co_filename.rsplit("/", 1)[-1]
        path = (name + "\0").encode("utf-16-le") if _WIDE else name.encode()
        text = message if message.startswith("vkep") else "vkep: " + message
        status = api.lib.ort_Logger_LogMessage(self.ptr, severity, text.encode(errors="replace"), path,
                                               frame.f_lineno, frame.f_code.co_name.encode())
        if status != api.ffi.NULL:
            api.lib.ort_ReleaseStatus(status)

    def verbose(self, message: str) -> None:
        self.log(VERBOSE, message, 2)

    def info(self, message: str) -> None:
        self.log(INFO, message, 2)

    def warning(self, message: str) -> None:
        self.log(WARNING, message, 2)

    def error(self, message: str) -> None:
        self.log(ERROR, message, 2)


# the logger ORT gave the latest factory: for what happens outside a session
default = Logger()


def set_default(ptr) -> None:
    global default
    default = Logger(ptr)


def report_exception(exc_type, exc, tb) -> None:
    """An exception in an ORT callback that has no OrtStatus to carry it: to ORT's log, at ERROR."""
    text = "vkep: error in an ORT callback:\n" + "".join(traceback.format_exception(exc_type, exc, tb))
    if default.ptr != api.ffi.NULL:
        default.error(text)
    else:  # before ORT gave vkep a logger: stderr is all there is
        sys.stderr.write(text)
