"""Handing the heap that finished runs freed back to the operating system (glibc's `malloc_trim`).

A finished run leaves memory whole when its last reader and writer go, but glibc keeps the freed pages of a
fragmented heap mapped: the process's RSS, what an operator pays, stays up. One `malloc_trim(0)` a second at
most, a second after a run was released, returns them (`madvise`); elsewhere than glibc it does nothing. The trim
walks the whole heap (tens to hundreds of milliseconds on a large one), so it runs on a worker thread (ctypes
releases the GIL), never on the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Callable

TRIM_DELAY_SECONDS = 1.0
"""How long after a finished run is released the heap is trimmed (releases in between share one trim)."""


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim from the C library already loaded into the process (None elsewhere)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


MALLOC_TRIM = _malloc_trim()


class HeapTrim:
    """Trims the heap once, a little after the first of a series of requests."""

    def __init__(self, delay: float = TRIM_DELAY_SECONDS, trim: Callable[[int], int] | None = None) -> None:
        self._delay = delay
        self._trim = trim if trim is not None else MALLOC_TRIM
        self._due = False

    def soon(self) -> None:
        """Trim the heap within the delay (nothing if a trim is already due, or without glibc, or without a loop)."""
        if self._trim is None or self._due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._due = True
        loop.call_later(self._delay, self._start, loop, self._trim)

    def _start(self, loop: asyncio.AbstractEventLoop, trim: Callable[[int], int]) -> None:
        try:
            trimming = loop.run_in_executor(None, trim, 0)
        except RuntimeError:  # the loop is shutting down (its executor is gone): the process's memory goes anyway
            self._due = False
            return
        trimming.add_done_callback(self._done)

    def _done(self, trimmed: asyncio.Future[int]) -> None:
        self._due = False
        if not trimmed.cancelled():
            trimmed.exception()  # retrieved: a failed trim changes nothing
