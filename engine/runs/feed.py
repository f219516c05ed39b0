"""Following a run: its frames after a position, memory first, the store (a page at a time) for what memory dropped.

The feed is what a stream sends, as plain values: batches of frames, a signal that nothing
came for a while (a stream sends a keep-alive) and the server's closing (a stream says so and
ends). The HTTP edge turns them into Server-Sent Events.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from enum import Enum
from typing import TypeAlias

from engine.observability.metrics import REPLAY_READS
from engine.runs.hot import HotRun, Wants
from engine.runs.hot_runs import HotRuns
from engine.waiting import wait_event

Frames: TypeAlias = list[bytes]
"""Frames to send in one write, in order (a plain list: a batch costs the feed no object of its own)."""


class Signal(Enum):
    """What a feed says when it has no frames to give."""

    IDLE = "idle"
    """Nothing new came for `idle` seconds."""
    CLOSING = "closing"
    """The server is shutting down; the feed ends after this."""


Feed: TypeAlias = AsyncGenerator[Frames | Signal, None]
"""What a reader of a run receives, in order."""


async def follow(
    hot_runs: HotRuns, hot: HotRun, after: int, *, wants: Wants | None = None, idle: float, until: float,
) -> Feed:
    """The run's frames after position `after`, in order, until its terminal message, the time `until`
    (`time.monotonic`) or the server's closing, however far behind the reader is.

    Memory first; a reader behind what the run holds in memory is served from the store a page
    at a time (`HotRuns.replay`) until it catches up. `wants(event, node_id)` leaves messages out.
    """
    cursor, behind = after, False
    with hot.watch():
        while (left := until - time.monotonic()) > 0:
            if not hot.covers(cursor):
                if not behind:
                    REPLAY_READS.labels("behind_memory").inc()
                    behind = True
                frames, cursor = await hot_runs.replay(hot, cursor, wants=wants)
                if frames:
                    yield frames
                continue
            behind = False
            changed = hot.changed_event()
            frames, last = hot.frames_after(cursor, wants=wants)
            if last > cursor:
                cursor = last
                if frames:
                    yield frames
                continue
            if hot.ended_by(cursor):
                return
            if hot_runs.closing:
                yield Signal.CLOSING
                return
            if not await wait_event(changed, min(idle, left)) and until > time.monotonic():
                yield Signal.IDLE
