"""The run writer as the engine uses it: every append shielded from task cancellation.

A task cancelled while its append is in flight must not leave the writer unsure whether
the events were stored; shielding lets the append finish (and the writer fold it) while
the cancelled task moves on. A stream chunk that the writer only buffers is handed over
directly (its one suspension point, the end of a turn, comes after the chunk is buffered);
the journal counts the chunks since its last append (never fewer than the writer holds) to
know when the writer may flush.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from domain.events import RunEvent
from domain.run import Run
from engine.runs.writer import MAX_BUFFERED_CHUNKS, Decision, RunWriter


class Journal:
    """Appends to one run through its writer; pending appends are tracked so shutdown can wait for them."""

    def __init__(self, writer: RunWriter, inflight: set[asyncio.Future[Any]]) -> None:
        self.writer = writer
        self._inflight = inflight
        self._unflushed = 0

    @property
    def run(self) -> Run:
        """The run's state after everything appended so far."""
        return self.writer.run

    async def decide(self, *decisions: Decision, then: Callable[[list[RunEvent]], None] | None = None) -> list[RunEvent]:
        """Append the decisions' events in one transaction; `then` sees them as soon as they are stored, even when
        the awaiting task was cancelled meanwhile (so what it folds never lags the log)."""
        self._unflushed = 0
        return await self._shielded(self._decide_then(decisions, then))

    async def _decide_then(self, decisions: tuple[Decision, ...], then: Callable[[list[RunEvent]], None] | None,
                           ) -> list[RunEvent]:
        events = await self.writer.decide(*decisions)
        if then is not None:
            then(events)
        return events

    async def stream(self, *, visit_uuid: str, node_id: str, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append (buffered) one stream chunk of a visit."""
        step = self.writer.stream(visit_uuid=visit_uuid, node_id=node_id, kind=kind, content=content, tool_name=tool_name)
        self._unflushed += 1
        if self.writer.coalesce_seconds > 0 and self._unflushed < MAX_BUFFERED_CHUNKS:
            await step
            return
        self._unflushed = 0
        await self._shielded(step)

    async def flush(self) -> None:
        """Append every buffered chunk now."""
        self._unflushed = 0
        await self._shielded(self.writer.flush())

    async def _shielded(self, step: Awaitable[Any]) -> Any:
        task = asyncio.ensure_future(step)
        self._inflight.add(task)
        task.add_done_callback(self._settled)
        return await asyncio.shield(task)

    def _settled(self, task: asyncio.Future[Any]) -> None:
        self._inflight.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the awaiting task reports it, unless it was cancelled meanwhile
