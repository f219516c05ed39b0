"""The hot runs of this process: loaded from the store on first read, fed by writers and the live tail, evicted idle.

Events reach a hot run from the local writer right after each save and, on PostgreSQL,
from the live tail; duplicates are dropped by position and gaps are filled from the store.

A client behind the in-memory frames reads the store a page at a time (`HotRuns.replay`):
stream pieces are framed from their stored JSON (engine/runs/raw_frames.py), other stateless
messages are rendered from their events, and the messages that needed the run's state (a
visit's end, its record) are the hot run's own, kept when their frames are cut, so a lagging
client holds one page, not a fold of the run.

A finished run leaves memory whole once no stream reads it and no writer holds it (decision
0045); one loaded again for a read keeps its fold, not its frames, for the retention time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol
from uuid import UUID

from domain.events import RunErased, RunEvent
from engine.clock import utcnow
from engine.observability.metrics import REPLAY_READS
from engine.runs.heap import HeapTrim
from engine.runs.hot import KEPT_EVENTS, FrameEncoder, HotRun, StoredRow, Wants
from projections.visits import VisitIndex


def _by_run(events: Sequence[RunEvent]) -> Mapping[UUID, Sequence[RunEvent]]:
    """Events grouped by run, each group in order (a writer's batch is one run: one lookup)."""
    if not events:
        return {}
    first = events[0].originator_id
    if all(event.originator_id is first for event in events):
        return {first: events}
    grouped: dict[UUID, list[RunEvent]] = {}
    for event in events:
        grouped.setdefault(event.originator_id, []).append(event)
    return grouped


Reader = Callable[[UUID, int, "int | None"], Awaitable[list[RunEvent]]]
LastPosition = Callable[[UUID], Awaitable[int]]


class StoredRows(Protocol):
    """A run's log as stored, for replays that frame stream pieces without decoding them."""

    async def read_rows(self, stream_id: UUID, *, after: int = 0, limit: int | None = None) -> list[StoredRow]:
        """(position, tag, JSON) of the stream's rows after `after`, in order (at most `limit`)."""
        ...

    def decode_row(self, state: bytes, topic: str, position: int) -> RunEvent:
        """The event a stored row holds."""
        ...


FIRST_PAGE = 200
LOAD_PAGE = 2000
FOLD_SLICE = 250
REPLAY_PAGE = 1000
"""Events a client behind the memory buffer reads from the store at a time."""


class HotRuns:
    """The set of hot runs in this process."""

    def __init__(
        self, read: Reader, last_position: LastPosition, *, max_frames: int, retention_seconds: float,
        encode_frame: FrameEncoder, rows: StoredRows | None = None,
    ) -> None:
        self._read = read
        self._rows = rows
        self._heap = HeapTrim()
        self._last_position = last_position
        self._encode_frame = encode_frame
        self._max_frames = max_frames
        self._retention_seconds = retention_seconds
        self._runs: dict[UUID, HotRun] = {}
        self._loading: dict[UUID, asyncio.Future[HotRun | None]] = {}
        self._refolding: dict[UUID, asyncio.Future[None]] = {}
        self.closing = False
        """True once the server is shutting down: open streams send what they have and end."""

    def close_streams(self) -> None:
        """Ask every open stream to send what it has and end (the server is shutting down)."""
        self.closing = True
        for hot in self._runs.values():
            hot.wake()

    def __len__(self) -> int:
        """How many runs this process keeps in memory."""
        return len(self._runs)

    def __iter__(self) -> Iterator[HotRun]:
        """The runs this process keeps in memory now."""
        return iter(list(self._runs.values()))

    def is_hot(self, run_id: UUID) -> bool:
        """True when this process keeps the run in memory."""
        return run_id in self._runs

    def find(self, run_id: UUID) -> HotRun | None:
        """The run if this process keeps it in memory (loaded or loading), else None; never reads the store."""
        return self._runs.get(run_id)

    def _new(self, run_id: UUID) -> HotRun:
        hot = HotRun(run_id, max_frames=self._max_frames, encode_frame=self._encode_frame)
        hot.on_released = self._forget_released
        return hot

    def _forget_released(self, hot: HotRun) -> None:
        """A finished run nobody reads or writes leaves memory whole, its fold too (what a finished run kept was
        ~500 B an event, most of it its visits' logs); its next reader loads it from the store, exactly."""
        if self._runs.get(hot.run_id) is hot and hot.run_id not in self._loading and hot.run_id not in self._refolding:
            del self._runs[hot.run_id]
            self._heap.soon()

    def forget(self, run_id: UUID) -> None:
        """Drop the run from memory at once (its next reader loads it from the store)."""
        self._runs.pop(run_id, None)

    def wants(self, run_id: UUID, position: int) -> bool:
        """True when the run is hot here and has not applied the event at `position` yet."""
        hot = self._runs.get(run_id)
        return hot is not None and position > hot.version

    def index_of(self, run_id: UUID, *, ended_within: timedelta) -> VisitIndex | None:
        """Every visit of a loaded hot run, while it runs and for `ended_within` after it ended; else None
        (not hot here, still loading, past its visit cap, or ended longer ago)."""
        hot = self._runs.get(run_id)
        if hot is None or not hot.complete:
            return None
        ended = hot.summary.completed_at
        if ended is not None and utcnow() - ended >= ended_within:
            return None
        return hot.full_index()

    def writer_joined(self, run_id: UUID) -> None:
        """A writer of the run began in this process (a finished run keeps its frames while it writes)."""
        hot = self._runs.get(run_id)
        if hot is not None:
            hot.writer_joined()

    def writer_left(self, run_id: UUID) -> None:
        """A writer of the run in this process went."""
        hot = self._runs.get(run_id)
        if hot is not None:
            hot.writer_left()

    def open(self, run_id: UUID) -> HotRun:
        """Register a brand-new run (its creator will publish its first events)."""
        hot = self._new(run_id)
        hot.complete = True
        self._runs[run_id] = hot
        return hot

    def publish(self, events: Sequence[RunEvent]) -> None:
        """Offer newly stored events to the hot runs they belong to; an erased run is dropped (its next reader
        loads what the log keeps of it)."""
        for run_id, run_events in _by_run(events).items():
            if type(run_events[-1]) is RunErased:
                self.forget(run_id)
                continue
            hot = self._runs.get(run_id)
            if hot is not None and hot.offer(run_events) and hot.complete:
                asyncio.ensure_future(self.catch_up(hot))

    async def catch_up(self, hot: HotRun) -> int:
        """Apply what the log holds of the run beyond what this process applied (another process appended it and
        the live tail has not brought it yet, or a gap); the newest position the log has.

        A run still loading gets those events from its load: for it, the log is only asked its last position.
        """
        if not hot.complete:
            return max(hot.known_last, await self._last_position(hot.run_id))
        hot.offer(await self._read(hot.run_id, hot.version, None))
        return hot.version

    async def replay(
        self, hot: HotRun, cursor: int, *, wants: Wants | None = None,
        limit: int = REPLAY_PAGE,
    ) -> tuple[list[bytes], int]:
        """One page of what `hot` no longer holds after `cursor`, read from the store: its frames and
        the position the page ends at (at most `dropped_upto`, where memory takes over)."""
        upto = hot.dropped_upto
        if cursor >= upto:
            return [], cursor
        if cursor < hot.kept_missing_upto and (wants is None or any(wants(event, None) for event in KEPT_EVENTS)):
            await self._kept_back(hot)
        if self._rows is not None:
            rows = await self._rows.read_rows(hot.run_id, after=cursor, limit=min(limit, upto - cursor))
            rows = [row for row in rows if row[0] <= upto]
            if not rows:
                return [], upto
            return hot.replayed_rows(rows, wants, self._rows.decode_row), rows[-1][0]
        events = await self._read(hot.run_id, cursor, min(limit, upto - cursor))
        events = [event for event in events if event.originator_version <= upto]
        if not events:
            return [], upto
        return hot.replayed(events, wants), events[-1].originator_version

    async def _kept_back(self, hot: HotRun) -> None:
        """Fold a finished run's dropped kept messages back from the store (one fold for all its readers)."""
        refolding = self._refolding.get(hot.run_id)
        if refolding is None:
            refolding = self._refolding[hot.run_id] = asyncio.ensure_future(self._refold(hot))
            refolding.add_done_callback(lambda _: self._refolding.pop(hot.run_id, None))
        await asyncio.shield(refolding)

    async def _refold(self, hot: HotRun) -> None:
        upto, after = hot.kept_missing_upto, 0
        fold = HotRun(hot.run_id, max_frames=FOLD_SLICE, encode_frame=self._encode_frame)
        while after < upto:
            page = await self._read(hot.run_id, after, min(LOAD_PAGE, upto - after))
            if not page:
                break
            for start in range(0, len(page), FOLD_SLICE):
                await asyncio.sleep(0)
                fold.offer(page[start:start + FOLD_SLICE])
            after = page[-1].originator_version
        hot.kept.update({position: kept for position, kept in fold.kept.items() if position <= upto})
        hot.kept_missing_upto = 0

    async def get(self, run_id: UUID, *, first_page: bool = False) -> HotRun | None:
        """The run's hot state, loading it from the store if needed (None: no such run).

        With `first_page`, a run being loaded is returned as soon as its first page is
        applied (its `complete` is False until the rest follows); a stream can start at once.
        """
        hot = self._runs.get(run_id)
        if hot is not None and hot.complete:
            hot.touched = time.monotonic()
            return hot
        loading = self._loading.get(run_id)
        if loading is None:
            hot = hot or self._new(run_id)
            self._runs[run_id] = hot
            loading = asyncio.ensure_future(self._load(hot))
            self._loading[run_id] = loading
        if first_page and hot is not None:
            page = asyncio.ensure_future(hot.first_page.wait())
            either: set[asyncio.Future[Any]] = {loading, page}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            page.cancel()
            if not loading.done():
                return hot if hot.loaded else await asyncio.shield(loading)
        return await asyncio.shield(loading)

    async def _load(self, hot: HotRun) -> HotRun | None:
        """Fold the run from the store page by page; the first page wakes `first_page` waiters.

        The next page is read while the current one is folded, a slice at a time, so the
        event loop is never held for long (streams write between slices).
        """
        run_id, following = hot.run_id, None
        REPLAY_READS.labels("cold_load").inc()
        try:
            page, hot.store_last = await asyncio.gather(self._read(run_id, 0, FIRST_PAGE), self._last_position(run_id))
            size = FIRST_PAGE
            while True:
                if len(page) == size:
                    following = asyncio.ensure_future(self._read(run_id, page[-1].originator_version, LOAD_PAGE))
                for start in range(0, len(page), FOLD_SLICE):
                    if start:
                        await asyncio.sleep(0)
                    hot.offer(page[start:start + FOLD_SLICE])
                hot.first_page.set()
                if following is None:
                    break
                page, size, following = await following, LOAD_PAGE, None
            if not hot.loaded:
                self._runs.pop(run_id, None)
                return None
            hot.complete = True
            hot.touched = time.monotonic()
            hot.drop_frames_if_finished()  # a finished run loaded for a read keeps its fold for the retention time
            return hot
        except BaseException:
            self._runs.pop(run_id, None)
            if following is not None:
                following.cancel()
            raise
        finally:
            hot.first_page.set()
            self._loading.pop(run_id, None)

    def evict_idle(self, now: float | None = None) -> int:
        """Drop runs nobody watched or wrote for the retention time; returns how many."""
        now = time.monotonic() if now is None else now
        idle = [
            run_id for run_id, hot in self._runs.items()
            if hot.watchers == 0 and hot.writers == 0
            and now - hot.touched >= self._retention_seconds
        ]
        for run_id in idle:
            del self._runs[run_id]
        return len(idle)
