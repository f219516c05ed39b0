"""The Run aggregate: its decision functions; the guards they share are `domain.guards`, its state and fold
`domain.run_state`, the decisions about a visit's gateway runs `domain.remote_run`.

Decision functions check the state and return new events; state changes only in `evolve`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from domain import events as ev
from domain.errors import (
    ClarifyAlreadyAnswered,
    ClarifyNotFound,
    IllegalTransition,
    RunAlreadyFinished,
    RunAlreadyStarted,
)
from domain.failures import FailureCode
from domain.guards import check_executing, check_not_finished, check_open_visit, next_fields
from domain.run_state import EXECUTING as EXECUTING
from domain.run_state import TERMINAL as TERMINAL
from domain.run_state import PendingClarify as PendingClarify
from domain.run_state import Run, RunStatus
from domain.run_state import evolve as evolve
from domain.run_state import evolve_all as evolve_all
from domain.run_state import fold as fold
from domain.vocabulary import (
    NodeType,
    RunMode,
    StreamKind,
    is_model_call_purpose,
    is_node_type,
    is_run_mode,
    is_stream_kind,
)


def check_mode(mode: str) -> RunMode:
    """The mode itself when it is DAG or AGENTIC; refused otherwise (stored, it would never decode again)."""
    if not is_run_mode(mode):
        raise IllegalTransition(f"unknown run mode {mode!r}")
    return mode


def check_node_type(node_type: str) -> NodeType:
    """The node type itself when the workflow model knows it; refused otherwise (stored, it would never decode again)."""
    if not is_node_type(node_type):
        raise IllegalTransition(f"unknown node type {node_type!r}")
    return node_type


def create_run(
    run_id: UUID, at: datetime, *, workflow_id: int, workflow_name: str, workflow_version: int, display_name: str,
    mode: RunMode, variables: Mapping[str, Any] | None = None, uploaded_files: Sequence[str] = (),
    ttl_hours: int = 720, caller_key_id: str = "", idempotency_key: str | None = None, webhook: str | None = None,
) -> ev.RunCreated:
    """The first event of a run."""
    return ev.RunCreated(
        originator_id=run_id, originator_version=1, timestamp=at, workflow_id=workflow_id,
        workflow_name=workflow_name, workflow_version=workflow_version, display_name=display_name,
        mode=check_mode(mode), variables=dict(variables or {}), uploaded_files=tuple(uploaded_files),
        ttl_hours=ttl_hours, caller_key_id=caller_key_id, idempotency_key=idempotency_key, webhook=webhook,
    )


# The order of the refusals below is a contract (docs/decisions/0010-start-and-answer-guards.md).


def check_startable(run: Run) -> None:
    """Refuse a start: RunAlreadyStarted once started (finished or not), RunAlreadyFinished if it never can be."""
    if run.started:
        raise RunAlreadyStarted(f"run {run.id.hex} was already started", run_id=run.id.hex)
    if run.status is not RunStatus.CREATED:
        what = "has already finished" if run.status.is_terminal else "is being cancelled"
        raise RunAlreadyFinished(
            f"run {run.id.hex} {what} ({run.status.value}) and was never started; it cannot start",
            run_id=run.id.hex, status=run.status.value,
        )


def start_run(run: Run, at: datetime) -> ev.RunStarted:
    """Start a created run; a second start is refused."""
    check_startable(run)
    return ev.RunStarted(**next_fields(run, at))


def start_visit(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, node_type: str, node_label: str, iter_seq: int,
    sort_order: int, from_node_id: str | None = None, from_visit_uuid: str | None = None,
    predecessor_visit_uuids: Sequence[str] = (),
) -> ev.VisitStarted:
    """Open a visit of a node."""
    check_executing(run, "start a visit")
    if visit_uuid in run.open_visits:
        raise IllegalTransition(f"visit {visit_uuid} is already open", run_id=run.id.hex)
    return ev.VisitStarted(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, node_type=check_node_type(node_type),
        node_label=node_label, iter_seq=iter_seq, sort_order=sort_order, from_node_id=from_node_id,
        from_visit_uuid=from_visit_uuid, predecessor_visit_uuids=tuple(predecessor_visit_uuids),
    )


class StreamPiece(msgspec.Struct, frozen=True):
    """One piece of a visit's stream, as a writer buffered it."""

    at: datetime
    visit_uuid: str
    node_id: str
    kind: str
    content: str
    tool_name: str | None = None


def check_stream_chunk(run: Run, visit_uuid: str, kind: str) -> StreamKind:
    """The kind of a stream piece for an open visit; refused for a visit that is not open, or an unknown kind."""
    check_open_visit(run, visit_uuid, "stream")
    if not is_stream_kind(kind) or kind == "clarify_request":
        raise IllegalTransition(f"unknown stream kind {kind!r}", run_id=run.id.hex)
    return kind


