"""The run row is a pure fold: it agrees with the run summary at every position of every stored log."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from domain import events as ev
from projections.run_row import RunRow, error_code_of, fold_row, fold_rows, row_view
from projections.summary import RunSummary
from tests.fixtures.stored import stored_events, stored_logs

LOG_NAMES = [path.stem for path in stored_logs()]


def run_events(name: str) -> list[ev.RunEvent]:
    return [e for e in stored_events(name) if isinstance(e, ev.RunEvent)]


@pytest.mark.parametrize("name", LOG_NAMES)
def test_the_row_agrees_with_the_run_summary_at_every_position_of_a_stored_log(name):
    summaries: dict[UUID, RunSummary] = defaultdict(RunSummary)
    rows: dict[UUID, RunRow | None] = {}
    for event in run_events(name):
        summary = summaries[event.originator_id]
        summary.apply(event)
        rows[event.originator_id] = fold_row(rows.get(event.originator_id), event)
        view, seen = row_view(rows[event.originator_id]), summary.as_dict()
        assert view is not None
        for field in ("runId", "status", "workflowId", "workflowName", "workflowVersion", "cancelRequested",
                      "cancelled", "createdAt", "startedAt", "completedAt", "lastEventId"):
            assert view[field] == seen[field], (field, event.originator_version)
        assert view["ownerKeyId"] == seen["callerKeyId"]
        assert (view["errorCode"] is None) == (seen["error"] is None)


@pytest.mark.parametrize("name", LOG_NAMES)
def test_folding_a_log_again_over_its_own_row_changes_nothing(name):
    first = run_events(name)[0].originator_id
    events = [e for e in run_events(name) if e.originator_id == first]
    once = fold_rows(None, events)
    assert fold_rows(once, events) == once
    assert fold_rows(fold_rows(None, events[:5]), events) == once


def test_token_totals_are_the_sums_over_the_runs_model_calls():
    run_id, at = uuid4(), datetime.now(UTC)
    events = [
        ev.RunCreated(originator_id=run_id, originator_version=1, timestamp=at, workflow_id=1, workflow_name="w",
                      workflow_version=1, display_name="W", mode="DAG"),
        *(ev.ModelCalled(originator_id=run_id, originator_version=n, timestamp=at, visit_uuid="v", node_id="n",
                         model_id="m", purpose="node", attempt=1, latency_ms=2.0, prompt_tokens=10 * n,
                         completion_tokens=n) for n in (2, 3)),
    ]
    row = fold_rows(None, events)
    assert row is not None and (row.prompt_tokens, row.completion_tokens, row.last_event_id) == (50, 5, 3)


@pytest.mark.parametrize("error,code", [
    ("RUN_TIMEOUT: the run took longer than 60 s", "RUN_TIMEOUT"),
    ("internal error: KeyError: 'x'", "INTERNAL_ERROR"),
    ("prompt: missing reference {{research.summary}}", "RUN_FAILED"),
    ("Error: lower case is not a code", "RUN_FAILED"),
    ("", "RUN_FAILED"),
])
def test_the_error_code_is_the_leading_code_of_the_error_text_else_RUN_FAILED(error, code):
    assert error_code_of(error) == code
