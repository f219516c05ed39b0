"""A hot run: one run's in-memory projections and recent SSE frames (for the runs people are watching).

Messages are rendered and framed lazily: a message that needs no state of the run (a stream
chunk, a visit start, a terminal message) stays its event, and any message stays unframed,
until a client first reads it; a run nobody reads costs only its fold.

The messages that needed the run's state (a visit's end, its record) are the hot run's own,
kept when their frames are cut, so a replay from the store can send them (`HotRuns.replay`).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from uuid import UUID

from domain.events import RunEvent
from engine.runs.raw_frames import EVENT, STREAM_TAG, stream_message
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
from projections.timeline import RunTimeline
from projections.visits import VisitIndex

FrameEncoder = Callable[[SseMessage], bytes]
"""Frames one message as the stream sends it (the HTTP edge's SSE framing, given to the hot runs)."""
Wants = Callable[[str, str | None], bool]
"""A reader's filter: True when it wants a message of this event type about this node (None: the run)."""
StoredRow = tuple[int, str, bytes]
"""(position, stored tag, the event's JSON as stored) of one row of a run's log."""
RowDecoder = Callable[[bytes, str, int], RunEvent]
"""Decodes a stored row's JSON (state, tag, position) into its event."""
KEPT_EVENTS = ("node_status", "visit_recorded")
"""The event types of the messages a run renders from its state (a visit's end, its record): the ones it keeps.
A reader refusing both for the run as a whole (node None) refuses them for every node (run-level messages pass
a node filter), so its replay needs no fold of them."""
BIG_MESSAGE_BYTES = 64 * 1024
"""A message this big starts a batch of its own (see `HotRun.frames_after`)."""


class HotRun:
    """One run's folded projections plus its recent SSE frames."""

    def __init__(self, run_id: UUID, *, max_frames: int, encode_frame: FrameEncoder) -> None:
        self.run_id = run_id
        self._encode_frame = encode_frame
        self.version = 0
        self.sse = SseProjection()
        self.summary = RunSummary()
        self.timeline = RunTimeline()
        """When each visit ran and waited, and its tokens (GET /runs/{runId}/timeline)."""
        self._max_frames = max_frames
        self.ids: list[int] = []
        """The positions of the frames in memory, in order (`_frames` and `_topics` run beside it)."""
        self._run_hex = run_id.hex
        self._frames: list[bytes | SseMessage | RunEvent] = []
        self._topics: list[Topic] = []
        self._interned: dict[Topic, Topic] = {}
        self.dropped_upto = 0
        self.kept: dict[int, tuple[Topic, bytes | SseMessage]] = {}
        """The messages rendered from the run's state, by id, kept after their frames are cut (replays need them)."""
        self.kept_missing_upto = 0
        """Kept messages up to this position were dropped with the frames of the finished run; a replay folds them back."""
        self.terminal_id: int | None = None
        self._pending: dict[int, RunEvent] = {}
        self.complete = False
        self.first_page = asyncio.Event()
        self.store_last = 0
        self._watchers = 0
        self._writers = 0
        self.touched = time.monotonic()
        self.on_released: Callable[[HotRun], None] | None = None
        """Told when the last reader or writer of the finished run left (its holder forgets it)."""
        self._changed = asyncio.Event()

    @property
    def watchers(self) -> int:
        """Streams reading this run now; the last one to leave a finished run releases its frames."""
        return self._watchers

    @contextmanager
    def watch(self) -> Iterator[HotRun]:
        """Count a reader of this run while the block runs (its frames stay in memory until the last one leaves)."""
        self._watchers += 1
        try:
            yield self
        finally:
            self._watchers -= 1
            self._release_if_finished()

    @property
    def writers(self) -> int:
        """Writers of this run in this process; the last one to go from a finished run releases its frames."""
        return self._writers

    def writer_joined(self) -> None:
        """Count a writer of this run in this process."""
        self._writers += 1

    def writer_left(self) -> None:
        """A writer of this run went (never below none); the last one to go from a finished run releases its frames."""
        self._writers = max(0, self._writers - 1)
        self._release_if_finished()

    def _release_if_finished(self) -> None:
        """The last reader or writer left: a finished run drops its frames (`drop_frames_if_finished`) and its
        holder is told (`on_released`: it forgets the run, whose next reader loads it from the store)."""
        if self.drop_frames_if_finished() and self.on_released is not None:
            self.on_released(self)

    def drop_frames_if_finished(self) -> bool:
        """Drop the frames of a finished run nobody reads or writes, but its terminal message; True if it is such a run.

        The store serves them to any later reader (a stream whose cursor is before the cut
        reads the store, exactly as for frames dropped from a long run), so resume stays exact.
        """
        if self.terminal_id is None or self._watchers or self._writers or not self.complete:
            return False
        self._cut(bisect.bisect_left(self.ids, self.terminal_id))
        if self.dropped_upto > self.kept_missing_upto:
            self.kept = {position: kept for position, kept in self.kept.items() if position > self.dropped_upto}
            self.kept_missing_upto = self.dropped_upto
        return True

    def _cut(self, cut: int) -> None:
        """Drop the first `cut` frames; the store serves them from now on."""
        if cut:
            self.dropped_upto = self.ids[cut - 1]
            del self.ids[:cut]
            del self._frames[:cut]
            del self._topics[:cut]

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
                self._pending[event.originator_version] = event
        added = False
        while self.version + 1 in self._pending:
            self._apply(self._pending.pop(self.version + 1))
            added = True
        if added:
            self.wake()
        return bool(self._pending)

    def _apply(self, event: RunEvent) -> None:
        self.version = event.originator_version
        self.summary.apply(event)
        self.timeline.apply(event)
        pending = self.sse.apply_deferring(event)
        if pending is None:
            return
        self.ids.append(event.originator_version)
        self._frames.append(pending)
        topic = message_topic(pending)
        topic = self._interned.setdefault(topic, topic)  # one tuple per (event, node) of the run
        self._topics.append(topic)
        if type(pending) is SseMessage:
            self.kept[event.originator_version] = (topic, pending)
        if topic[0] in TERMINAL_EVENTS:
            self.terminal_id = event.originator_version
        if len(self.ids) > self._max_frames + self._max_frames // 4:
            self._cut(len(self.ids) - self._max_frames)

    def wake(self) -> None:
        """Wake every reader waiting for a change (after new events, or when the server is closing)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def ended_by(self, cursor: int) -> bool:
        """True when a reader at `cursor` has had the run's terminal message."""
        return self.terminal_id is not None and cursor >= self.terminal_id

    def terminal_frames(self) -> list[bytes]:
        """The run's terminal message, framed (none while the run goes on)."""
        if self.terminal_id is None:
            return []
        return self.frames_after(self.terminal_id - 1, limit=1)[0]

    def covers(self, cursor: int) -> bool:
        """True when every frame after `cursor` is still in memory."""
        return cursor >= self.dropped_upto

    def frames_after(
        self, cursor: int, limit: int = 2000, wants: Wants | None = None
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
        frames, topics = self._frames, self._topics
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
        if isinstance(item, SseMessage):
            frame = self._encode_frame(item)
            self.kept[position] = (self.kept[position][0], frame)
            return frame
        return self._encode_frame(render_stateless(item, self._run_hex, self.sse.erased))

    def replayed(self, events: Sequence[RunEvent], wants: Wants | None) -> list[bytes]:
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
                out.append(self._encode_frame(render_stateless(event, self._run_hex, self.sse.erased)))
        return out

    def replayed_rows(self, rows: Sequence[StoredRow], wants: Wants | None, decode: RowDecoder) -> list[bytes]:
        """`replayed` for rows as stored: a stream piece is framed from its stored JSON, any other row decoded."""
        out: list[bytes] = []
        run_hex = self._run_hex.encode()
        for position, tag, state in rows:
            message = None
            if tag == STREAM_TAG and not self.sse.erased and position not in self.kept:
                message = stream_message(position, state, run_hex)
            if message is None:
                out.extend(self.replayed([decode(state, tag, position)], wants))
            elif wants is None or wants(EVENT, message.node_id):
                out.append(self._encode_frame(message))
        return out

    def full_index(self) -> VisitIndex | None:
        """Every visit of the run so far; None once its index reached its visit cap (the log has the rest)."""
        index = self.sse.index
        return None if index.overflowed else index

    def changed_event(self) -> asyncio.Event:
        """The event that the next change will set (take it before reading frames)."""
        return self._changed
