"""How a run ends: its exit code and summary's exit_reason, and the error it prints."""

from __future__ import annotations

import signal
import traceback

from a3c.backends.base import BackendFailed
from a3c.core.devices import out_of_memory_line
from a3c.core.records import ErrorRecord
from a3c.runtime.counters import StopReason

EXIT_CODES = {StopReason.SOLVED: 0, StopReason.MAX_STEPS: 0, StopReason.MAX_SECONDS: 0, StopReason.FAILED: 1}
EXIT_CODES[StopReason.PRUNED] = 0  # a3c tune's callback asked to stop (it pruned the run): a clean end
EXIT_CODES[StopReason.CALLBACK] = 0  # a callback asked to stop: a clean end


def exit_status(reason: StopReason, errors: list[ErrorRecord], signum: int | None) -> tuple[int, str]:
    """(exit code, summary's exit_reason) of a run that stopped for ``reason``: any error makes it a failure
    (exit 1, "failed: <source>"), a signal an interruption (128 + signal, its name)."""
    if errors:
        reason = StopReason.FAILED
    elif signum is not None:
        reason = StopReason.INTERRUPTED
    if reason == StopReason.INTERRUPTED:
        signum = signum or signal.SIGINT
        return 128 + signum, signal.Signals(signum).name
    if reason == StopReason.FAILED:
        return EXIT_CODES[reason], f"failed: {errors[0].source}" if errors else "failed"
    return EXIT_CODES[reason], reason.name.lower()


def error_record(exc: Exception) -> ErrorRecord:
    """The run's error for an exception that ended its loop: a backend's one line (BackendFailed, e.g. a Ray
    cluster that is not private) or the trainer's traceback (being handled now)."""
    if isinstance(exc, BackendFailed):
        return exc.record()
    line = out_of_memory_line(exc)  # the serial backend's learner runs here
    return ErrorRecord("trainer", traceback.format_exc() if line is None else line, fatal=line is not None)


def error_line(error: ErrorRecord) -> str:
    """What the run prints of its first error: ``error: SOURCE failed: REASON`` on one line for a one-line
    reason (e.g. a Ray cluster that is not private), else the traceback below that line."""
    text = error.traceback.rstrip()
    return f"error: {error.source} failed:{chr(10) if chr(10) in text else ' '}{text}"
