"""Runs as the rest of the service sees them: create, start, write, read, cancel, answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from uuid import UUID, uuid4

from domain.errors import FlowtrailError
from domain.events import RunCreated, RunEvent
from domain.run import Run, fold
from engine.clock import utcnow
from engine.observability.lifecycle import run_created
from engine.observability.requests import stamped_all
from engine.observability.tracing import with_trace_parent
from engine.runs.budget import DEFAULT_AHEAD_CHUNKS, DEFAULT_RUN_AHEAD_CHUNKS, StreamBudget
from engine.runs.creation import Creation, IdempotentRequest, NewRun, creation_events
from engine.runs.feed import Feed, follow
from engine.runs.hot import HotRun, Wants
from engine.runs.hot_runs import HotRuns
from engine.runs.writer import DEFAULT_TURN_SECONDS, Appended, RunWriter
from engine.store import AsyncEventStore, ConcurrentAppend
from engine.store.async_store import StoredLine

logger = logging.getLogger("flowtrail.runs")
History = Callable[[RunCreated], list[RunEvent]]
"""The events that follow a new run's RunCreated in its first append."""
OPENING_TAGS = ("RunStarted", "RunCancelRequested")
TERMINAL_TAGS = ("RunCompleted", "RunFailed", "RunCancelled")


class RunNotFound(FlowtrailError):
    """No run has that id (or the caller may not see it: the answer does not tell)."""

    code = "RUN_NOT_FOUND"

    def __init__(self, run_id: str) -> None:
        super().__init__("run not found", run_id=run_id)


class RunService:
    """Owns the writers of the runs this process executes and the hot read side."""

    def __init__(
        self, store: AsyncEventStore, hot_runs: HotRuns, *, coalesce_seconds: float,
        turn_seconds: float = DEFAULT_TURN_SECONDS, ahead_chunks: int = DEFAULT_AHEAD_CHUNKS,
        run_ahead_chunks: int = DEFAULT_RUN_AHEAD_CHUNKS,
    ) -> None:
        self._store = store
        self.budget = StreamBudget(ahead_chunks, per_run=run_ahead_chunks)
        self._hot_runs = hot_runs
        self.coalesce_seconds = coalesce_seconds
        self.turn_seconds = turn_seconds
        self._writers: dict[UUID, RunWriter] = {}
        self._writer_locks: dict[UUID, asyncio.Lock] = {}
        self.on_appended: Appended | None = None
        """Told of every batch a run's writer appended (set by the composition root)."""

    async def create(self, new: NewRun, *, run_id: UUID | None = None,
                     idempotency: IdempotentRequest | None = None, history: History | None = None) -> Creation:
        """A new run, kept hot; with an idempotency key, the original run of a repeated request.

        `history` gives the events that follow the run's RunCreated in the same transaction (a fork's).
        Raises IdempotencyKeyReused when the key was used for a different request.
        """
        if idempotency is not None:
            existing = idempotency.replayed_run(await self._store.read_stream(idempotency.stream_id))
            if existing is not None:
                return Creation(existing, True)
        run_id = run_id or uuid4()
        events = stamped_all(creation_events(run_id, new, idempotency, utcnow()))
        events[-1] = with_trace_parent(events[-1])
        created = events[-1]
        if history is not None:
            events += history(created)
        try:
            await self._store.append_to_stream(events)
        except ConcurrentAppend:
            if idempotency is None:
                raise
            winner = idempotency.replayed_run(await self._store.read_stream(idempotency.stream_id))
            if winner is None:
                raise
            return Creation(winner, True)
        self._hot_runs.open(run_id).offer(events[events.index(created):])
        run_created(created)
        return Creation(run_id, False)

    async def state(self, run_id: UUID) -> Run:
        """The run's decision state, from the writer when there is one, else from the log."""
        writer = self._writers.get(run_id)
        if writer is not None:
            return writer.run
        run = fold(await self._store.read_stream(run_id))
        if run is None:
            raise RunNotFound(run_id.hex)
        return run

    async def writer(self, run_id: UUID) -> RunWriter:
        """The one writer of a run in this process (created on first use)."""
        writer = self._writers.get(run_id)
        if writer is not None:
            return writer
        lock = self._writer_locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            writer = self._writers.get(run_id)
            if writer is None:
                events = await self._store.read_stream(run_id)
                run = fold(events)
                if run is None:
                    raise RunNotFound(run_id.hex)
                writer = RunWriter(
                    self._store, self._hot_runs, run, coalesce_seconds=self.coalesce_seconds,
                    created_at=events[0].timestamp, on_appended=self.on_appended, turn_seconds=self.turn_seconds,
                    budget=self.budget,
                )
                self._writers[run_id] = writer
                self._hot_runs.writer_joined(run_id)
        return writer

    async def release(self, run_id: UUID) -> None:
        """Flush and forget a run's writer (when its execution stops)."""
        writer = self._writers.pop(run_id, None)
        self._writer_locks.pop(run_id, None)
        if writer is None:
            return
        try:
            await writer.flush()
        finally:
            self._hot_runs.writer_left(run_id)

    async def hot(self, run_id: UUID, *, first_page: bool = False) -> HotRun:
        """The run's in-memory projections (loaded from the log when cold; see HotRuns.get)."""
        hot = await self._hot_runs.get(run_id, first_page=first_page)
        if hot is None:
            raise RunNotFound(run_id.hex)
        return hot

    def follow(
        self, hot: HotRun, after: int, *, wants: Wants | None = None, idle: float, until: float,
    ) -> Feed:
        """The run's frames after `after`, memory first, then the store (`engine.runs.feed.follow`)."""
        return follow(self._hot_runs, hot, after, wants=wants, idle=idle, until=until)

    async def newest_position(self, hot: HotRun) -> int:
        """The run's newest position in the log, once `hot` has applied what this process had not seen of it yet
        (`HotRuns.catch_up`): what another replica appended is not waited for from the live tail."""
        return await self._hot_runs.catch_up(hot)

    async def last_position(self, run_id: UUID) -> int:
        """The position of the run's last stored event (0: no such run)."""
        return await self._store.last_position(run_id)

    async def unfinished(self) -> list[UUID]:
        """Runs that were started (or asked to cancel) and have not ended, in log order."""
        candidates: dict[UUID, None] = {}
        for tag in OPENING_TAGS:
            for event in await self._store.read_all(tag):
                candidates[event.originator_id] = None
        for tag in TERMINAL_TAGS:
            for event in await self._store.read_all(tag):
                candidates.pop(event.originator_id, None)
        return list(candidates)

    async def events(self, run_id: UUID, *, after: int = 0, limit: int | None = None) -> list[RunEvent]:
        """The run's events after a position (at most `limit` of them), straight from the log."""
        return await self._store.read_stream(run_id, after=after, limit=limit)

    async def stored_lines(self, run_id: UUID, *, after: int = 0, limit: int | None = None) -> list[StoredLine]:
        """The run's events after a position exactly as stored, with their chain cells (for exports)."""
        return await self._store.read_lines(run_id, after=after, limit=limit)

    async def chain_head(self, run_id: UUID) -> tuple[int, bytes] | None:
        """(position, link) of the run's last event, when it is chained (None: stored before the chain)."""
        head = await self._store.chain_head(run_id)
        return None if head is None or head[1] is None else (head[0], head[1])

    async def close(self) -> None:
        """Flush every writer; one that cannot flush is logged and does not stop the others."""
        for run_id in list(self._writers):
            try:
                await self.release(run_id)
            except Exception:
                logger.exception("run %s: buffered events could not be stored at shutdown", run_id.hex)
