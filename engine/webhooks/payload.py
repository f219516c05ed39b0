"""The JSON body of a webhook (Standard Webhooks' `{type, timestamp, data}`), built from the run's log alone, so
every attempt of a delivery sends the same bytes."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec

from domain import events as ev
from domain.failures import FailureCode, failure_code
from domain.webhooks import Trigger
from projections.wire import iso_utc

_encoder = msgspec.json.Encoder()


def _status_and_code(trigger_event: ev.RunEvent) -> tuple[str, FailureCode | None]:
    if isinstance(trigger_event, ev.RunCompleted):
        return "SUCCESS", None
    if isinstance(trigger_event, ev.RunFailed):
        return "FAILED", failure_code(trigger_event.error, trigger_event.error_code)
    if isinstance(trigger_event, ev.RunCancelled):
        return "FAILED", "RUN_CANCELLED"
    return "RUNNING", None


def links(base: str, created: ev.RunCreated) -> dict[str, str]:
    """Where the run, its events and its page in the viewer are (absolute URLs under `base`)."""
    run_id = created.originator_id.hex
    return {
        "run": f"{base}/api/v1/workflows/{quote(created.workflow_name, safe='')}/runs/{run_id}",
        "events": f"{base}/api/v1/runs/{run_id}/events",
        "viewer": f"{base}/ui/runs/{run_id}",
    }


def webhook_body(base: str, created: ev.RunCreated, trigger: Trigger, trigger_event: ev.RunEvent) -> bytes:
    """The body sent for one trigger of one run (no content of the run: ids, status, code, links)."""
    status, code = _status_and_code(trigger_event)
    data: dict[str, Any] = {
        "runId": created.originator_id.hex,
        "workflowName": created.workflow_name,
        "workflowVersion": created.workflow_version,
        "status": status,
        "errorCode": code,
        "waitingForAnswer": trigger == "run.waiting",
        "eventId": trigger_event.originator_version,
        "links": links(base, created),
    }
    if isinstance(trigger_event, ev.ClarifyRequested):
        data["clarifyId"] = trigger_event.clarify_id
    return _encoder.encode({"type": trigger, "timestamp": iso_utc(trigger_event.timestamp), "data": data})
