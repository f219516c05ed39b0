"""SSE messages: each run event as at most one message, its id the event's position in the run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from domain import events as ev
from domain.failures import failure_code
from projections.logs import clarify_json
from projections.payloads import (
    Decision,
    EndStatus,
    EventPayload,
    NodeStatusEndedPayload,
    NodeStatusRunningPayload,
    NodeStreamPayload,
    PlannerDecisionPayload,
    VisitRecordedPayload,
    VisitRef,
    VisitRefRecordedPayload,
    WorkflowCompletePayload,
    WorkflowErrorPayload,
)
from projections.visits import Visit, VisitIndex, visit_snapshot
from projections.wire import encoder

TOOL_CONTENT_LIMIT = 500
TERMINAL_EVENTS = frozenset({"workflow_complete", "workflow_error"})
SILENT_EVENT_TYPES = frozenset({
    ev.RunCreated, ev.RunStarted, ev.ClarifyAnswered, ev.RunCancelRequested, ev.ModelCalled, ev.RunForked,
    ev.RemoteRunRequested, ev.RemoteRunAccepted, ev.RemoteRunStopRequested, ev.RemoteRunEnded, ev.RunErased,
    ev.WebhookAttempted, ev.WebhookAbandoned,
})
"""Events clients are never shown; their positions are gaps in the ids of a stream (decisions 0023, 0037, 0041)."""

_END_STATUS: dict[type, EndStatus] = {ev.VisitCompleted: "SUCCESS", ev.VisitFailed: "FAILED", ev.VisitSkipped: "SKIPPED"}


class SseMessage(msgspec.Struct, frozen=True):
    """One SSE message: `id` (the event's position), `event` (its type) and compact JSON `data`.

    `node_id` is the node the message is about (None: the run as a whole), for stream filters.
    """

    id: int
    event: str
    data: bytes
    node_id: str | None = None


Topic = tuple[str, str | None]
"""What a stream filter reads of a message: its event type and its node (None: the run as a whole)."""


def produces_sse_message(event: ev.RunEvent) -> bool:
    """True when the event is shown to stream clients."""
    return type(event) not in SILENT_EVENT_TYPES


def is_terminal_message(message: SseMessage) -> bool:
    """True for `workflow_complete` and `workflow_error`, after which a stream ends."""
    return message.event in TERMINAL_EVENTS


def message_topic(pending: SseMessage | ev.RunEvent) -> Topic:
    """The event type and node of a message, rendered or not yet (see `apply_deferring`)."""
    if type(pending) is SseMessage:  # not isinstance: this runs for every event of a hot run, and it is 3x faster
        return pending.event, pending.node_id
    return _STATELESS_EVENT[type(pending)], getattr(pending, "node_id", None)


def is_stateless(event: ev.RunEvent) -> bool:
    """True when the event's message needs no state of the run (`render_stateless` renders it)."""
    return type(event) in _STATELESS


def render_stateless(event: ev.RunEvent, run_id: str, erased: bool = False) -> SseMessage:
    """The message of an event whose rendering needs no state (see `apply_deferring`); `erased`: of an erased run."""
    return _message(event, _STATELESS[type(event)](event, run_id), erased)


def _message(event: ev.RunEvent, payload: EventPayload, erased: bool = False) -> SseMessage:
    node_id = getattr(event, "node_id", None)
    if erased:
        payload = msgspec.structs.replace(payload, erased=True)
    return SseMessage(event.originator_version, payload.type, encoder.encode(payload), node_id)


def cancel_error(reason: str) -> str:
    """The error text of a cancelled run."""
    return f"cancelled: {reason}" if reason else "run cancelled"


class SseProjection:
    """Turns a run's events, in order, into its SSE messages; folds the visit index they need (its own, or one given to it alone)."""

    def __init__(self, index: VisitIndex | None = None) -> None:
        self.index = index if index is not None else VisitIndex()
        self._context: dict[str, Any] = {}
        self._late: VisitIndex | None = None
        self.erased = False
        """True for a run whose content was erased (its first event says so): every message is marked."""

    def _fold_late(self, event: ev.RunEvent) -> None:
        """Once the index is full, the visits it refused are folded apart until they are recorded, then dropped."""
        if self._late is None:
            self._late = VisitIndex(max_visits=None)
        self._late.apply(event)

    def _find(self, visit_uuid: str) -> Visit | None:
        visit = self.index.find(visit_uuid)
        if visit is None and self._late is not None:
            visit = self._late.find(visit_uuid)
        return visit

    def apply(self, event: ev.RunEvent) -> SseMessage | None:
        """Fold one event; its SSE message, or None when clients are not shown it."""
        pending = self.apply_deferring(event)
        if isinstance(pending, SseMessage) or pending is None:
            return pending
        return render_stateless(pending, self.index.run_id or "", self.erased)

    def apply_deferring(self, event: ev.RunEvent) -> SseMessage | ev.RunEvent | None:
        """Like `apply`, but a message that needs no state is not rendered yet: the event
        itself is returned, for `render_stateless` when a client first reads it."""
        self.index.apply(event)
        if self.index.overflowed:
            self._fold_late(event)
        kind = type(event)
        if kind in _STATELESS:
            return event
        method = _STATEFUL.get(kind)
        payload = method(self, event, self.index.run_id or "") if method is not None else None
        return None if payload is None else _message(event, payload, self.erased)

    def _created(self, event: ev.RunCreated, run_id: str) -> None:
        self._context.update(event.variables)
        self.erased = event.erased

    def _visit_ended(
        self, event: ev.VisitCompleted | ev.VisitFailed | ev.VisitSkipped, run_id: str
    ) -> NodeStatusEndedPayload:
        visit = self._find(event.visit_uuid)
        if isinstance(event, ev.VisitCompleted):
            self._context[event.node_id] = event.output.get("data")
        return NodeStatusEndedPayload(
            run_id=run_id,
            node_id=event.node_id,
            visit_uuid=event.visit_uuid,
            status=_END_STATUS[type(event)],
            output=getattr(event, "output", None),
            error=getattr(event, "error", None),
            logs=visit.logs if visit is not None else [],
            context_snapshot=dict(self._context),
        )

    def _visit_recorded(self, event: ev.VisitRecorded, run_id: str) -> VisitRecordedPayload | VisitRefRecordedPayload:
        visit = self._find(event.visit_uuid)
        if visit is None:
            ref = VisitRef(visit_uuid=event.visit_uuid, run_id=run_id, node_id=event.node_id)
            return VisitRefRecordedPayload(run_id=run_id, visit=ref)
        if self._late is not None:
            self._late.forget(event.visit_uuid)
        return VisitRecordedPayload(run_id=run_id, visit=visit_snapshot(visit))


def _visit_started(event: ev.VisitStarted, run_id: str) -> NodeStatusRunningPayload:
    return NodeStatusRunningPayload(
        run_id=run_id,
        node_id=event.node_id,
        visit_uuid=event.visit_uuid,
        node_type=event.node_type,
        node_label=event.node_label,
    )


CUT_KINDS = frozenset({"tool_call", "tool_result"})
"""Stream kinds whose message carries at most TOOL_CONTENT_LIMIT characters of the content."""


def _node_streamed(event: ev.NodeStreamed, run_id: str) -> NodeStreamPayload:
    content = event.content
    if event.kind in CUT_KINDS:
        content = content[:TOOL_CONTENT_LIMIT]
    return _stream(event, run_id, event.kind, content, event.tool_name)


def _clarify_requested(event: ev.ClarifyRequested, run_id: str) -> NodeStreamPayload:
    content = clarify_json(event.clarify_id, event.question, event.choices)
    return _stream(event, run_id, "clarify_request", content, None)


def _stream(event: ev.NodeStreamed | ev.ClarifyRequested, run_id: str, kind: str, content: str,
            tool_name: str | None) -> NodeStreamPayload:
    return NodeStreamPayload(
        run_id=run_id,
        node_id=event.node_id,
        visit_uuid=event.visit_uuid,
        kind=kind,
        content=content,
        tool_name=tool_name,
    )


def _planner_decided(event: ev.PlannerDecided, run_id: str) -> PlannerDecisionPayload:
    decision = Decision(next_node_id=event.next_node_id, reason=event.reason, from_node_id=event.from_node_id)
    return PlannerDecisionPayload(run_id=run_id, decision=decision)


def _run_completed(event: ev.RunCompleted, run_id: str) -> WorkflowCompletePayload:
    return WorkflowCompletePayload(run_id=run_id, output=event.output, working_dir_files=event.working_dir_files)


def _run_failed(event: ev.RunFailed, run_id: str) -> WorkflowErrorPayload:
    return WorkflowErrorPayload(run_id=run_id, error=event.error, error_code=failure_code(event.error, event.error_code))


def _run_cancelled(event: ev.RunCancelled, run_id: str) -> WorkflowErrorPayload:
    return WorkflowErrorPayload(run_id=run_id, error=cancel_error(event.reason), error_code="RUN_CANCELLED")


# Plain functions, not bound methods: a projection holds no reference to itself, so a hot
# run that is dropped is freed at once instead of waiting for the cycle collector.
_STATEFUL: dict[type, Callable[[SseProjection, Any, str], EventPayload | None]] = {
    ev.RunCreated: SseProjection._created,
    ev.VisitCompleted: SseProjection._visit_ended,
    ev.VisitFailed: SseProjection._visit_ended,
    ev.VisitSkipped: SseProjection._visit_ended,
    ev.VisitRecorded: SseProjection._visit_recorded,
}
_STATELESS: dict[type, Callable[[Any, str], EventPayload]] = {
    ev.VisitStarted: _visit_started,
    ev.NodeStreamed: _node_streamed,
    ev.ClarifyRequested: _clarify_requested,
    ev.PlannerDecided: _planner_decided,
    ev.RunCompleted: _run_completed,
    ev.RunFailed: _run_failed,
    ev.RunCancelled: _run_cancelled,
}
_STATELESS_EVENT = {
    ev.VisitStarted: "node_status",
    ev.NodeStreamed: "node_stream",
    ev.ClarifyRequested: "node_stream",
    ev.PlannerDecided: "planner_decision",
    ev.RunCompleted: "workflow_complete",
    ev.RunFailed: "workflow_error",
    ev.RunCancelled: "workflow_error",
}


def render_all(events: Iterable[ev.RunEvent], after: int = 0) -> list[SseMessage]:
    """Fold all events; return the messages with id > `after` (a `Last-Event-ID` resume)."""
    projection = SseProjection()
    messages = []
    for event in events:
        message = projection.apply(event)
        if message is not None and message.id > after:
            messages.append(message)
    return messages
