"""GET /api/v1/workflows/{workflowName}/runs/{runId}/stream: the replayable SSE stream.

Both ways to follow a run (this endpoint, and a blocking creation's answer in api/runs.py) open
their stream here (`open_stream`): a per-key stream slot, the response deadline, then the run's
feed (engine/runs/feed.py) as Server-Sent Events.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from msgspec import UNSET

from api.dependencies import Injected, RunAccess
from api.errors import ApiError, validation_failed
from api.limits import KeyLimits, StreamSlot
from api.openapi import EventStreamOperation, stream_responses
from api.paths import WORKFLOW_RUN
from api.protocol import response_deadline
from api.schemas import RunIdInPath, WorkflowNameInPath
from api.sse import encode_frame
from engine.access import ApiKey, KeyRing, StandingAccess
from engine.context.views import ContextReader
from engine.observability.metrics import SSE_CLIENTS, SSE_MESSAGES
from engine.runs.feed import Feed, Signal
from engine.runs.hot import HotRun
from engine.runs.service import RunService
from engine.settings import Settings, StreamSettings
from projections.payloads import SnapshotPayload
from projections.sse import TERMINAL_EVENTS, SseMessage
from projections.visits import VisitIndex, visit_snapshot
from projections.wire import encode

KEEPALIVE = ServerSentEventMessage(comment="keep-alive", data=None)
SHUTTING_DOWN = ServerSentEventMessage(comment="server shutting down; reconnect with Last-Event-ID", data=None)
"""The last frame of a stream the server ends because it stops (a client tells it from a crash)."""
ACCESS_ENDED = ServerSentEventMessage(comment="access ended: the API key was removed or no longer reaches this run",
                                      data=None)
"""The last frame of a stream whose caller's key a reload of the keys removed or narrowed (a reconnect is refused)."""
EVENT_TYPES = (
    "node_status", "node_stream", "visit_recorded", "planner_decision", "workflow_complete", "workflow_error",
)
DEADLINE_GRACE_SECONDS = 1.0
"""A stream ends itself at its deadline; its connection is cut this long after, if its client took nothing since."""
MAX_FILTER_VALUES = 100
MAX_EVENT_ID_DIGITS = 19
"""A Last-Event-ID is a run position: ASCII digits, at most as many as a signed 64-bit integer has (decision 15)."""
LAST_EVENT_ID = HeaderParameter(
    name="Last-Event-ID", required=False,
    description=f"resume strictly after this run position: at most {MAX_EVENT_ID_DIGITS} ASCII digits, "
    "not beyond the run's last event (else 400 VALIDATION_FAILED)",
)


@dataclass(frozen=True)
class StreamFilter:
    """Which messages a client asked for: by event type and by node (None: all).

    Terminal events always pass, so a filtered stream still ends with its terminal event;
    run-level events (planner_decision) pass the node filter.
    """

    types: frozenset[str] | None = None
    nodes: frozenset[str] | None = None

    @property
    def active(self) -> bool:
        """True when some messages may be left out."""
        return self.types is not None or self.nodes is not None

    def allows(self, event: str, node_id: str | None) -> bool:
        """True when a message of this type, about this node (None: the run as a whole), goes to the client."""
        if event in TERMINAL_EVENTS:
            return True
        if self.types is not None and event not in self.types:
            return False
        return self.nodes is None or node_id is None or node_id in self.nodes

    @property
    def wants(self) -> Callable[[str, str | None], bool] | None:
        """The test for a hot run's `frames_after`; None when every message passes."""
        return self.allows if self.active else None


def _values(raw: str | None, what: str) -> frozenset[str] | None:
    if raw is None or not raw.strip():
        return None
    values = frozenset(v.strip() for v in raw.split(",") if v.strip())
    if len(values) > MAX_FILTER_VALUES:
        raise validation_failed(f"{what} lists more than {MAX_FILTER_VALUES} values")
    return values


def parse_filter(types: str | None, nodes: str | None) -> StreamFilter:
    """`types=node_status,node_stream` and `nodes=node-1,node-2` (comma-separated)."""
    wanted = _values(types, "types")
    unknown = sorted((wanted or frozenset()) - set(EVENT_TYPES))
    if unknown:
        raise validation_failed(
            f"unknown event type(s) {', '.join(unknown)[:200]}; expected some of {', '.join(EVENT_TYPES)}"
        )
    return StreamFilter(types=wanted, nodes=_values(nodes, "nodes"))


