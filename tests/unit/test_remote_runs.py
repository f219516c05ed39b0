"""A visit's gateway runs as the log records them: folded back for a resume, named in the run's error, kept free of
internal addresses."""

from __future__ import annotations

import msgspec

from api.schemas import RunView, TokenUsage, WorkspaceView
from domain import events as ev
from domain.failures import code_of_text, without_addresses
from engine.execution.outcomes import node_failed
from engine.execution.progress import fold_progress
from engine.hermes.gateway_run import RemoteOutcomeUnknown, ending_of
from engine.hermes.ports import REMOTE_EVENTS, remote_runs
from projections.sse import produces_sse_message
from projections.summary import summarize
from tests.unit.builders import RunLog


def visit_with_runs() -> tuple[RunLog, str]:
    log = RunLog().created().started()
    visit = log.visit("work")
    log.remote_run(visit, attempt=1, remote_run_id="run_a", outcome="completed", output="Hello")
    log.remote_run(visit, attempt=2, remote_run_id="run_b", stop="cancelled")
    return log, visit


def test_a_visits_gateway_runs_fold_back_in_order_with_their_ids_stops_and_ends():
    log, visit = visit_with_runs()
    progress = fold_progress(log.events)
    first, second = remote_runs(progress.visits[visit].remote_events)
    assert (first.attempt, first.remote_run_id, first.ended.outcome, first.ended.output) == (1, "run_a", "completed", "Hello")
    assert (second.attempt, second.remote_run_id, second.stop_reason, second.ended) == (2, "run_b", "cancelled", None)


def test_a_submission_the_gateway_never_answered_is_a_run_without_an_id():
    log = RunLog().created().started()
    visit = log.visit("work")
    log.remote_run(visit, remote_run_id=None)
    (run,) = remote_runs(fold_progress(log.events).visits[visit].remote_events)
    assert (run.remote_run_id, run.ended) == ("", None)


def test_a_gateway_run_fact_marks_the_visit_as_interrupted_when_the_engine_stops():
    log, visit = visit_with_runs()
    assert fold_progress(log.events).visits[visit].interrupted
    assert {type(event) for event in log.events} >= set(REMOTE_EVENTS)


def test_a_node_failure_with_a_leading_code_lifts_the_code_to_the_runs_error():
    unknown = str(RemoteOutcomeUnknown("the gateway no longer knows the run"))
    error = node_failed("work", unknown)
    assert error == "REMOTE_OUTCOME_UNKNOWN: node 'work' failed: hermes remote_outcome_unknown: the gateway no longer knows the run"
    assert code_of_text(error) == "REMOTE_OUTCOME_UNKNOWN"
    assert node_failed("work", "hermes run_failed: boom") == "node 'work' failed: hermes run_failed: boom"


def test_urls_and_ip_addresses_in_a_gateways_error_are_replaced():
    text = "Connection error to http://10.0.0.5:8000/v1/chat (via 192.168.1.2:3128) at https://llm.internal/x?k=1"
    assert without_addresses(text) == "Connection error to [address] (via [address]) at [address]"


def test_a_gateway_status_or_terminal_event_tells_its_end_and_a_running_one_none():
    assert ending_of({"status": "running"}) is None and ending_of({"event": "message.delta"}) is None
    done = ending_of({"event": "run.completed", "output": "Hi", "usage": {"input_tokens": 3}})
    assert done == ending_of({"status": "completed", "output": "Hi", "usage": {"input_tokens": 3}})
    assert done is not None and (done.status, done.output, done.usage) == ("completed", "Hi", {"input_tokens": 3})
    failed = ending_of({"status": "failed", "error": "model at http://10.1.1.1:9 refused"})
    assert failed is not None and failed.error == "model at [address] refused"


def test_every_remote_event_is_silent_on_the_stream():
    log, _ = visit_with_runs()
    assert not any(produces_sse_message(event) for event in log.events if isinstance(event, REMOTE_EVENTS))
    assert ev.RemoteRunEnded in REMOTE_EVENTS


def test_get_run_names_remote_work_that_may_still_run_only_when_there_is_some():
    view = RunView(run_id="r", workflow_id=1, workflow_name="w", display_name="W", status="FAILED", created_at=None,
                   started_at=None, completed_at=None, error="cancelled", outputs=None, nodes=[],
                   workspace=WorkspaceView(file_count=0, total_bytes=0, download_url="/w"), cancel_requested=True,
                   cancelled=True, usage=TokenUsage(prompt_tokens=0, completion_tokens=0))
    assert "remoteWorkMayBeRunning" not in msgspec.json.decode(msgspec.json.encode(view))
    unsettled = msgspec.structs.replace(view, remote_work_may_be_running=True)
    assert msgspec.json.decode(msgspec.json.encode(unsettled))["remoteWorkMayBeRunning"] is True


def test_a_stop_not_confirmed_or_an_unknown_outcome_means_remote_work_may_still_run_and_tokens_count():
    log = RunLog().created().started()
    visit = log.visit("work")
    log.remote_run(visit, attempt=1, outcome="completed", prompt_tokens=123, completion_tokens=45)
    assert not summarize(log.events).remote_work_may_be_running
    log.remote_run(visit, attempt=2, stop="cancelled", outcome="stop_unconfirmed", prompt_tokens=7)
    summary = summarize(log.events)
    assert summary.remote_work_may_be_running and (summary.prompt_tokens, summary.completion_tokens) == (130, 45)
