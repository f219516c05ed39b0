"""The run row is a pure fold: it agrees with the run summary at every position of every stored log."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from domain import events as ev
from domain.failures import code_of_text
from projections.run_row import RunRow, fold_row, fold_rows, row_view
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
    ("NOT_A_LISTED_CODE: something", "RUN_FAILED"),
    ("internal error: KeyError: 'x'", "INTERNAL_ERROR"),
    ("node 'n' failed: prompt: missing reference {{research.summary}}", "VALIDATION_FAILED"),
    ("node 'n' failed: the node timed out after 5 s (its time limit)", "NODE_TIMEOUT"),
    ("the run timed out after 60 s (its time limit) while waiting for an answer", "RUN_TIMEOUT"),
    ("node 'n' failed: could not reach model 'm' at http://10.0.0.1/v1 (ConnectError)", "MODEL_UNAVAILABLE"),
    ("node 'n' failed: hermes run_lost: the run's status cannot be read", "REMOTE_OUTCOME_UNKNOWN"),
    ("node 'n' failed: hermes run_failed: boom", "REMOTE_FAILED"),
    ("the run reached its limit of 200 visits", "BUDGET_EXHAUSTED"),
    ("no output node ran (every output node was skipped)", "EMPTY_RESULT"),
    ("Error: lower case is not a code", "RUN_FAILED"),
    ("", "RUN_FAILED"),
])
def test_a_failure_stored_without_a_code_gets_the_one_its_text_says(error, code):
    assert code_of_text(error) == code
