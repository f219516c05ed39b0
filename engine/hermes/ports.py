"""What a remote agent needs from the visit it answers for: its stream, its cancel signal, and the log of its gateway runs.

The engine implements both Protocols (engine.execution.remote); this package imports nothing of
execution. The log's facts about a visit's gateway runs come back as `RemoteRunRecord`s, so a
visit resumed after a crash, a takeover or a restart knows which gateway run it was following.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import msgspec

from domain import events as ev
from domain.vocabulary import RemoteRunOutcome

REMOTE_EVENTS = (ev.RemoteRunRequested, ev.RemoteRunAccepted, ev.RemoteRunStopRequested, ev.RemoteRunEnded)
"""The events that record a visit's gateway runs."""
RemoteEvent = ev.RemoteRunRequested | ev.RemoteRunAccepted | ev.RemoteRunStopRequested | ev.RemoteRunEnded


class VisitSink(Protocol):
    """Where a Hermes answer writes its progress: the visit's stream, status lines and cancel signal."""

    cancel_event: asyncio.Event

    @property
    def handing_over(self) -> bool:
        """True while the process shuts down: a gateway run then goes on, for the next process to follow."""
        ...

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append one chunk to the visit's stream."""
        ...

    async def status(self, text: str) -> None:
        """Append a status line."""
        ...

    def check_cancel(self) -> None:
        """Raise the engine's halt when the run's cancel was requested."""
        ...


class RemoteEnd(msgspec.Struct, frozen=True, kw_only=True):
    """How one gateway run ended for flowtrail (its metering record)."""

    gateway_id: str
    session_id: str
    attempt: int
    outcome: RemoteRunOutcome
    remote_run_id: str = ""
    duration_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reason: str = ""
    error: str = ""
    output: str = ""


class RemoteFacts(Protocol):
    """Appends the facts of a visit's gateway runs to its run's log, each before the step it announces."""

    async def requested(self, gateway_id: str, session_id: str, attempt: int) -> datetime:
        """A run is about to be submitted; when that was recorded."""
        ...

    async def accepted(self, attempt: int, remote_run_id: str) -> None:
        """The gateway named the run (recorded before any of its events is copied)."""
        ...

    async def stop_requested(self, attempt: int, remote_run_id: str, reason: str) -> None:
        """The engine asks the gateway to stop the run."""
        ...

    async def ended(self, end: RemoteEnd) -> None:
        """The run ended for flowtrail."""
        ...


@dataclass
class RemoteRunRecord:
    """One gateway run of a visit, as the log has it."""

    attempt: int
    gateway_id: str
    session_id: str
    requested_at: datetime
    remote_run_id: str = ""
    stop_reason: str | None = None
    ended: ev.RemoteRunEnded | None = None


def remote_runs(events: Iterable[RemoteEvent]) -> list[RemoteRunRecord]:
    """A visit's gateway runs, in the order they were requested, from its remote-run events."""
    runs: dict[int, RemoteRunRecord] = {}
    for event in events:
        if isinstance(event, ev.RemoteRunRequested):
            runs[event.attempt] = RemoteRunRecord(event.attempt, event.gateway_id, event.session_id, event.timestamp)
            continue
        record = runs.get(event.attempt)
        if record is None:
            continue
        if isinstance(event, ev.RemoteRunAccepted):
            record.remote_run_id = event.remote_run_id
        elif isinstance(event, ev.RemoteRunStopRequested):
            record.stop_reason = event.reason
        else:
            record.ended = event
    return list(runs.values())
