"""A terminal that shows what needs someone, not every expected failure in full.

- A failure Keel raised on purpose is an `ApplicationError` with a sentence (the model
  endpoint is unreachable, a webhook refused a notice): Temporal logs each failed
  attempt at warning with the chained tracebacks (four for one unreachable model), so
  one failed model call filled a `keel dev` terminal with dozens. Such an attempt is
  one line at info, without a traceback; the run's own failure tells the user. Any other
  exception is a bug and keeps its traceback at warning.
- asyncio's "socket.send() raised exception." says a client went away while a response
  was still streaming to it (a closed console tab): nothing to act on, so it is dropped.
"""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

__all__ = ["quiet_expected_failures"]

ACTIVITY_LOGGER = "temporalio.activity"
ASYNCIO_NOISE = {"socket.send() raised exception."}


class _ExpectedFailureInOneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, ApplicationError):
            return True
        record.msg, record.args = f"{record.getMessage()}: {exc}", ()
        record.exc_info, record.exc_text = None, None
        if record.levelno > logging.INFO:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger(record.name).isEnabledFor(record.levelno)


class _DropAsyncioNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in ASYNCIO_NOISE


def quiet_expected_failures() -> None:
    """Install both filters, once (a process may build several workers)."""
    for name, kind in (
        (ACTIVITY_LOGGER, _ExpectedFailureInOneLine),
        ("asyncio", _DropAsyncioNoise),
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())
