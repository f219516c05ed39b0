"""Retention: the content of runs that ended longer ago than FLOWTRAIL_RETENTION_DAYS is erased, by a periodic sweep.

A sweep reads the longest-ended runs not erased yet from the run read model (at most a batch)
and erases each as `DELETE` would, recorded as by `retention`. Only one replica sweeps at a time
(a PostgreSQL advisory lock; on SQLite the one process); a sweep that finds the lock taken does
nothing. A run that cannot be erased (it was erased meanwhile, the store is away) is logged and
left for the next sweep.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta

from domain.errors import FlowtrailError
from engine.clock import utcnow
from engine.readmodel import ReadModel
from engine.runs.erasure import RunEraser
from engine.settings import RetentionSettings
from engine.store import AsyncEventStore, StoreError

log = logging.getLogger("flowtrail.retention")
SWEEP_LOCK = int.from_bytes(hashlib.sha256(b"flowtrail retention sweep").digest()[:8], "big", signed=True)
"""The advisory lock one replica holds while it sweeps."""
RETAINED_BY = "retention"


class Retention:
    """Erases runs past their retention, a batch per sweep."""

    def __init__(self, settings: RetentionSettings, store: AsyncEventStore, read_model: ReadModel, eraser: RunEraser):
        self.settings = settings
        self.store = store
        self.read_model = read_model
        self.eraser = eraser

    @property
    def enabled(self) -> bool:
        """True when FLOWTRAIL_RETENTION_DAYS is set."""
        return self.settings.days > 0

    async def sweep(self, now: datetime | None = None) -> int:
        """Erase at most a batch of runs that ended before the retention period; how many (0: another replica sweeps)."""
        async with self.store.exclusively(SWEEP_LOCK) as held:
            if not held:
                return 0
            cutoff = (now or utcnow()) - timedelta(days=self.settings.days)
            erased = 0
            for run_id in await self.read_model.ended_before(cutoff, limit=self.settings.batch):
                try:
                    erasure = await self.eraser.erase(run_id, by=RETAINED_BY, reason="retention")
                except (FlowtrailError, StoreError) as error:
                    log.warning("run %s: not erased by retention this time: %s", run_id.hex, error)
                    continue
                erased += not erasure.already
            return erased
