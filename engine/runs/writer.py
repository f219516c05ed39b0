"""The single writer of one run in this process: decide, append, then publish, in order.

Thinking chunks are buffered for a short window (the coalescing window), in which consecutive
thinking chunks of one visit are merged (chunks of other visits in between do not break the run);
the first chunk of a visit, when nothing of the run is buffered and the store writes nothing, is
appended alone while its producer waits, so its readers have it after one commit (many runs at once
keep the store busy: there the chunk is buffered as any other); other chunks are appended as
soon as the loop turns and the run's append before them is stored,
and everything buffered then is appended in one transaction (appends of several runs made at
once share one: engine.store.append_groups). A run buffers at most its share of the process's
stream budget (engine.runs.budget) before it waits for the store. A producer that hands chunks over without ever
waiting (a scripted model at zero pace, a burst read from a network buffer) yields the event
loop once it has held it for the turn bound (`turn_seconds`), so other runs, streams and
requests take their turns between its chunks. When a full buffer is handed to the store, the
caller goes on buffering while it is written; at most one such append is in flight, and
the next starts only after it succeeded, so positions never skip. A scheduled flush is such a
hand-over too (it does not hold the writer while its append is written), and a producer at its
share that finds its buffer taken by then goes on at once.

Several processes may append to one run (on PostgreSQL, a command through another replica):
an append that loses the race (`ConcurrentAppend`) catches the state up from the log and
makes its decisions again against it, a bounded number of times. Events that another
process appended are folded in but not published here (the live tail delivers them). When
they are anything but control events from API commands while this process executes the run,
another process executes it too: the writer stops with `RunTakenOver`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from domain import events as ev
from domain.run import Run, StreamPiece, check_stream_chunk, evolve, evolve_all, stream_chunks
from engine.clock import utcnow
from engine.observability.lifecycle import runs_appended
from engine.observability.requests import stamped
from engine.runs.budget import StreamBudget
from engine.runs.hot_runs import HotRuns
from engine.store import AsyncEventStore, ConcurrentAppend

logger = logging.getLogger("flowtrail.writer")
MERGEABLE_KINDS = frozenset({"thinking"})
MAX_BUFFERED_CHUNKS = 2048
"""The stream chunks one run may buffer when no budget is given (engine.runs.budget shares one among runs)."""
DEFAULT_TURN_SECONDS = 0.002
"""How long one run's stream chunks may hold the event loop before they yield it (FLOWTRAIL_STREAM_TURN_MS)."""
MAX_CATCH_UPS = 8
"""Appends lost to another process's append in a row before the writer gives up (raises ConcurrentAppend)."""
CONTROL_EVENTS = (ev.RunStarted, ev.RunCancelRequested, ev.ClarifyAnswered, ev.WebhookAttempted, ev.WebhookAbandoned)
"""Events that API commands (and webhook deliveries) append; any other event from another process means it executes
the run."""

Decision = Callable[[Run, datetime], ev.RunEvent]
Appended = Callable[[Run, Sequence[ev.RunEvent]], None]
"""Told of every batch a writer appended, with the run's state after it (webhooks: engine.webhooks)."""
Recipe = Callable[[Run], list[ev.RunEvent]]
"""Makes an append's events from the run's current state (made again after a lost race)."""


class RunTakenOver(ConcurrentAppend):
    """Another process executes this run now; this process stops executing it and records nothing."""

    def __init__(self, run_id: str, foreign: str) -> None:
        super().__init__(f"run {run_id} is executed by another process (it appended {foreign})")
        self.run_id = run_id


class _Chunk:
    """A mergeable piece still growing (thinking); other kinds are buffered as StreamPiece."""

    __slots__ = ("visit_uuid", "node_id", "kind", "parts", "tool_name", "at")

    def __init__(self, visit_uuid: str, node_id: str, kind: str, content: str, tool_name: str | None, at: datetime):
        self.visit_uuid, self.node_id, self.kind, self.tool_name, self.at = visit_uuid, node_id, kind, tool_name, at
        self.parts = [content]

    def merges_with(self, visit_uuid: str, kind: str, tool_name: str | None) -> bool:
        return kind in MERGEABLE_KINDS and (self.visit_uuid, self.kind, self.tool_name) == (visit_uuid, kind, tool_name)

    def piece(self) -> StreamPiece:
        return StreamPiece(self.at, self.visit_uuid, self.node_id, self.kind, "".join(self.parts), self.tool_name)


