"""One log line per run lifecycle event, the run counters and the gateway-run counters: fed with every batch a run's
writer appended."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from domain import events as ev
from domain.failures import failure_code
from domain.run_state import Run
from engine.observability.metrics import (
    GATEWAY_FAILURES,
    GATEWAY_RUNS,
    GATEWAY_TOKENS,
    RUNS_CREATED,
    RUNS_FAILED,
    RUNS_FINISHED,
)

logger = logging.getLogger("flowtrail.runs")

LIFECYCLE: dict[type[ev.RunEvent], str] = {
    ev.RunCreated: "created",
    ev.RunStarted: "started",
    ev.ClarifyRequested: "paused",
    ev.ClarifyAnswered: "resumed",
    ev.RunCancelRequested: "cancel requested",
    ev.RunCompleted: "completed",
    ev.RunFailed: "failed",
    ev.RunCancelled: "cancelled",
}
"""The events that change where a run stands, and the word its log line uses."""
FINAL_STATUS: dict[type[ev.RunEvent], str] = {
    ev.RunCompleted: "succeeded", ev.RunFailed: "failed", ev.RunCancelled: "cancelled",
}
ERROR_CHARS = 300


def run_created(event: ev.RunCreated) -> None:
    """Log and count a new run."""
    RUNS_CREATED.labels(event.workflow_name).inc()
    _log(event, "created", event.workflow_name, event.workflow_version, event.timestamp)


def runs_appended(run: Run, events: Sequence[ev.RunEvent], created_at: datetime | None) -> None:
    """Log each lifecycle event of one appended batch of `run` (its state after the batch); count the run's end
    and each gateway run's end."""
    for event in events:
        if type(event) is ev.RemoteRunEnded:
            gateway_run_ended(event)
        step = LIFECYCLE.get(type(event))
        if step is None:
            continue
        final = FINAL_STATUS.get(type(event))
        if final is not None:
            RUNS_FINISHED.labels(run.workflow_name, final).inc()
        code = _failure_code(event)
        if code is not None:
            RUNS_FAILED.labels(run.workflow_name, code).inc()
        _log(event, step, run.workflow_name, run.workflow_version, created_at)


def gateway_run_ended(event: ev.RemoteRunEnded) -> None:
    """Count one gateway run's end: its outcome, its tokens, and why it gave no answer when it gave none."""
    GATEWAY_RUNS.labels(event.gateway_id, event.outcome).inc()
    GATEWAY_TOKENS.labels(event.gateway_id, "prompt").inc(event.prompt_tokens)
    GATEWAY_TOKENS.labels(event.gateway_id, "completion").inc(event.completion_tokens)
    if event.outcome != "completed":
        GATEWAY_FAILURES.labels(event.gateway_id, event.reason or event.outcome).inc()


def _log(event: ev.RunEvent, step: str, workflow: str, version: int, created_at: datetime | None) -> None:
    fields: dict[str, object] = {
        "run_id": event.originator_id.hex, "workflow": workflow, "version": version, "event_id": event.originator_version,
    }
    if created_at is not None:
        fields["duration_ms"] = round((event.timestamp - created_at).total_seconds() * 1000, 1)
    if isinstance(event, ev.RunFailed):
        fields["error"] = event.error[:ERROR_CHARS]
    code = _failure_code(event)
    if code is not None:
        fields["error_code"] = code
    request_id = getattr(event, "request_id", None)
    if request_id is not None:
        fields["request_id"] = request_id
    logger.info("run %s", step, extra=fields)


def _failure_code(event: ev.RunEvent) -> str | None:
    """The failure category of a run's end (None for any other event)."""
    if isinstance(event, ev.RunFailed):
        return failure_code(event.error, event.error_code)
    return "RUN_CANCELLED" if isinstance(event, ev.RunCancelled) else None
