"""The run row: one line of the run listing, a pure fold of the run's events.

The persisted read model (`engine.readmodel`) stores one `RunRow` per run; `fold_row` is the only
way a row changes, so the stored row can always be rebuilt from the log and compared with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from domain import events as ev
from domain.failures import failure_code
from projections.payloads import ForkedFrom, RunListItem, RunStatusName
from projections.wire import iso_utc


class RunRow(msgspec.Struct, frozen=True, kw_only=True):
    """What the run listing shows of one run, at the position `last_event_id`."""

    run_id: str
    workflow_name: str
    workflow_id: int
    workflow_version: int
    owner_key_id: str
    status: RunStatusName
    cancel_requested: bool
    cancelled: bool
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_code: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    forked_from_run_id: str | None = None
    forked_from_visit_uuid: str | None = None
    forked_from_position: int | None = None
    """A fork's source run, the visit it executes again and the source position it was cut at (None: not a fork)."""
    erased_at: datetime | None = None
    last_event_id: int
    waiting_since: datetime | None = None
    """When the run began to wait for a person's answer (None: it waits for none)."""


def _created(row: RunRow | None, event: ev.RunCreated) -> RunRow:
    return RunRow(
        run_id=event.originator_id.hex, workflow_name=event.workflow_name, workflow_id=event.workflow_id,
        workflow_version=event.workflow_version, owner_key_id=event.caller_key_id, status="CREATED",
        cancel_requested=False, cancelled=False, created_at=event.timestamp, last_event_id=event.originator_version,
    )


def _started(row: RunRow, event: ev.RunStarted) -> RunRow:
    return replace(row, status="RUNNING", started_at=event.timestamp)


def _cancel_requested(row: RunRow, event: ev.RunCancelRequested) -> RunRow:
    return replace(row, cancel_requested=True, waiting_since=None)


def _asked(row: RunRow, event: ev.ClarifyRequested) -> RunRow:
    return row if row.cancel_requested else replace(row, waiting_since=event.timestamp)


def _answered(row: RunRow, event: ev.ClarifyAnswered) -> RunRow:
    return replace(row, waiting_since=None)


def _cancelled(row: RunRow, event: ev.RunCancelled) -> RunRow:
    return replace(row, status="FAILED", cancelled=True, completed_at=event.timestamp, error_code="RUN_CANCELLED",
                   waiting_since=None)


def _completed(row: RunRow, event: ev.RunCompleted) -> RunRow:
    return replace(row, status="SUCCESS", completed_at=event.timestamp, error_code=None, waiting_since=None)


def _failed(row: RunRow, event: ev.RunFailed) -> RunRow:
    return replace(row, status="FAILED", completed_at=event.timestamp, waiting_since=None,
                   error_code=failure_code(event.error, event.error_code))


def _forked(row: RunRow, event: ev.RunForked) -> RunRow:
    return replace(row, forked_from_run_id=event.source_run_id.hex, forked_from_visit_uuid=event.source_visit_uuid,
                   forked_from_position=event.source_position)


def _tokens_used(row: RunRow, event: ev.ModelCalled | ev.RemoteRunEnded) -> RunRow:
    return replace(
        row, prompt_tokens=row.prompt_tokens + event.prompt_tokens,
        completion_tokens=row.completion_tokens + event.completion_tokens,
    )


def _erased(row: RunRow, event: ev.RunErased) -> RunRow:
    return replace(row, erased_at=event.timestamp)


_FOLDS: dict[type, Callable[[Any, Any], RunRow]] = {
    ev.RunStarted: _started,
    ev.RunCancelRequested: _cancel_requested,
    ev.ClarifyRequested: _asked,
    ev.ClarifyAnswered: _answered,
    ev.RunCancelled: _cancelled,
    ev.RunCompleted: _completed,
    ev.RunFailed: _failed,
    ev.ModelCalled: _tokens_used,
    ev.RemoteRunEnded: _tokens_used,
    ev.RunForked: _forked,
    ev.RunErased: _erased,
}


def fold_row(row: RunRow | None, event: ev.RunEvent) -> RunRow | None:
    """The row after one more event of its run (None until the run's RunCreated)."""
    if type(event) is ev.RunCreated:
        return _created(row, event)
    if row is None:
        return None
    fold = _FOLDS.get(type(event))
    changed = row if fold is None else fold(row, event)
    return replace(changed, last_event_id=event.originator_version)


def fold_rows(row: RunRow | None, events: Iterable[ev.RunEvent]) -> RunRow | None:
    """The row after a run's events in order; events at or before the row's position are skipped (replays)."""
    for event in events:
        if row is None or event.originator_version > row.last_event_id:
            row = fold_row(row, event)
    return row


def list_item(row: RunRow) -> RunListItem:
    """A stored row as the listing shows it (camelCase, times as ISO UTC strings)."""
    return RunListItem(
        run_id=row.run_id, workflow_name=row.workflow_name, workflow_id=row.workflow_id,
        workflow_version=row.workflow_version, status=row.status, owner_key_id=row.owner_key_id,
        cancel_requested=row.cancel_requested, cancelled=row.cancelled, created_at=iso_utc(row.created_at),
        started_at=iso_utc(row.started_at), completed_at=iso_utc(row.completed_at), error_code=row.error_code,
        prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, last_event_id=row.last_event_id,
        waiting_for_answer=row.waiting_since is not None, waiting_since=iso_utc(row.waiting_since),
        forked_from=forked_from_of(row), erased_at=UNSET if row.erased_at is None else iso_utc(row.erased_at),
    )


def forked_from_of(row: RunRow) -> ForkedFrom | UnsetType:
    """`forkedFrom` of a listed fork (left out of the JSON for a run that is not one)."""
    if row.forked_from_run_id is None or row.forked_from_position is None:
        return UNSET
    return ForkedFrom(run_id=row.forked_from_run_id, visit_uuid=row.forked_from_visit_uuid,
                      position=row.forked_from_position)


def row_view(row: RunRow | None) -> dict[str, Any] | None:
    """The row as the listing shows it, as plain JSON values (the audit's `runRow`)."""
    return None if row is None else msgspec.to_builtins(list_item(row))