def stream_chunk(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, kind: str, content: str,
    tool_name: str | None = None,
) -> ev.NodeStreamed:
    """Record a piece of a visit's stream."""
    return stream_chunks(run, [StreamPiece(at, visit_uuid, node_id, kind, content, tool_name)])[0]


def stream_chunks(run: Run, pieces: Sequence[StreamPiece]) -> list[ev.NodeStreamed]:
    """Record several pieces of visits' streams at consecutive positions, each checked."""
    events = []
    for offset, piece in enumerate(pieces, start=1):
        kind = check_stream_chunk(run, piece.visit_uuid, piece.kind)
        events.append(ev.NodeStreamed(
            originator_id=run.id, originator_version=run.version + offset, timestamp=piece.at,
            visit_uuid=piece.visit_uuid, node_id=piece.node_id, kind=kind,
            content=piece.content, tool_name=piece.tool_name,
        ))
    return events


def complete_visit(run: Run, at: datetime, *, visit_uuid: str, node_id: str, output: dict[str, Any]) -> ev.VisitCompleted:
    """Close a visit with its output envelope."""
    check_open_visit(run, visit_uuid, "complete a visit")
    return ev.VisitCompleted(**next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, output=output)


def fail_visit(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, error: str,
    output: dict[str, Any] | None = None, error_code: FailureCode | None = None,
) -> ev.VisitFailed:
    """Close a visit with an error (and its code)."""
    check_open_visit(run, visit_uuid, "fail a visit")
    return ev.VisitFailed(**next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, error=error, output=output,
                          error_code=error_code)


def abandon_paused_visit(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, error: str, output: dict[str, Any] | None = None,
    error_code: FailureCode | None = None,
) -> ev.VisitFailed:
    """Fail the open visit of a paused run that ends without its answer (e.g. at its time limit)."""
    check_not_finished(run, "abandon a visit")
    if run.status is not RunStatus.PAUSED or visit_uuid not in run.open_visits:
        raise IllegalTransition(
            f"visit {visit_uuid} is not waiting in a paused run {run.id.hex}", run_id=run.id.hex, visit_uuid=visit_uuid
        )
    return ev.VisitFailed(**next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, error=error, output=output,
                          error_code=error_code)


def skip_visit(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, node_type: str, node_label: str, iter_seq: int,
    sort_order: int, reason: str = "",
) -> ev.VisitSkipped:
    """Record a node that a branch condition excluded."""
    check_executing(run, "skip a node")
    if iter_seq < 1:
        raise IllegalTransition(f"a skip of node {node_id} needs an iterSeq of 1 or more", run_id=run.id.hex)
    return ev.VisitSkipped(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, node_type=check_node_type(node_type),
        node_label=node_label, sort_order=sort_order, reason=reason, iter_seq=iter_seq,
    )


def record_visit(run: Run, at: datetime, *, visit_uuid: str, node_id: str) -> ev.VisitRecorded:
    """Mark a finished visit as recorded."""
    check_executing(run, "record a visit")
    if visit_uuid in run.open_visits:
        raise IllegalTransition(f"visit {visit_uuid} is still open", run_id=run.id.hex)
    return ev.VisitRecorded(**next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id)


def decide_next(
    run: Run, at: datetime, *, next_node_id: str | None, reason: str, from_node_id: str | None = None
) -> ev.PlannerDecided:
    """Record the planner's choice of the next node."""
    check_executing(run, "record a planner decision")
    return ev.PlannerDecided(**next_fields(run, at), next_node_id=next_node_id, reason=reason, from_node_id=from_node_id)


def request_clarify(
    run: Run, at: datetime, *, clarify_id: str, visit_uuid: str, node_id: str, question: str,
    choices: tuple[str, ...] = (), turn: int = 0,
) -> ev.ClarifyRequested:
    """Pause the run with a question."""
    check_open_visit(run, visit_uuid, "ask a question")
    if run.status is not RunStatus.RUNNING:
        raise IllegalTransition(f"run {run.id.hex} is {run.status.value}; cannot ask", run_id=run.id.hex)
    if clarify_id in run.asked_clarify_ids:
        raise IllegalTransition(f"clarify {clarify_id} was already asked", run_id=run.id.hex)
    return ev.ClarifyRequested(
        **next_fields(run, at), clarify_id=clarify_id, visit_uuid=visit_uuid, node_id=node_id,
        question=question, choices=tuple(choices), turn=turn,
    )


