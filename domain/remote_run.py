"""A visit's runs on a remote agent gateway: the decisions that record them (docs/hermes.md, decision 0037)."""

from __future__ import annotations

from datetime import datetime

from domain import events as ev
from domain.errors import IllegalTransition
from domain.guards import check_open_visit, next_fields
from domain.run_state import Run
from domain.vocabulary import is_remote_run_outcome


def _check_remote_attempt(run: Run, visit_uuid: str, attempt: int, action: str) -> None:
    check_open_visit(run, visit_uuid, action)
    if attempt < 1:
        raise IllegalTransition(f"a remote run's attempt is 1 or more, not {attempt}", run_id=run.id.hex)


def request_remote_run(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, gateway_id: str, session_id: str, attempt: int,
) -> ev.RemoteRunRequested:
    """Record that an open visit is about to submit a gateway run (appended before the request is sent)."""
    _check_remote_attempt(run, visit_uuid, attempt, "submit a remote run")
    return ev.RemoteRunRequested(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, gateway_id=gateway_id, session_id=session_id,
        attempt=attempt,
    )


def accept_remote_run(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, attempt: int, remote_run_id: str,
) -> ev.RemoteRunAccepted:
    """Record the id the gateway gave a visit's run (before any of its events is copied)."""
    _check_remote_attempt(run, visit_uuid, attempt, "record a remote run id")
    if not remote_run_id:
        raise IllegalTransition("a remote run id is not empty", run_id=run.id.hex)
    return ev.RemoteRunAccepted(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, attempt=attempt, remote_run_id=remote_run_id,
    )


def request_remote_stop(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, attempt: int, remote_run_id: str, reason: str = "",
) -> ev.RemoteRunStopRequested:
    """Record that the engine asks the gateway to stop a visit's run."""
    _check_remote_attempt(run, visit_uuid, attempt, "stop a remote run")
    return ev.RemoteRunStopRequested(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, attempt=attempt, remote_run_id=remote_run_id,
        reason=reason,
    )


def end_remote_run(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, gateway_id: str, session_id: str, attempt: int,
    outcome: str, remote_run_id: str = "", duration_ms: float = 0.0, prompt_tokens: int = 0,
    completion_tokens: int = 0, reason: str = "", error: str = "", output: str = "",
) -> ev.RemoteRunEnded:
    """Record how one of an open visit's gateway runs ended (its metering record)."""
    _check_remote_attempt(run, visit_uuid, attempt, "record a remote run's end")
    if not is_remote_run_outcome(outcome):
        raise IllegalTransition(f"unknown remote run outcome {outcome!r}", run_id=run.id.hex)
    return ev.RemoteRunEnded(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, gateway_id=gateway_id, session_id=session_id,
        attempt=attempt, outcome=outcome, remote_run_id=remote_run_id, duration_ms=duration_ms,
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, reason=reason, error=error, output=output,
    )
