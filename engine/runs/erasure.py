"""Erasing a run: its content leaves the log, its workspace and this process's memory; its skeleton and chain stay.

The log's part is one transaction (`AsyncEventStore.erase_stream`): either the run is erased, with
its `RunErased` event, or nothing changed. What follows the commit (the workspace deleted, the hot
run dropped, on SQLite the write-ahead log emptied) is done again by any later erasure of the same
run, which answers "already erased": a process that died in between leaves nothing behind for good.
Other replicas drop the run from memory when the live tail brings them its `RunErased`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Literal
from uuid import UUID

from domain import events as ev
from domain.run import Run, check_erasable, erase_run, fold
from engine.clock import utcnow
from engine.observability.metrics import RUNS_ERASED
from engine.runs.hot_runs import HotRuns
from engine.runs.service import RunNotFound
from engine.store import AsyncEventStore, ConcurrentAppend
from engine.workspace.directory import Workspace

ErasedBy = Literal["request", "retention"]
MAX_TRIES = 4
"""Erasures that find the run's last position taken in a row before giving up (ConcurrentAppend)."""


@dataclass(frozen=True)
class Erasure:
    """A run's erasure: when, by whom, how many events lost content; `already`: it was erased before this call."""

    run_id: UUID
    erased_at: datetime
    erased_by: str
    events_erased: int
    already: bool


class RunEraser:
    """Erases ended runs."""

    def __init__(self, store: AsyncEventStore, hot_runs: HotRuns, workspace: Workspace) -> None:
        self.store = store
        self.hot_runs = hot_runs
        self.workspace = workspace

    async def erase(self, run_id: UUID, *, by: str, reason: ErasedBy = "request") -> Erasure:
        """Erase the run's content (it must have ended); an erased run is answered as it is, its clean-up redone.

        RunNotFound when there is no such run; IllegalTransition (nothing changed) when it has not ended.
        """
        for _ in range(MAX_TRIES):
            events = await self.store.read_stream(run_id)
            run = fold(events)
            if run is None:
                raise RunNotFound(run_id.hex)
            if run.erased:
                await self.store.forget_erased_bytes()
                return await self._cleaned(_recorded(events, run_id))
            check_erasable(run)
            try:
                erased: ev.RunErased = await self.store.erase_stream(run_id, partial(_closing, run, utcnow(), by))
            except ConcurrentAppend:
                continue
            RUNS_ERASED.labels(reason).inc()
            return await self._cleaned(_erasure(erased, already=False))
        raise ConcurrentAppend(f"run {run_id.hex}: its last position kept being taken while it was being erased")

    async def _cleaned(self, erasure: Erasure) -> Erasure:
        """Drop the run from memory and delete its workspace (both idempotent)."""
        self.hot_runs.forget(erasure.run_id)
        await asyncio.to_thread(self.workspace.remove, erasure.run_id)
        return erasure


def _closing(run: Run, at: datetime, by: str, count: int) -> ev.RunErased:
    """The RunErased event that closes an erasure of `count` events."""
    return erase_run(run, at, erased_by=by, events_erased=count)


def _recorded(events: list[ev.RunEvent], run_id: UUID) -> Erasure:
    """The erasure a run's log records (its last RunErased)."""
    for event in reversed(events):
        if isinstance(event, ev.RunErased):
            return _erasure(event, already=True)
    raise RunNotFound(run_id.hex)  # an erased first event without RunErased: not a log this service wrote


def _erasure(event: ev.RunErased, *, already: bool) -> Erasure:
    return Erasure(event.originator_id, event.timestamp, event.erased_by, event.events_erased, already)
