"""Hot runs: in-memory projections and SSE frames of the runs people are watching.

Messages are rendered and framed lazily: a message that needs no state of the run (a stream
chunk, a visit start, a terminal message) stays its event, and any message stays unframed,
until a client first reads it; a run nobody reads costs only its fold.

Events reach a hot run from the local writer right after each save and, on PostgreSQL,
from the live tail; duplicates are dropped by position and gaps are filled from the store.

A client behind the in-memory frames reads the store a page at a time (`HotRuns.replay`):
stateless messages are rendered from their events, and the messages that needed the run's
state (a visit's end, its record) are the hot run's own, kept when their frames are cut, so
a lagging client holds one page, not a fold of the run.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from domain.events import RunEvent
from engine.observability.metrics import REPLAY_READS
from projections.sse import (
    TERMINAL_EVENTS,
    SseMessage,
    SseProjection,
    Topic,
    is_stateless,
    message_topic,
    render_stateless,
)
from projections.summary import RunSummary

FrameEncoder = Callable[[SseMessage], bytes]
"""Frames one message as the stream sends it (the HTTP edge's SSE framing, given to the hot runs)."""


class HotRun:
    """One run's folded projections plus its recent SSE frames."""

    def __init__(self, run_id: UUID, *, max_frames: int, encode_frame: FrameEncoder) -> None:
        self.run_id = run_id
        self.encode_frame = encode_frame
        self.version = 0
        self.sse = SseProjection()
        self.summary = RunSummary()
        self.max_frames = max_frames
        self.ids: list[int] = []
        self.run_hex = run_id.hex
        self.frames: list[bytes | SseMessage | RunEvent] = []
        self.topics: list[Topic] = []
        self._topics: dict[Topic, Topic] = {}
        self.dropped_upto = 0
        self.kept: dict[int, tuple[Topic, bytes | SseMessage]] = {}
        """The messages rendered from the run's state, by id, kept after their frames are cut (replays need them)."""
        self.kept_missing_upto = 0
        """Kept messages up to this position were dropped with the frames of the finished run; a replay folds them back."""
        self.terminal_id: int | None = None
        self.pending: dict[int, RunEvent] = {}
        self.complete = False
        self.first_page = asyncio.Event()
        self.store_last = 0
        self._watchers = 0
        self._writers = 0
        self.touched = time.monotonic()
        self._changed = asyncio.Event()

    @property
    def watchers(self) -> int:
        """Streams reading this run now; the last one to leave a finished run releases its frames."""
        return self._watchers

    @watchers.setter
    def watchers(self, count: int) -> None:
        self._watchers = count
        self._release_if_finished()

    @property
    def writers(self) -> int:
        """Writers of this run in this process; the last one to go from a finished run releases its frames."""
        return self._writers

    @writers.setter
    def writers(self, count: int) -> None:
        self._writers = count
        self._release_if_finished()

    def _release_if_finished(self) -> None:
        """Drop the frames of a finished run nobody reads or writes, but its terminal message.

        The store serves them to any later reader (a stream whose cursor is before the cut
        reads the store, exactly as for frames dropped from a long run), so resume stays exact.
        """
        if self.terminal_id is None or self._watchers or self._writers or not self.complete:
            return
        self._cut(bisect.bisect_left(self.ids, self.terminal_id))
        if self.dropped_upto > self.kept_missing_upto:
            self.kept = {position: kept for position, kept in self.kept.items() if position > self.dropped_upto}
            self.kept_missing_upto = self.dropped_upto

    def _cut(self, cut: int) -> None:
        """Drop the first `cut` frames; the store serves them from now on."""
        if cut:
            self.dropped_upto = self.ids[cut - 1]
            del self.ids[:cut]
            del self.frames[:cut]
            del self.topics[:cut]

    @property
    def loaded(self) -> bool:
        """True once the run's first event was applied."""
        return self.version > 0

    @property
    def known_last(self) -> int:
        """The newest position known here: applied, or seen in the log when a load began."""
        return max(self.version, self.store_last)

    def offer(self, events: Iterable[RunEvent]) -> bool:
        """Apply new events in order; returns True when a gap is waiting to be filled."""
        for event in events:
            if event.originator_version > self.version:
                self.pending[event.originator_version] = event
        added = False
        while self.version + 1 in self.pending:
            self._apply(self.pending.pop(self.version + 1))
            added = True
        if added:
            self._notify()
        return bool(self.pending)

    def _apply(self, event: RunEvent) -> None:
        self.version = event.originator_version
        self.summary.apply(event)
        pending = self.sse.apply_deferring(event)
        if pending is None:
            return
        self.ids.append(event.originator_version)
        self.frames.append(pending)
        topic = message_topic(pending)
        topic = self._topics.setdefault(topic, topic)  # one tuple per (event, node) of the run
        self.topics.append(topic)
        if type(pending) is SseMessage:
            self.kept[event.originator_version] = (topic, pending)
        if topic[0] in TERMINAL_EVENTS:
            self.terminal_id = event.originator_version
        if len(self.ids) > self.max_frames + self.max_frames // 4:
            self._cut(len(self.ids) - self.max_frames)

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def covers(self, cursor: int) -> bool:
        """True when every frame after `cursor` is still in memory."""
        return cursor >= self.dropped_upto

    def frames_after(
        self, cursor: int, limit: int = 2000, wants: Callable[[str, str | None], bool] | None = None
    ) -> tuple[list[bytes], int]:
        """Frames with id > cursor (at most `limit` looked at) and the id of the last one looked at.

        A message is framed the first time any client needs it, then shared by all. A big
        message (a visit's closing status repeats its whole log) starts a batch of its own,
        so the frames before it are not held back while it is framed. `wants(event, node_id)`
        leaves out (and does not frame) the messages a client's filter refuses.
        """
        start = bisect.bisect_right(self.ids, cursor)
        end = min(len(self.ids), start + limit)
        if start >= end:
            return [], cursor
        frames, topics = self.frames, self.topics
        out: list[bytes] = []
        last = start
        for i in range(start, end):
            item = frames[i]
            # `type(item) is`, not isinstance: isinstance of a Struct class costs ~40 ns more, for every frame read.
            if out and type(item) is SseMessage and len(item.data) > BIG_MESSAGE_BYTES:
                break
            last = i
            if wants is not None and not wants(*topics[i]):
                continue
            if not isinstance(item, bytes):
                item = frames[i] = self._frame(self.ids[i], item)
            out.append(item)
        return out, self.ids[last]

    def _frame(self, position: int, item: SseMessage | RunEvent) -> bytes:
        """The frame of an unframed message; a kept message is kept framed from now on."""
        if type(item) is SseMessage:
            frame = self.encode_frame(item)
            self.kept[position] = (self.kept[position][0], frame)
            return frame
        return self.encode_frame(render_stateless(item, self.run_hex))  # type: ignore[arg-type]  # a stateless event

    def replayed(self, events: Sequence[RunEvent], wants: Callable[[str, str | None], bool] | None) -> list[bytes]:
        """The frames of stored events this run no longer holds in memory: stateless ones rendered
        anew, the others the run's kept messages; silent events have none."""
        out: list[bytes] = []
        for event in events:
            position = event.originator_version
            kept = self.kept.get(position)
            if kept is not None:
                topic, item = kept
                if wants is None or wants(*topic):
                    out.append(item if isinstance(item, bytes) else self._frame(position, item))
            elif is_stateless(event) and (wants is None or wants(*message_topic(event))):
                out.append(self.encode_frame(render_stateless(event, self.run_hex)))
        return out

    def changed_event(self) -> asyncio.Event:
        """The event that the next change will set (take it before reading frames)."""
        return self._changed


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
FIRST_PAGE = 200
LOAD_PAGE = 2000
FOLD_SLICE = 250
REPLAY_PAGE = 1000
"""Events a client behind the memory buffer reads from the store at a time."""
BIG_MESSAGE_BYTES = 64 * 1024


class HotRuns:
    """The set of hot runs in this process."""

    def __init__(
        self, read: Reader, last_position: LastPosition, *, max_frames: int, retention_seconds: float,
        encode_frame: FrameEncoder,
    ) -> None:
        self._read = read
        self._last_position = last_position
        self.encode_frame = encode_frame
        self.max_frames = max_frames
        self.retention_seconds = retention_seconds
        self.runs: dict[UUID, HotRun] = {}
        self._loading: dict[UUID, asyncio.Future[HotRun | None]] = {}
        self._refolding: dict[UUID, asyncio.Future[None]] = {}
        self.closing = False
        """True once the server is shutting down: open streams send what they have and end."""

    def close_streams(self) -> None:
        """Ask every open stream to send what it has and end (the server is shutting down)."""
        self.closing = True
        for hot in self.runs.values():
            hot._notify()

    def is_hot(self, run_id: UUID) -> bool:
        """True when this process keeps the run in memory."""
        return run_id in self.runs

    def wants(self, run_id: UUID, position: int) -> bool:
        """True when the run is hot here and has not applied the event at `position` yet."""
        hot = self.runs.get(run_id)
        return hot is not None and position > hot.version

    def open(self, run_id: UUID) -> HotRun:
        """Register a brand-new run (its creator will publish its first events)."""
        hot = HotRun(run_id, max_frames=self.max_frames, encode_frame=self.encode_frame)
        hot.complete = True
        self.runs[run_id] = hot
        return hot

    def publish(self, events: Sequence[RunEvent]) -> None:
        """Offer newly stored events to the hot runs they belong to."""
        for run_id, run_events in _by_run(events).items():
            hot = self.runs.get(run_id)
            if hot is not None and hot.offer(run_events) and hot.complete:
                asyncio.ensure_future(self._fill_gap(hot))

    async def _fill_gap(self, hot: HotRun) -> None:
        hot.offer(await self._read(hot.run_id, hot.version, None))

    async def replay(
        self, hot: HotRun, cursor: int, *, wants: Callable[[str, str | None], bool] | None = None,
        limit: int = REPLAY_PAGE,
    ) -> tuple[list[bytes], int]:
        """One page of what `hot` no longer holds after `cursor`, read from the store: its frames and
        the position the page ends at (at most `dropped_upto`, where memory takes over)."""
        upto = hot.dropped_upto
        if cursor >= upto:
            return [], cursor
        if cursor < hot.kept_missing_upto:
            await self._kept_back(hot)
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
        fold = HotRun(hot.run_id, max_frames=FOLD_SLICE, encode_frame=self.encode_frame)
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
        hot = self.runs.get(run_id)
        if hot is not None and hot.complete:
            hot.touched = time.monotonic()
            return hot
        loading = self._loading.get(run_id)
        if loading is None:
            hot = hot or HotRun(run_id, max_frames=self.max_frames, encode_frame=self.encode_frame)
            self.runs[run_id] = hot
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
                self.runs.pop(run_id, None)
                return None
            hot.complete = True
            hot.touched = time.monotonic()
            return hot
        except BaseException:
            self.runs.pop(run_id, None)
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
            run_id for run_id, hot in self.runs.items()
            if hot.watchers == 0 and hot.writers == 0
            and now - hot.touched >= self.retention_seconds
        ]
        for run_id in idle:
            del self.runs[run_id]
        return len(idle)
