"""The run summary: given a run's events, then its status, outputs and current pause."""

from __future__ import annotations

from api.views import state_view
from domain.run import RunStatus
from domain.run import fold as domain_fold
from projections.summary import RunSummary, node_list, summarize
from projections.visits import VisitIndex
from tests.unit.builders import RUN_ID, RunLog, fold, wire


def test_a_created_run_is_created_and_keeps_what_the_caller_sent():
    run = RunLog().created(variables={"topic": "AI"}, uploaded_files=("a.md",), ttl_hours=24,
                           caller_key_id="key-1", idempotency_key="idem-1")
    summary = summarize(run.events)
    assert summary.external_status == "CREATED"
    body = summary.as_dict()
    assert body["runId"] == RUN_ID.hex and body["workflowId"] == 12
    assert (body["workflowName"], body["workflowVersion"], body["displayName"], body["mode"]) == (
        "military-analyze-agent", 1, "军事分析助手", "AGENTIC")
    assert (body["variables"], body["uploadedFiles"], body["ttlHours"]) == ({"topic": "AI"}, ["a.md"], 24)
    assert (body["callerKeyId"], body["idempotencyKey"]) == ("key-1", "idem-1")
    assert body["createdAt"] == "2026-07-01T08:30:01Z" and body["startedAt"] is None


def test_a_started_run_is_running():
    summary = summarize(RunLog().created().started().events)
    assert summary.external_status == "RUNNING"
    assert summary.as_dict()["startedAt"] == "2026-07-01T08:30:02Z"


def test_a_question_pauses_the_run_but_it_still_reads_as_running_with_a_current_pause():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "clar-1", "哪个版本?", ("v1", "v2"))
    summary = summarize(run.events)
    assert summary.status.value == "paused" and summary.external_status == "RUNNING"
    assert wire(state_view(summary)) == {
        "runId": RUN_ID.hex,
        "status": "RUNNING",
        "currentPause": {"clarifyId": "clar-1", "nodeId": "A", "question": "哪个版本?",
                         "choices": ["v1", "v2"], "createdAt": "2026-07-01T08:30:04"},
    }
    assert summary.asked_clarify_ids == {"clar-1"}


def test_an_answer_clears_the_pause_and_the_run_goes_on():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "clar-1", "?").answer("clar-1", "v2")
    summary = summarize(run.events)
    assert summary.current_pause is None and summary.status.value == "running"
    assert summary.answered_clarify_ids == {"clar-1"}


def test_a_cancel_request_keeps_the_run_running_until_it_is_cancelled():
    run = RunLog().created().started().request_cancel("user")
    summary = summarize(run.events)
    assert summary.external_status == "RUNNING" and summary.cancel_requested and not summary.cancelled
    assert summary.as_dict()["cancelRequestedAt"] == "2026-07-01T08:30:03Z"
    run.cancel("user")
    summary = summarize(run.events)
    assert summary.external_status == "FAILED" and summary.cancelled
    assert summary.error == "cancelled: user" and summary.as_dict()["completedAt"] == "2026-07-01T08:30:04Z"


def test_a_run_asked_to_cancel_before_it_started_reads_created_until_it_is_cancelled():
    run = RunLog().created().request_cancel()
    summary = summarize(run.events)
    assert (summary.external_status, summary.cancel_requested, summary.started_at) == ("CREATED", True, None)
    assert state_view(summary).status == "CREATED" and summary.as_dict()["status"] == "CREATED"
    assert summarize(run.cancel().events).external_status == "FAILED"


def test_an_answer_after_a_cancel_request_leaves_the_run_cancel_requested():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "clar-1", "?").request_cancel().answer("clar-1", "x")
    assert summarize(run.events).status.value == "cancel_requested"


def test_a_cancel_without_reason_reads_run_cancelled():
    run = RunLog().created().started().request_cancel().cancel()
    assert summarize(run.events).error == "run cancelled"


