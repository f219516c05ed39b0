"""The run summary: status, timestamps, outputs, error, current pause and token totals (model and gateway calls) of one run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET

from domain import events as ev
from domain.failures import FailureCode, failure_code
from domain.run import PendingClarify, Run, RunStatus, evolve
from projections.payloads import ForkedFrom, NodeView, PauseView, RunStatusName
from projections.sse import cancel_error, produces_sse_message
from projections.visits import VisitIndex
from projections.webhooks import WebhookDeliveries
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
"""The external status of each domain status; a run never started reads CREATED until it finishes (decision 16)."""
REMOTE_WORK_MAY_GO_ON = frozenset({"stop_unconfirmed", "unknown"})
"""Outcomes of a gateway run after which its work may still be going on."""


def external_status_of(run: Run | None) -> RunStatusName:
    """The external status of a run: CREATED until it starts or finishes (a pending cancel included), then the table's."""
    if run is None or (not run.started and not run.status.is_terminal):
        return "CREATED"
    return EXTERNAL_STATUS[run.status]


class RunSummary:
    """What `GET run`, `GET state` and run listings show; `apply(event)` is the only way it changes.

    The run's state (status, cancel flags, questions asked and answered, the pending one) is the
    domain `Run`, folded with `domain.run.evolve`; the summary adds only presentation: the
    external status, times, outputs, error text, and the current pause as the API shows it.
    """

    def __init__(self) -> None:
        self._run: Run | None = None
        self._created: ev.RunCreated | None = None
        self.started_at: datetime | None = None
        self.completed_at: datetime | None = None
        self.cancel_requested_at: datetime | None = None
        self.error: str | None = None
        self.error_code: FailureCode | None = None
        self.outputs: dict[str, Any] | None = None
        self.working_dir_files: tuple[str, ...] = ()
        self.last_event_id = 0
        self.last_sse_id = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.forked_from: ForkedFrom | None = None
        self.remote_unsettled = 0
        """Gateway runs whose stop the gateway did not confirm, or whose outcome could not be read."""
        self.erased_at: datetime | None = None
        self.erased_by: str | None = None
        self.webhooks = WebhookDeliveries()

    def apply(self, event: ev.RunEvent) -> None:
        """Fold one run event into the summary."""
        self.last_event_id = event.originator_version
        if produces_sse_message(event):
            self.last_sse_id = event.originator_version
        if type(event) is ev.NodeStreamed:
            return  # a stream chunk changes nothing but the position (`run` catches up when read)
        self._run = evolve(self._run, event)
        handler = _SUMMARY_HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    @property
    def run(self) -> Run | None:
        """The domain state of the run at the summary's position (None before its first event)."""
        run = self._run
        if run is not None and run.version != self.last_event_id:
            run = self._run = msgspec.structs.replace(run, version=self.last_event_id)
        return run

    @property
    def status(self) -> RunStatus:
        """The run's status in the domain's state machine."""
        return self._run.status if self._run is not None else RunStatus.CREATED

    @property
    def external_status(self) -> RunStatusName:
        """The external API status: CREATED, RUNNING, SUCCESS or FAILED (`external_status_of`)."""
        return external_status_of(self._run)

    @property
    def cancel_requested(self) -> bool:
        """True once a cancel was requested (also after the run was cancelled)."""
        return self._run is not None and self._run.cancel_requested

    @property
    def cancelled(self) -> bool:
        """True once the engine confirmed the cancel."""
        return self.status is RunStatus.CANCELLED

    @property
    def asked_clarify_ids(self) -> frozenset[str]:
        """Every question the run asked."""
        return self._run.asked_clarify_ids if self._run is not None else frozenset()

    @property
    def answered_clarify_ids(self) -> frozenset[str]:
        """Every question that got its answer."""
        return self._run.answered_clarify_ids if self._run is not None else frozenset()

    @property
    def waiting_since(self) -> datetime | None:
        """When the run began to wait for a person's answer; None when it waits for none (nor will get one:
        a run asked to cancel takes no answer)."""
        run = self._run
        if run is None or run.pending_clarify is None or run.cancel_requested:
            return None
        return run.pending_clarify.asked_at

    @property
    def current_pause(self) -> PauseView | None:
        """The pending question as `GET state` shows it; None when the run waits for none."""
        pending = self._run.pending_clarify if self._run is not None else None
        return None if pending is None else pause_view(pending)

    @property
    def created(self) -> ev.RunCreated:
        """What the run was created with: its `RunCreated` (a summary is served only after it)."""
        created = self._created
        assert created is not None, "a run summary is read only after its RunCreated"
        return created

    def _set_created(self, event: ev.RunCreated) -> None:
        self._created = event

    def _started(self, event: ev.RunStarted) -> None:
        self.started_at = event.timestamp

    def _cancel_requested(self, event: ev.RunCancelRequested) -> None:
        self.cancel_requested_at = event.timestamp

    def _cancelled(self, event: ev.RunCancelled) -> None:
        self.completed_at, self.error, self.error_code = event.timestamp, cancel_error(event.reason), "RUN_CANCELLED"

    def _completed(self, event: ev.RunCompleted) -> None:
        self.outputs, self.working_dir_files = event.output, event.working_dir_files
        self.completed_at, self.error, self.error_code = event.timestamp, None, None

    def _failed(self, event: ev.RunFailed) -> None:
        self.completed_at, self.error = event.timestamp, event.error
        self.error_code = failure_code(event.error, event.error_code)

    def _forked(self, event: ev.RunForked) -> None:
        self.forked_from = forked_from(event)

    def _model_called(self, event: ev.ModelCalled) -> None:
        self.prompt_tokens += event.prompt_tokens
        self.completion_tokens += event.completion_tokens

    def _remote_run_ended(self, event: ev.RemoteRunEnded) -> None:
        self.prompt_tokens += event.prompt_tokens
        self.completion_tokens += event.completion_tokens
        if event.outcome in REMOTE_WORK_MAY_GO_ON:
            self.remote_unsettled += 1

    @property
    def remote_work_may_be_running(self) -> bool:
        """True when a gateway run of this run was not confirmed stopped, or its outcome is unknown."""
        return self.remote_unsettled > 0


    def _webhook(self, event: ev.WebhookAttempted | ev.WebhookAbandoned) -> None:
        self.webhooks.apply(event)

    def _erased(self, event: ev.RunErased) -> None:
        self.erased_at, self.erased_by = event.timestamp, event.erased_by

    @property
    def erased(self) -> bool:
        """True once the run's content was erased (its first event, as stored, says so too)."""
        return self._run is not None and self._run.erased

    def as_dict(self) -> dict[str, Any]:
        """Every field, camelCase, timestamps rendered."""
        created = self.created
        return {
            "runId": created.originator_id.hex,
            "status": self.external_status,
            "internalStatus": self.status.value,
            "workflowId": created.workflow_id,
            "workflowName": created.workflow_name,
            "workflowVersion": created.workflow_version,
            "displayName": created.display_name,
            "mode": created.mode,
            "variables": created.variables,
            "uploadedFiles": list(created.uploaded_files),
            "ttlHours": created.ttl_hours,
            "callerKeyId": created.caller_key_id,
            "idempotencyKey": created.idempotency_key,
            "createdAt": iso_utc(created.timestamp),
            "startedAt": iso_utc(self.started_at),
            "completedAt": iso_utc(self.completed_at),
            "error": self.error,
            "errorCode": self.error_code,
            "waitingSince": iso_utc(self.waiting_since),
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
            "usage": {"promptTokens": self.prompt_tokens, "completionTokens": self.completion_tokens},
            "forkedFrom": self.forked_from,
            "remoteWorkMayBeRunning": self.remote_work_may_be_running,
            "erasedAt": iso_utc(self.erased_at),
            "erasedBy": self.erased_by,
        }


