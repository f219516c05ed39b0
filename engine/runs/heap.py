"""Handing the heap that finished runs freed back to the operating system (glibc's `malloc_trim`).

A finished run leaves memory whole when its last reader and writer go, but glibc keeps the freed pages of a
fragmented heap mapped: the process's RSS, what an operator pays, stays up. One `malloc_trim(0)` a second at
most, a second after a run was released, returns them (`madvise`); elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

TRIM_DELAY_SECONDS = 1.0
"""How long after a finished run is released the heap is trimmed (releases in between share one trim)."""


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


class HeapTrim:
    """Trims the heap once, a little after the first of a series of requests."""

    def __init__(self, delay: float = TRIM_DELAY_SECONDS, trim: Callable[[int], int] | None = None) -> None:
        self._delay = delay
        self._trim = trim if trim is not None else _malloc_trim()
        self._pending: asyncio.TimerHandle | None = None

    def soon(self) -> None:
        """Trim the heap within the delay (nothing if a trim is already due, or without glibc, or without a loop)."""
        if self._trim is None or self._pending is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pending = loop.call_later(self._delay, self._now)

    def _now(self) -> None:
        self._pending = None
        if self._trim is not None:
            self._trim(0)
