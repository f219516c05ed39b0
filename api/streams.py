"""GET /api/v1/workflows/{workflowName}/runs/{runId}/stream: the replayable SSE stream."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, AsyncIterator

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import FromPath, HeaderParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from api.access import visible_run
from api.errors import validation_failed
from engine.bootstrap import Services
from engine.live import HotRun, encode_frame
from engine.settings import ApiKey
from projections.sse import render_all

KEEPALIVE = ServerSentEventMessage(comment="keep-alive", data=None)


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
    if not text.isdigit():
        raise validation_failed(f"Last-Event-ID must be a non-negative integer, got {text[:32]!r}")
    position = int(text)
    if position > last_position:
        raise validation_failed(
            f"Last-Event-ID {position} is beyond the run's last event ({last_position})"
        )
    return position


async def stream_frames(services: Services, hot: HotRun, cursor: int) -> AsyncIterator[ServerSentEventMessage]:
    """The run's messages after `cursor`: memory first, the store for what memory dropped."""
    keepalive = services.settings.stream.keepalive_seconds
    deadline = time.monotonic() + services.settings.stream.max_stream_seconds
    hot.watchers += 1
    try:
        if not hot.covers(cursor):
            events = await services.runs.events(hot.run_id)
            messages = render_all(events, after=cursor)
            for start in range(0, len(messages), 1000):
                part = messages[start:start + 1000]
                yield FrameBatch([encode_frame(m) for m in part])
                cursor = part[-1].id
        while True:
            changed = hot.changed_event()
            frames, last = hot.frames_after(cursor)
            if frames:
                cursor = last
                yield FrameBatch(frames)
                continue
            if hot.terminal_id is not None and cursor >= hot.terminal_id or time.monotonic() >= deadline:
                return
            try:
                await asyncio.wait_for(changed.wait(), keepalive)
            except asyncio.TimeoutError:
                yield KEEPALIVE
    finally:
        hot.watchers -= 1


class RunStreamController(Controller):
    """Live and replayed run events over Server-Sent Events."""

    path = "/api/v1/workflows/{workflow_name:str}/runs/{run_id:str}"
    tags = ["runs"]

    @get(
        "/stream",
        operation_id="streamRun",
        summary="Follow a run over SSE; resume with Last-Event-ID",
        media_type="text/event-stream",
    )
    async def stream(
        self,
        workflow_name: FromPath[str],
        run_id: FromPath[str],
        caller: NamedDependency[ApiKey],
        services: NamedDependency[Services],
        last_event_id: Annotated[str | None, HeaderParameter(name="Last-Event-ID", required=False)] = None,
    ) -> ServerSentEvent:
        """Every run event clients see, once, in order; ends after the terminal event."""
        hot = await visible_run(services, caller, run_id, workflow_name)
        cursor = parse_last_event_id(last_event_id, hot.version)
        return ServerSentEvent(stream_frames(services, hot, cursor), headers={"X-Accel-Buffering": "no"})