# Plain functions, not bound methods: no reference cycle, so a dropped projection is freed at once.
_SUMMARY_HANDLERS: dict[type, Callable[[Any, Any], None]] = {
    ev.RunCreated: RunSummary._set_created,
    ev.RunStarted: RunSummary._started,
    ev.RunCancelRequested: RunSummary._cancel_requested,
    ev.RunCancelled: RunSummary._cancelled,
    ev.RunCompleted: RunSummary._completed,
    ev.RunFailed: RunSummary._failed,
    ev.ModelCalled: RunSummary._model_called,
    ev.RunForked: RunSummary._forked,
    ev.RemoteRunEnded: RunSummary._remote_run_ended,
    ev.RunErased: RunSummary._erased,
    ev.WebhookAttempted: RunSummary._webhook,
    ev.WebhookAbandoned: RunSummary._webhook,
}


def forked_from(event: ev.RunForked) -> ForkedFrom:
    """`forkedFrom` of a fork: its source run, the visit it executes again and the position it copied up to."""
    return ForkedFrom(run_id=event.source_run_id.hex, visit_uuid=event.source_visit_uuid, position=event.source_position)


def summarize(events: list[ev.RunEvent] | tuple[ev.RunEvent, ...]) -> RunSummary:
    """The summary after all of a run's events."""
    summary = RunSummary()
    for event in events:
        summary.apply(event)
    return summary


def pause_view(pending: PendingClarify) -> PauseView:
    """The question a run waits on (`currentPause`), its time as ISO_LOCAL_DATE_TIME."""
    return PauseView(
        clarify_id=pending.clarify_id,
        node_id=pending.node_id,
        question=pending.question,
        choices=pending.choices,
        created_at=iso_local(pending.asked_at),
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