def check_answerable(run: Run, clarify_id: str) -> None:
    """Refuse an answer: ClarifyAlreadyAnswered, then RunAlreadyFinished (also while a cancel is pending), then ClarifyNotFound (decisions 10, 16)."""
    if clarify_id in run.answered_clarify_ids:
        raise ClarifyAlreadyAnswered(
            f"clarify {clarify_id[:128]} was already answered; the first answer stands",
            run_id=run.id.hex, clarify_id=clarify_id,
        )
    check_not_finished(run, "answer a question")
    if run.cancel_requested:
        raise RunAlreadyFinished(
            f"run {run.id.hex} is being cancelled; its question can no longer be answered",
            run_id=run.id.hex, status=run.status.value,
        )
    pending = run.pending_clarify
    if pending is None or pending.clarify_id != clarify_id:
        raise ClarifyNotFound(
            f"run {run.id.hex} is not waiting on a question {clarify_id[:128]!r}", run_id=run.id.hex, clarify_id=clarify_id
        )


def answer_clarify(run: Run, at: datetime, *, clarify_id: str, answer: str) -> ev.ClarifyAnswered:
    """Answer the question the run waits on; refused once a cancel was requested, a repeat as already answered."""
    check_answerable(run, clarify_id)
    return ev.ClarifyAnswered(**next_fields(run, at), clarify_id=clarify_id, answer=answer)


def request_cancel(run: Run, at: datetime, *, reason: str = "") -> ev.RunCancelRequested:
    """Ask for the run to stop; recorded at once, acted on at the next safe point."""
    check_not_finished(run, "cancel")
    if run.cancel_requested:
        raise IllegalTransition(f"cancel of run {run.id.hex} was already requested", run_id=run.id.hex)
    return ev.RunCancelRequested(**next_fields(run, at), reason=reason)


def cancel_run(run: Run, at: datetime, *, reason: str = "") -> ev.RunCancelled:
    """Confirm that the run stopped after a cancel request."""
    check_not_finished(run, "confirm a cancel")
    if not run.cancel_requested:
        raise IllegalTransition(f"run {run.id.hex} has no cancel request", run_id=run.id.hex)
    return ev.RunCancelled(**next_fields(run, at), reason=reason)


def complete_run(
    run: Run, at: datetime, *, output: dict[str, Any], working_dir_files: tuple[str, ...] = ()
) -> ev.RunCompleted:
    """Finish the run successfully."""
    check_executing(run, "complete")
    return ev.RunCompleted(**next_fields(run, at), output=output, working_dir_files=tuple(working_dir_files))


def fail_run(run: Run, at: datetime, *, error: str, error_code: FailureCode | None = None) -> ev.RunFailed:
    """Finish the run with an error and its code (allowed from any non-terminal state)."""
    check_not_finished(run, "fail")
    return ev.RunFailed(**next_fields(run, at), error=error, error_code=error_code)


def record_model_call(
    run: Run, at: datetime, *, visit_uuid: str, node_id: str, model_id: str, purpose: str, attempt: int,
    latency_ms: float, prompt_tokens: int = 0, completion_tokens: int = 0, finish_reason: str = "",
    prompt_sha256: str = "", error_code: str | None = None,
) -> ev.ModelCalled:
    """Record one ended model call: of an open visit (node, reformat), or of the planner (no visit)."""
    if not is_model_call_purpose(purpose):
        raise IllegalTransition(f"unknown model call purpose {purpose!r}", run_id=run.id.hex)
    if purpose == "planner" and not visit_uuid:
        check_executing(run, "record a model call")
    else:
        check_open_visit(run, visit_uuid, "record a model call")
    return ev.ModelCalled(
        **next_fields(run, at), visit_uuid=visit_uuid, node_id=node_id, model_id=model_id, purpose=purpose,
        attempt=attempt, latency_ms=latency_ms, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        finish_reason=finish_reason, prompt_sha256=prompt_sha256, error_code=error_code,
    )


def check_erasable(run: Run) -> None:
    """Refuse to erase a run that has not ended (created and never started, running, waiting for an answer,
    being cancelled) or that was erased already."""
    if not run.status.is_terminal:
        raise IllegalTransition(
            f"run {run.id.hex} has not ended ({run.status.value}); only a run that has ended can be erased",
            run_id=run.id.hex, status=run.status.value,
        )
    if run.erased:
        raise IllegalTransition(f"run {run.id.hex} was already erased", run_id=run.id.hex)


def erase_run(run: Run, at: datetime, *, erased_by: str, events_erased: int) -> ev.RunErased:
    """Record that the content of an ended run is erased (its skeleton and chain stay)."""
    check_erasable(run)
    return ev.RunErased(**next_fields(run, at), erased_by=erased_by, events_erased=events_erased)