def test_a_completed_run_is_success_with_its_outputs_and_files():
    run = RunLog().created().started().finish({"summary": "本报告"}, ("out/report.md",))
    body = summarize(run.events).as_dict()
    assert body["status"] == "SUCCESS" and body["error"] is None
    assert body["outputs"] == {"status": 200, "message": "工作流执行成功", "data": {"summary": "本报告"}}
    assert body["workingDirFiles"] == ["out/report.md"] and body["completedAt"] == "2026-07-01T08:30:03Z"


def test_a_failed_run_is_failed_with_its_error_and_no_pause():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "clar-1", "?").fail_run("boom")
    summary = summarize(run.events)
    assert (summary.external_status, summary.error, summary.current_pause) == ("FAILED", "boom", None)


def test_last_event_id_counts_every_event_and_last_sse_id_only_those_clients_see():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "clar-1", "?").answer("clar-1", "ok").request_cancel()
    summary = summarize(run.events)
    assert summary.last_event_id == 6
    assert summary.last_sse_id == 4


def test_a_summary_that_has_seen_nothing_reads_created():
    summary = RunSummary()
    assert summary.run is None and summary.external_status == "CREATED" and summary.last_event_id == 0


def test_the_node_list_shows_each_node_by_its_last_visit_with_all_logs_counted():
    run = RunLog().created().started()
    a = run.visit("A")
    b1 = run.visit("B", after=a)
    run.stream(b1, "thinking", "想").stream(b1, "tool_call", "{}", "search").complete(b1, {"result": "hello"})
    b2 = run.visit("B", after=b1)
    run.stream(b2, "status", "s").stream(b2, "thinking", "再想").complete(b2, {"result": "again"})
    views = node_list(fold(VisitIndex(), run.events))
    assert [v.node_id for v in views] == ["A", "B"]
    assert wire(views[1]) == {
        "nodeId": "B", "nodeType": "agent", "label": "B", "status": "SUCCESS",
        "output": {"status": 200, "message": "调用成功", "data": {"result": "again"}}, "error": None, "logsCount": 4,
    }


def test_the_summary_holds_the_domain_run_folded_from_the_same_events():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "thinking", "想").ask(a, "clar-1", "?").answer("clar-1", "x").stream(a, "status", "s")
    run.complete(a, {"r": 1}).request_cancel("user").cancel("user")
    summary = summarize(run.events)
    assert summary.run is not None and summary.run == domain_fold(run.events)
    assert (summary.status, summary.cancel_requested, summary.cancelled) == (RunStatus.CANCELLED, True, True)
    assert summary.answered_clarify_ids == summary.run.answered_clarify_ids == {"clar-1"}


def test_the_summary_reads_the_pause_from_the_domain_runs_pending_question():
    run = RunLog().created().started()
    run.ask(run.visit("A"), "clar-1", "哪个版本?", ("v1", "v2"))
    summary = summarize(run.events)
    pending, pause = summary.run.pending_clarify if summary.run else None, summary.current_pause
    assert pending is not None and pause is not None and pending.clarify_id == pause.clarify_id == "clar-1"


def test_token_totals_are_the_sums_over_every_model_call_and_model_calls_are_not_sse_messages():
    run = RunLog().created().started()
    a = run.visit("A")
    run.model_called(a, error_code="HTTP_500").model_called(a, attempt=2, prompt_tokens=11, completion_tokens=7)
    run.model_called(purpose="planner", prompt_tokens=30, completion_tokens=4)
    summary = summarize(run.events)
    assert (summary.prompt_tokens, summary.completion_tokens) == (41, 11)
    assert summary.as_dict()["usage"] == {"promptTokens": 41, "completionTokens": 11}
    assert (summary.last_event_id, summary.last_sse_id) == (6, 3)


def test_a_run_without_model_calls_has_zero_tokens():
    assert summarize(RunLog().created().started().events).as_dict()["usage"] == {"promptTokens": 0, "completionTokens": 0}