class RunWriter:
    """Serialises every append to one run."""

    def __init__(
        self, store: AsyncEventStore, hot_runs: HotRuns, run: Run, *, coalesce_seconds: float,
        created_at: datetime | None = None, on_appended: Appended | None = None,
        turn_seconds: float = DEFAULT_TURN_SECONDS, budget: StreamBudget | None = None,
    ) -> None:
        self.store = store
        self.budget = budget or StreamBudget(MAX_BUFFERED_CHUNKS)
        self.created_at = created_at
        self.on_appended = on_appended
        self._hot_runs = hot_runs
        self.run = run
        self.coalesce_seconds = coalesce_seconds
        self._lock = asyncio.Lock()
        self._chunks: list[_Chunk | StreamPiece] = []
        self._last_of_visit: dict[str, _Chunk | StreamPiece] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._flush_waiting = False
        """A flush is scheduled and has not taken the buffer yet: it takes what is buffered by then."""
        self._flush_error: BaseException | None = None
        self._appending: asyncio.Future[list[ev.RunEvent]] | None = None
        self.chunks_received = 0
        self.turn_seconds = turn_seconds
        self._turn_began = time.perf_counter()
        self._visits_streamed: set[str] = set()
        """The visits whose first chunk this writer has taken (only a visit's first chunk may be appended alone)."""
        self.executing = False
        """True while this process executes the run (foreign execution events then mean a takeover)."""
        self.taken_over: RunTakenOver | None = None
        self._unsure: list[ev.RunEvent] = []
        """The events of the last append that failed: stored or not, the store could not say."""

    async def decide(self, *decisions: Decision) -> list[ev.RunEvent]:
        """Flush buffered chunks, then append the decisions' events in one transaction.

        A decision that refuses (raises) appends nothing, not even the ones before it.
        """
        async with self._lock:
            await self._flush_locked()
            at = utcnow()

            def recipe(run: Run) -> list[ev.RunEvent]:
                events = []
                for decision in decisions:
                    event = stamped(decision(run, at))
                    run = evolve(run, event)
                    events.append(event)
                return events

            self._start_append(recipe(self.run), recipe)
            return await self._settle()

    async def catch_up(self) -> None:
        """Fold in what other processes appended since this writer's state (waits for the append in flight)."""
        async with self._lock:
            await self._settle()
            await self._catch_up()

    async def stream(
        self, *, visit_uuid: str, node_id: str, kind: str, content: str, tool_name: str | None = None
    ) -> None:
        """Buffer one stream chunk; it is appended within the coalescing window."""
        if self.taken_over is not None:
            raise self.taken_over
        self._raise_flush_error()
        check_stream_chunk(self.run, visit_uuid, kind)
        self.chunks_received += 1
        first_of_visit = visit_uuid not in self._visits_streamed
        if first_of_visit:
            self._visits_streamed.add(visit_uuid)
        alone = first_of_visit and kind not in MERGEABLE_KINDS and not self._chunks and self._idle()
        last = self._last_of_visit.get(visit_uuid)
        if type(last) is _Chunk and last.merges_with(visit_uuid, kind, tool_name):
            last.parts.append(content)
        else:
            chunk: _Chunk | StreamPiece = (
                _Chunk(visit_uuid, node_id, kind, content, tool_name, utcnow()) if kind in MERGEABLE_KINDS
                else StreamPiece(utcnow(), visit_uuid, node_id, kind, content, tool_name)
            )
            if not self._chunks:
                self.budget.holds(self)
            self._chunks.append(chunk)
            self._last_of_visit[visit_uuid] = chunk
        if self.coalesce_seconds <= 0:
            await self.flush()
        elif alone:
            await self._append_alone()
        elif len(self._chunks) >= self.budget.share():
            await self._hand_over(self.budget.share())
        elif self._timer is None and not self._flush_waiting:
            window = self.coalesce_seconds if kind in MERGEABLE_KINDS else 0.0
            self._timer = asyncio.get_running_loop().call_later(window, self._flush_soon)
        await self._end_turn_when_due()

    def _idle(self) -> bool:
        """Nothing of the run is being written or about to be, and the store writes nothing: a chunk appended now
        waits for no other."""
        appending = self._appending
        return (self._timer is None and not self._flush_waiting and not self._lock.locked()
                and (appending is None or appending.done()) and not self.store.groups.writing)

    async def _append_alone(self) -> None:
        """Append the one buffered chunk and wait until it is stored; a new turn begins then.

        A visit's first chunk goes alone: its readers have it after one commit, while the producer waits (so
        the store's thread need not share the interpreter with it), instead of after the chunks a fast
        producer buffers behind it and the turns of the loop it holds meanwhile (its time to a first token).
        """
        async with self._lock:
            await self._settle()
            self._start_append(*self._take_buffer())
            await self._settle()
        self._turn_began = time.perf_counter()

    async def _end_turn_when_due(self) -> None:
        """Yield the event loop once this run's chunks have held it for the turn bound (the chunk is buffered)."""
        if time.perf_counter() - self._turn_began >= self.turn_seconds:
            await asyncio.sleep(0)
            self._turn_began = time.perf_counter()

    def _flush_soon(self) -> None:
        self._timer = None
        self._flush_waiting = True
        task = asyncio.ensure_future(self._hand_over())
        task.add_done_callback(self._remember_error)

    def _remember_error(self, task: asyncio.Future[None]) -> None:
        self._flush_waiting = False
        if not task.cancelled() and task.exception() is not None:
            self._flush_error = task.exception()

    def _raise_flush_error(self) -> None:
        if self._flush_error is not None:
            error, self._flush_error = self._flush_error, None
            raise error

    async def flush(self) -> None:
        """Append every buffered chunk now and wait until all of them are stored."""
        async with self._lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        await self._settle()
        self._start_append(*self._take_buffer())
        await self._settle()

    async def _hand_over(self, least: int = 1) -> None:
        """Start appending the buffer and return as soon as the append before it is stored; nothing
        when, by the time this caller has the lock, fewer than `least` chunks are buffered (another took them)."""
        async with self._lock:
            if len(self._chunks) < least:
                return
            await self._settle()
            self._start_append(*self._take_buffer())

    def _start_append(self, events: Sequence[ev.RunEvent], recipe: Recipe) -> None:
        """Append in a task of its own: a caller that is cancelled never cuts an append short,
        so the state always matches the log."""
        if self.taken_over is not None:
            raise self.taken_over
        if events:
            self._appending = asyncio.ensure_future(self._append(events, recipe))

    async def _settle(self) -> list[ev.RunEvent]:
        """Wait for the append in flight to end (its error is raised here, once); the events it appended."""
        appending = self._appending
        if appending is None:
            return []
        try:
            return await asyncio.shield(appending)
        finally:
            if appending.done() and self._appending is appending:
                self._appending = None

    def _take_buffer(self) -> tuple[list[ev.NodeStreamed], Recipe]:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        chunks, self._chunks, self._last_of_visit = self._chunks, [], {}
        self.budget.released(self)
        self._flush_waiting = False
        pieces = [c.piece() if isinstance(c, _Chunk) else c for c in chunks]

        def recipe(run: Run) -> list[ev.RunEvent]:
            return list(stream_chunks(run, pieces))

        return stream_chunks(self.run, pieces), recipe

    async def _append(self, events: Sequence[ev.RunEvent], recipe: Recipe) -> list[ev.RunEvent]:
        """Append the events, then take their fold as the state and publish them; after a lost race,
        catch up and append what the recipe makes of the new state."""
        for _ in range(MAX_CATCH_UPS):
            run = evolve_all(self.run, events)
            try:
                await self.store.append_to_stream(events)
            except ConcurrentAppend:
                await self._catch_up()
                events = recipe(self.run)
                if not events:
                    return []
                continue
            except Exception:
                self._unsure = list(events)
                raise
            self._unsure = []
            self._took(run, events)
            return list(events)
        raise ConcurrentAppend(f"run {self.run.id.hex}: lost {MAX_CATCH_UPS} appends in a row to other processes")

    def _took(self, run: Run, events: Sequence[ev.RunEvent]) -> None:
        """Events of this writer are in the log: their fold is the state; publish them and tell who follows appends."""
        self.run = run
        self._hot_runs.publish(events)
        runs_appended(run, events, self.created_at)
        if self.on_appended is not None:
            self.on_appended(run, events)

    async def _catch_up(self) -> None:
        """Fold in the events other processes appended; RunTakenOver when they execute the run."""
        foreign = await self.store.read_stream(self.run.id, after=self.run.version)
        own, self._unsure = self._unsure, []
        if own and foreign[:len(own)] == own:  # a failed append that was stored after all
            self._took(evolve_all(self.run, own), own)
            foreign = foreign[len(own):]
        executed = [e for e in foreign if not isinstance(e, CONTROL_EVENTS)]
        if executed and self.executing:
            self.taken_over = RunTakenOver(self.run.id.hex, type(executed[0]).__name__)
            self._chunks, self._last_of_visit = [], {}
            self.budget.released(self)
            logger.warning("%s; this process stops executing it", self.taken_over)
            raise self.taken_over
        self.run = evolve_all(self.run, foreign)
