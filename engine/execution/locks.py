"""Per-run control locks: start, answer, cancel, a pause's time limit and a session's end take turns on a run."""

from __future__ import annotations

import asyncio
import weakref
from uuid import UUID


class RunLocks:
    """One asyncio.Lock per run, kept only while someone holds it or waits for it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[UUID, asyncio.Lock] = weakref.WeakValueDictionary()

    def of(self, run_id: UUID) -> asyncio.Lock:
        """The run's control lock (made on first use)."""
        lock = self._locks.get(run_id)
        if lock is None:
            lock = self._locks[run_id] = asyncio.Lock()
        return lock
