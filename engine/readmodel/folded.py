"""Positions of the log whose run rows this process already wrote in their append's own transaction.

On PostgreSQL the projection runner follows the whole log, this process's appends too. Their rows were
written with the append (decision 0021), so folding them again only costs a transaction a run event: a
read of the row that finds nothing new, and a tracking write that flushes the write-ahead log. The runner
takes a position from here instead and skips it; it records its position at most once a second for the
positions it skipped (a restart folds again what came after the recorded position: folds are idempotent,
a row moves only forward).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

KEPT_AT_MOST = 100_000
"""Positions kept while the runner is behind or away; beyond it the runner folds the new ones itself."""


class FoldedHere:
    """Notification ids folded in their append's transaction, taken once each by the runner (thread-safe)."""

    def __init__(self, kept_at_most: int = KEPT_AT_MOST) -> None:
        self._ids: set[int] = set()
        self._passed = 0
        self._kept_at_most = kept_at_most
        self._lock = threading.Lock()

    def add(self, ids: Iterable[int]) -> None:
        """Positions whose rows were written in their (not yet committed) append's transaction."""
        with self._lock:
            if len(self._ids) >= self._kept_at_most:
                self._ids = {i for i in self._ids if i > self._passed}  # appends whose commit failed
            if len(self._ids) < self._kept_at_most:
                self._ids.update(ids)

    def take(self, notification_id: int) -> bool:
        """True once when the runner's next position was folded here (the runner sees positions in order)."""
        with self._lock:
            self._passed = notification_id
            if notification_id in self._ids:
                self._ids.remove(notification_id)
                return True
            return False

    def __len__(self) -> int:
        return len(self._ids)
