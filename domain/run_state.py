"""The Run's state and its one fold: the explicit state machine the decisions in `domain.run` check.

State changes only in `evolve`, by applying an event; nothing else builds a `Run`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime
from functools import singledispatch
from uuid import UUID

import msgspec

from domain import events as ev
from domain.errors import IllegalTransition


class RunStatus(str, enum.Enum):
    """Where a run stands in its life."""

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    CANCEL_REQUESTED = "cancel_requested"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True once nothing more can happen to the run."""
        return self in TERMINAL


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
EXECUTING = frozenset({RunStatus.RUNNING, RunStatus.CANCEL_REQUESTED})


class PendingClarify(msgspec.Struct, frozen=True):
    """A question the run is waiting on."""

    clarify_id: str
    visit_uuid: str
    node_id: str
    question: str
    choices: tuple[str, ...]
    asked_at: datetime


class Run(msgspec.Struct, frozen=True):
    """The state a run's decisions need, folded from its events."""

    id: UUID
    version: int
    status: RunStatus
    workflow_name: str
    workflow_id: int
    workflow_version: int
    caller_key_id: str
    open_visits: frozenset[str] = frozenset()
    pending_clarify: PendingClarify | None = None
    asked_clarify_ids: frozenset[str] = frozenset()
    answered_clarify_ids: frozenset[str] = frozenset()
    cancel_requested: bool = False
    started: bool = False
    """True once RunStarted is in the log (also after the run finished)."""
    visit_count: int = 0
    """Visits started or skipped so far, or the highest sortOrder among them if higher (a fork copies only some of
    its source's visits); the next one's sortOrder is this plus one."""
    erased: bool = False
    """True once the run's content was erased (RunErased, or the erased copy of its first event)."""
    settled_webhooks: frozenset[str] = frozenset()
    """The `webhook-id`s of the run's webhook deliveries that were delivered or abandoned."""


@singledispatch
def _mutate(event: ev.RunEvent, run: Run) -> Run:
    return run


@_mutate.register
def _(event: ev.RunStarted, run: Run) -> Run:
    return msgspec.structs.replace(run, status=RunStatus.RUNNING, started=True)


@_mutate.register
def _(event: ev.VisitStarted, run: Run) -> Run:
    return msgspec.structs.replace(
        run, open_visits=run.open_visits | {event.visit_uuid}, visit_count=max(run.visit_count + 1, event.sort_order)
    )


@_mutate.register
def _(event: ev.VisitSkipped, run: Run) -> Run:
    return msgspec.structs.replace(run, visit_count=max(run.visit_count + 1, event.sort_order))


@_mutate.register(ev.VisitCompleted)
@_mutate.register(ev.VisitFailed)
def _(event: ev.VisitCompleted | ev.VisitFailed, run: Run) -> Run:
    return msgspec.structs.replace(run, open_visits=run.open_visits - {event.visit_uuid})


@_mutate.register
def _(event: ev.ClarifyRequested, run: Run) -> Run:
    pending = PendingClarify(
        event.clarify_id, event.visit_uuid, event.node_id, event.question, event.choices, event.timestamp
    )
    return msgspec.structs.replace(
        run, status=RunStatus.PAUSED if run.started else run.status, pending_clarify=pending,
        asked_clarify_ids=run.asked_clarify_ids | {event.clarify_id},
    )


@_mutate.register
def _(event: ev.ClarifyAnswered, run: Run) -> Run:
    status = RunStatus.CANCEL_REQUESTED if run.cancel_requested else RunStatus.RUNNING
    if not run.started:
        status = run.status  # a question and its answer a fork copied, before the fork started
    return msgspec.structs.replace(
        run, status=status, pending_clarify=None,
        answered_clarify_ids=run.answered_clarify_ids | {event.clarify_id},
    )


@_mutate.register
def _(event: ev.RunCancelRequested, run: Run) -> Run:
    return msgspec.structs.replace(run, status=RunStatus.CANCEL_REQUESTED, cancel_requested=True)


@_mutate.register
def _(event: ev.RunCancelled, run: Run) -> Run:
    return msgspec.structs.replace(run, status=RunStatus.CANCELLED, open_visits=frozenset(), pending_clarify=None)


@_mutate.register
def _(event: ev.RunCompleted, run: Run) -> Run:
    return msgspec.structs.replace(run, status=RunStatus.SUCCEEDED, open_visits=frozenset(), pending_clarify=None)


@_mutate.register
def _(event: ev.RunFailed, run: Run) -> Run:
    return msgspec.structs.replace(run, status=RunStatus.FAILED, open_visits=frozenset(), pending_clarify=None)


@_mutate.register
def _(event: ev.RunErased, run: Run) -> Run:
    return msgspec.structs.replace(run, erased=True)


@_mutate.register
def _(event: ev.WebhookAttempted, run: Run) -> Run:
    if not event.delivered:
        return run
    return msgspec.structs.replace(run, settled_webhooks=run.settled_webhooks | {event.webhook_id})


@_mutate.register
def _(event: ev.WebhookAbandoned, run: Run) -> Run:
    return msgspec.structs.replace(run, settled_webhooks=run.settled_webhooks | {event.webhook_id})


def evolve(run: Run | None, event: ev.RunEvent) -> Run:
    """Apply one event to the run's state (the only place state changes)."""
    if isinstance(event, ev.RunCreated):
        return Run(
            id=event.originator_id,
            version=1,
            status=RunStatus.CREATED,
            workflow_name=event.workflow_name,
            workflow_id=event.workflow_id,
            workflow_version=event.workflow_version,
            caller_key_id=event.caller_key_id,
            erased=event.erased,
        )
    if run is None:
        raise IllegalTransition(f"a run's first event must be RunCreated, got {ev.event_tag(event)}")
    return msgspec.structs.replace(_mutate(event, run), version=event.originator_version)


def evolve_all(run: Run, events: Sequence[ev.RunEvent]) -> Run:
    """The run's state after more events (stream chunks change nothing but the position)."""
    if not events:
        return run
    for event in events:
        if type(event) is not ev.NodeStreamed:
            run = evolve(run, event)
    return msgspec.structs.replace(run, version=events[-1].originator_version)


def fold(events: list[ev.RunEvent] | tuple[ev.RunEvent, ...]) -> Run | None:
    """The run's state after all of its events."""
    run: Run | None = None
    for event in events:
        run = evolve(run, event)
    return run