def parse_flag(raw: str | None, name: str) -> bool:
    """A boolean query parameter: true/false/1/0 (absent: false)."""
    if raw is None or raw.strip() == "":
        return False
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise validation_failed(f"{name} must be true or false, got {raw[:32]!r}")


def snapshot_frame(hot: HotRun, only: StreamFilter, index: VisitIndex | None = None) -> bytes:
    """One `snapshot` message: the run's state and every visit so far (of `index`, by default the hot
    run's own); its id is the run's position."""
    summary = hot.summary
    visits = [
        visit_snapshot(v) for v in (hot.sse.index if index is None else index).in_order()
        if only.nodes is None or v.node_id in only.nodes
    ]
    payload = SnapshotPayload(
        run_id=hot.run_id.hex,
        status=summary.external_status,
        cancel_requested=summary.cancel_requested,
        cancelled=summary.cancelled,
        current_pause=summary.current_pause,
        visits=visits,
        erased=True if hot.sse.erased else UNSET,
    )
    return encode_frame(SseMessage(hot.version, payload.type, encode(payload)))


class FrameBatch(ServerSentEventMessage):
    """Several messages already framed by Litestar, sent in one write."""

    def __init__(self, frames: list[bytes]) -> None:
        super().__init__(data=None)
        self.frames = frames

    def encode(self) -> bytes:
        """The frames as they were encoded."""
        return b"".join(self.frames)


def parse_last_event_id(raw: str | None, last_position: int) -> int:
    """The position to resume after; refuses what is not a number or lies beyond the run."""
    if raw is None or raw.strip() == "":
        return 0
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_EVENT_ID_DIGITS):
        raise validation_failed(
            f"Last-Event-ID must be a non-negative integer of at most {MAX_EVENT_ID_DIGITS} ASCII digits, "
            f"got {text[:32]!r}"
        )
    position = int(text)
    if position > last_position:
        raise validation_failed(
            f"Last-Event-ID {position} is beyond the run's last event ({last_position})"
        )
    return position


async def resume_cursor(runs: RunService, hot: HotRun, raw: str | None) -> int:
    """The `Last-Event-ID` to resume after, checked against the newest position known.

    What this process knows of a run can trail the log: another replica appends while the live
    tail brings its events here, and a run still loading knows the log's end from when its load
    began. An id beyond what is known here (another replica may have sent it already) is
    checked against the log, and the run catches up from the log at once.
    """
    try:
        return parse_last_event_id(raw, hot.known_last)
    except ApiError:
        if not (raw or "").strip().isdigit():
            raise  # not a position at all: the log has nothing to add
        return parse_last_event_id(raw, await runs.newest_position(hot))


class OpenStream:
    """A stream the caller may send: one of its key's stream slots taken, the response deadline armed, its access
    asked again after every reload of the keys."""

    def __init__(self, slot: StreamSlot, settings: StreamSettings, keys: KeyRing, caller: ApiKey) -> None:
        self._slot = slot
        self._keys, self._caller = keys, caller
        self._idle = settings.keepalive_seconds
        self._until = time.monotonic() + settings.max_stream_seconds

    def follow(
        self, runs: RunService, hot: HotRun, cursor: int, *, only: StreamFilter = StreamFilter(),
        snapshot: ContextReader | None = None,
    ) -> AsyncIterator[ServerSentEventMessage]:
        """The run's messages after `cursor` as SSE, until its terminal message or FLOWTRAIL_MAX_STREAM_SECONDS
        however far behind its client is, or until a reload of the keys leaves the caller without access to the
        run (at its next message or keep-alive); the slot is given back at the end.

        With `snapshot` (the reader that finds the visits of a run past its in-memory visit cap), a
        `snapshot` message of the run as it is now comes first and the stream goes on from there.
        """
        if snapshot is None:
            feed = runs.follow(hot, cursor, wants=only.wants, idle=self._idle, until=self._until)
        else:
            feed = snapshot_first(runs, hot, only, snapshot, idle=self._idle, until=self._until)
        return as_sse(feed, self._slot, StandingAccess(self._keys, self._caller, hot.summary.created))

    def close(self) -> None:
        """Give the slot back unused (the request failed before its stream began)."""
        self._slot.release()


