"""The run summary: status, timestamps, outputs, error and current pause of one run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from msgspec import UNSET

from domain import events as ev
from domain.run import RunStatus
from projections.payloads import NodeView, PauseView, RunStatusName
from projections.sse import cancel_error, produces_sse_message
from projections.visits import VisitIndex
from projections.wire import iso_local, iso_utc

EXTERNAL_STATUS: dict[RunStatus, RunStatusName] = {
    RunStatus.CREATED: "CREATED",
    RunStatus.RUNNING: "RUNNING",
    RunStatus.PAUSED: "RUNNING",
    RunStatus.CANCEL_REQUESTED: "RUNNING",
    RunStatus.SUCCEEDED: "SUCCESS",
    RunStatus.FAILED: "FAILED",
    RunStatus.CANCELLED: "FAILED",
}


class RunSummary:
    """What `GET run`, `GET state` and run listings show; `apply(event)` is the only way it changes."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.status = RunStatus.CREATED
        self.workflow_id: int | None = None
        self.workflow_name = ""
        self.workflow_version: int | None = None
        self.display_name = ""
        self.mode = ""
        self.variables: dict[str, Any] = {}
        self.uploaded_files: tuple[str, ...] = ()
        self.ttl_hours: int | None = None
        self.caller_key_id = ""
        self.idempotency_key: str | None = None
        self.created_at: datetime | None = None
        self.started_at: datetime | None = None
        self.completed_at: datetime | None = None
        self.error: str | None = None
        self.outputs: dict[str, Any] | None = None
        self.cancel_requested = False
        self.cancel_requested_at: datetime | None = None
        self.cancelled = False
        self.current_pause: PauseView | None = None
        self.last_event_id = 0
        self.last_sse_id = 0
        self.working_dir_files: tuple[str, ...] = ()
        self.asked_clarify_ids: set[str] = set()
        self.answered_clarify_ids: set[str] = set()

    @property
    def external_status(self) -> RunStatusName:
        """The external API status: CREATED, RUNNING, SUCCESS or FAILED."""
        return EXTERNAL_STATUS[self.status]

    def apply(self, event: ev.RunEvent) -> None:
        """Fold one run event into the summary."""
        self.last_event_id = event.originator_version
        if produces_sse_message(event):
            self.last_sse_id = event.originator_version
        handler = _SUMMARY_HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _created(self, event: ev.RunCreated) -> None:
        self.run_id = event.originator_id.hex
        self.workflow_id, self.workflow_name = event.workflow_id, event.workflow_name
        self.workflow_version, self.display_name = event.workflow_version, event.display_name
        self.mode, self.variables = event.mode, event.variables
        self.uploaded_files, self.ttl_hours = event.uploaded_files, event.ttl_hours
        self.caller_key_id, self.idempotency_key = event.caller_key_id, event.idempotency_key
        self.created_at = event.timestamp

    def _started(self, event: ev.RunStarted) -> None:
        self.status, self.started_at = RunStatus.RUNNING, event.timestamp

    def _clarify_requested(self, event: ev.ClarifyRequested) -> None:
        self.status = RunStatus.PAUSED
        self.asked_clarify_ids.add(event.clarify_id)
        self.current_pause = pause_view(event)

    def _clarify_answered(self, event: ev.ClarifyAnswered) -> None:
        self.answered_clarify_ids.add(event.clarify_id)
        self.current_pause = None
        if not self.status.is_terminal:
            self.status = RunStatus.CANCEL_REQUESTED if self.cancel_requested else RunStatus.RUNNING

    def _cancel_requested(self, event: ev.RunCancelRequested) -> None:
        self.cancel_requested, self.cancel_requested_at = True, event.timestamp
        if not self.status.is_terminal:
            self.status = RunStatus.CANCEL_REQUESTED

    def _cancelled(self, event: ev.RunCancelled) -> None:
        self.cancelled = True
        self._finish(RunStatus.CANCELLED, event.timestamp, error=cancel_error(event.reason))

    def _completed(self, event: ev.RunCompleted) -> None:
        self.outputs, self.working_dir_files = event.output, event.working_dir_files
        self._finish(RunStatus.SUCCEEDED, event.timestamp)

    def _failed(self, event: ev.RunFailed) -> None:
        self._finish(RunStatus.FAILED, event.timestamp, error=event.error)

    def _finish(self, status: RunStatus, at: datetime, *, error: str | None = None) -> None:
        self.status, self.completed_at, self.current_pause = status, at, None
        self.error = error

    def state_view(self) -> dict[str, Any]:
        """`GET /runs/{runId}/state`: `{runId, status, currentPause}`."""
        return {"runId": self.run_id, "status": self.external_status, "currentPause": self.current_pause}

    def as_dict(self) -> dict[str, Any]:
        """Every field, camelCase, timestamps rendered."""
        return {
            "runId": self.run_id,
            "status": self.external_status,
            "internalStatus": self.status.value,
            "workflowId": self.workflow_id,
            "workflowName": self.workflow_name,
            "workflowVersion": self.workflow_version,
            "displayName": self.display_name,
            "mode": self.mode,
            "variables": self.variables,
            "uploadedFiles": list(self.uploaded_files),
            "ttlHours": self.ttl_hours,
            "callerKeyId": self.caller_key_id,
            "idempotencyKey": self.idempotency_key,
            "createdAt": iso_utc(self.created_at),
            "startedAt": iso_utc(self.started_at),
            "completedAt": iso_utc(self.completed_at),
            "error": self.error,
            "outputs": self.outputs,
            "cancelRequested": self.cancel_requested,
            "cancelRequestedAt": iso_utc(self.cancel_requested_at),
            "cancelled": self.cancelled,
            "currentPause": self.current_pause,
            "lastEventId": self.last_event_id,
            "lastSseId": self.last_sse_id,
            "workingDirFiles": list(self.working_dir_files),
            "askedClarifyIds": sorted(self.asked_clarify_ids),
            "answeredClarifyIds": sorted(self.answered_clarify_ids),
        }