def open_stream(
    caller: ApiKey, keys: KeyRing, limits: KeyLimits, request: Request[Any, Any, Any], settings: StreamSettings,
) -> OpenStream:
    """Take one of the caller's stream slots (TooManyStreams when its key holds FLOWTRAIL_MAX_STREAMS_PER_KEY) and
    arm the response deadline, so a client stuck past FLOWTRAIL_MAX_STREAM_SECONDS is cut (both stream paths)."""
    slot = limits.open_stream(caller)
    response_deadline(request.scope, settings.max_stream_seconds + DEADLINE_GRACE_SECONDS)
    return OpenStream(slot, settings, keys, caller)


async def snapshot_first(
    runs: RunService, hot: HotRun, only: StreamFilter, visits: ContextReader, *, idle: float, until: float,
) -> Feed:
    """A `snapshot` message of the run as it is now (plus its terminal message again, once it ended), then
    the feed from there."""
    cursor = hot.version
    index = await visits.index_at(hot, cursor)
    yield [snapshot_frame(hot, only, index), *hot.terminal_frames()]
    async with aclosing(runs.follow(hot, cursor, wants=only.wants, idle=idle, until=until)) as feed:
        async for item in feed:
            yield item


async def as_sse(feed: Feed, slot: StreamSlot, access: StandingAccess) -> AsyncIterator[ServerSentEventMessage]:
    """The feed as Server-Sent Events, while the caller's access holds; the stream slot is given back when it ends."""
    SSE_CLIENTS.inc()
    try:
        async with aclosing(feed):
            async for item in feed:
                if not access.holds():
                    yield ACCESS_ENDED
                    return
                if type(item) is list:  # a batch of frames; `type(x) is`, as on the hot path (engine/runs/hot.py)
                    yield _counted(FrameBatch(item))
                elif item is Signal.IDLE:
                    yield KEEPALIVE
                else:
                    yield SHUTTING_DOWN
    finally:
        SSE_CLIENTS.dec()
        slot.release()


def _counted(batch: FrameBatch) -> FrameBatch:
    SSE_MESSAGES.inc(len(batch.frames))
    return batch


class RunStreamController(Controller):
    """Live and replayed run events over Server-Sent Events."""

    path = WORKFLOW_RUN
    tags = ["runs"]

    @get(
        "/stream",
        operation_id="streamRun",
        summary="Follow a run over SSE; resume with Last-Event-ID",
        media_type="text/event-stream",
        responses=stream_responses(400, 404, 429),
        operation_class=EventStreamOperation,
    )
    async def stream(
        self,
        workflow_name: WorkflowNameInPath,
        run_id: RunIdInPath,
        request: Request[Any, Any, Any],
        caller: Injected[ApiKey],
        keys: Injected[KeyRing],
        run_access: Injected[RunAccess],
        runs: Injected[RunService],
        settings: Injected[Settings],
        context: Injected[ContextReader],
        limits: Injected[KeyLimits],
        last_event_id: Annotated[str | None, LAST_EVENT_ID] = None,
        snapshot: Annotated[str | None, QueryParameter(
            required=False, description="true: first send a `snapshot` message with the state of every visit "
            "(ignored with Last-Event-ID)")] = None,
        types: Annotated[str | None, QueryParameter(
            required=False, description="comma-separated event types to send (terminal events always come)")] = None,
        nodes: Annotated[str | None, QueryParameter(
            required=False, description="comma-separated node ids whose events to send")] = None,
    ) -> ServerSentEvent:
        """Every run event clients see, once, in order; ends after the terminal event (or after
        FLOWTRAIL_MAX_STREAM_SECONDS; a client that reads nothing is cut then too)."""
        wants_snapshot = parse_flag(snapshot, "snapshot") and not (last_event_id or "").strip()
        only = parse_filter(types, nodes)
        hot = await run_access.visible(caller, run_id, workflow_name, first_page=not wants_snapshot)
        cursor = await resume_cursor(runs, hot, last_event_id)
        stream = open_stream(caller, keys, limits, request, settings.stream)
        return ServerSentEvent(
            stream.follow(runs, hot, cursor, only=only, snapshot=context if wants_snapshot else None),
            headers={"X-Accel-Buffering": "no"},
        )