# Plain functions, not bound methods: no reference cycle, so a dropped projection is freed at once.
_SUMMARY_HANDLERS: dict[type, Callable[[Any, Any], None]] = {
    ev.RunCreated: RunSummary._created,
    ev.RunStarted: RunSummary._started,
    ev.ClarifyRequested: RunSummary._clarify_requested,
    ev.ClarifyAnswered: RunSummary._clarify_answered,
    ev.RunCancelRequested: RunSummary._cancel_requested,
    ev.RunCancelled: RunSummary._cancelled,
    ev.RunCompleted: RunSummary._completed,
    ev.RunFailed: RunSummary._failed,
}


def summarize(events: list[ev.RunEvent] | tuple[ev.RunEvent, ...]) -> RunSummary:
    """The summary after all of a run's events."""
    summary = RunSummary()
    for event in events:
        summary.apply(event)
    return summary


def pause_view(event: ev.ClarifyRequested) -> PauseView:
    """The question a run waits on (`currentPause`), its time as ISO_LOCAL_DATE_TIME."""
    return PauseView(
        clarify_id=event.clarify_id,
        node_id=event.node_id,
        question=event.question,
        choices=event.choices,
        created_at=iso_local(event.timestamp),
    )


def node_list(index: VisitIndex, logs_url: Callable[[str], str] | None = None) -> list[NodeView]:
    """GET run `nodes`: one entry a node, its last visit's state, logs counted over all visits.

    `logs_url` names where a node's logs are served (the API knows; the audit view leaves it out).
    """
    views = []
    for node_id in index.node_ids():
        visits = index.visits_of(node_id)
        last = visits[-1]
        views.append(NodeView(
            node_id=node_id,
            node_type=last.node_type,
            label=last.node_label,
            status=last.status,
            output=last.output,
            error=last.error,
            logs_count=sum(visit.logs_count for visit in visits),
            logs_url=logs_url(node_id) if logs_url is not None else UNSET,
        ))
    return views
