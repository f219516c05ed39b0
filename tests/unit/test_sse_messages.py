"""SSE messages: given a run's events, then the messages a stream client receives."""

from __future__ import annotations

import json

import msgspec
import pytest
from litestar.response import ServerSentEventMessage

from api.sse import encode_frame
from projections.sse import SseMessage, SseProjection, is_terminal_message, render_all
from tests.unit.builders import RUN_ID, RunLog

RID = RUN_ID.hex


def bodies(run: RunLog, after: int = 0) -> dict[int, tuple[str, dict]]:
    return {m.id: (m.event, json.loads(m.data)) for m in render_all(run.events, after)}


def test_creating_starting_answering_and_cancel_requests_send_nothing():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "c1", "?").answer("c1", "x").request_cancel()
    projection = SseProjection()
    silent = [projection.apply(e) for e in run.events]
    assert [m is None for m in silent] == [True, True, False, False, True, True]


def test_a_started_visit_is_a_running_node_status_with_type_and_label():
    run = RunLog().created().started()
    run.visit("node-2", "5c1f", node_type="agent", label="研究助手")
    assert bodies(run)[3] == ("node_status", {
        "runId": RID, "type": "node_status", "nodeId": "node-2", "visitUuid": "5c1f", "status": "RUNNING",
        "nodeType": "agent", "nodeLabel": "研究助手",
    })


def test_a_completed_visit_is_a_success_node_status_with_output_logs_and_context():
    run = RunLog().created(variables={"topic": "AI"}).started()
    a = run.visit("A")
    run.stream(a, "thinking", "想").complete(a, {"r": 1})
    event, body = bodies(run)[5]
    assert event == "node_status"
    assert body == {
        "runId": RID, "type": "node_status", "nodeId": "A", "visitUuid": a, "status": "SUCCESS",
        "output": {"status": 200, "message": "调用成功", "data": {"r": 1}}, "error": None,
        "logs": [{"type": "THINKING", "message": "想", "detail": None, "timestamp": "2026-07-01T08:30:04Z"}],
        "contextSnapshot": {"topic": "AI", "A": {"r": 1}},
    }


def test_a_failed_visit_is_a_failed_node_status_with_its_error_logged():
    run = RunLog().created().started()
    a = run.visit("A")
    run.fail(a, "boom")
    _, body = bodies(run)[4]
    assert (body["status"], body["error"], body["output"]) == ("FAILED", "boom", None)
    assert [e["type"] for e in body["logs"]] == ["ERROR"]


def test_a_skipped_visit_is_a_skipped_node_status():
    run = RunLog().created().started()
    s = run.skip("S")
    _, body = bodies(run)[3]
    assert (body["nodeId"], body["visitUuid"], body["status"], body["output"], body["error"], body["logs"]) == (
        "S", s, "SKIPPED", None, None, [])


def test_a_stream_chunk_is_a_node_stream_message():
    run = RunLog().created().started()
    a = run.visit("node-2", "5c1f")
    run.stream(a, "thinking", "首先我需要搜索相关资料...")
    message = render_all(run.events)[-1]
    assert message.data == (
        '{"runId":"%s","type":"node_stream","nodeId":"node-2","visitUuid":"5c1f","kind":"thinking",'
        '"content":"首先我需要搜索相关资料...","toolName":null}' % RID
    ).encode()


@pytest.mark.parametrize("kind", ["tool_call", "tool_result"])
def test_tool_calls_and_results_are_cut_to_500_characters_in_the_message_but_not_in_the_logs(kind):
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, kind, "字" * 800, "search").complete(a)
    sent = bodies(run)
    assert sent[4][1]["content"] == "字" * 500 and sent[4][1]["toolName"] == "search"
    assert sent[5][1]["logs"][0]["detail"] == "字" * 800


def test_other_stream_kinds_are_not_cut():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "tool_progress", "p" * 800, "search")
    assert len(bodies(run)[4][1]["content"]) == 800


def test_a_question_is_a_clarify_request_node_stream():
    run = RunLog().created().started()
    a = run.visit("A")
    run.ask(a, "clar-5678", "哪个版本?", ("v1.0", "v2.0"))
    event, body = bodies(run)[4]
    assert (event, body["kind"], body["toolName"], body["nodeId"], body["visitUuid"]) == (
        "node_stream", "clarify_request", None, "A", a)
    assert json.loads(body["content"]) == {"clarify_id": "clar-5678", "question": "哪个版本?", "choices": ["v1.0", "v2.0"]}


def test_a_recorded_visit_carries_its_snapshot_with_logs_json():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "status", "ok").complete(a, {"r": 1}).record(a)
    event, body = bodies(run)[6]
    assert event == "visit_recorded" and body["runId"] == RID and body["type"] == "visit_recorded"
    visit = body["visit"]
    assert (visit["visitUuid"], visit["sortOrder"], visit["iterSeq"], visit["fromNodeId"]) == (a, 1, 1, None)
    assert [e["type"] for e in json.loads(visit["logsJson"])] == ["STATUS"]


def test_a_planner_decision_carries_next_node_reason_and_origin():
    run = RunLog().created().started().decide("C", "需要更多资料", "G")
    assert bodies(run)[3] == ("planner_decision", {
        "runId": RID, "type": "planner_decision",
        "decision": {"nextNodeId": "C", "reason": "需要更多资料", "fromNodeId": "G"},
    })


def test_a_completed_run_is_a_workflow_complete_message():
    run = RunLog().created().started().finish({"summary": "s"}, ("a.md",))
    assert bodies(run)[3] == ("workflow_complete", {
        "runId": RID, "type": "workflow_complete",
        "output": {"status": 200, "message": "工作流执行成功", "data": {"summary": "s"}},
        "success": True, "workingDirFiles": ["a.md"],
    })


def test_a_failed_run_is_a_workflow_error_message():
    run = RunLog().created().started().fail_run("boom")
    assert bodies(run)[3] == ("workflow_error", {
        "runId": RID, "type": "workflow_error", "error": "boom", "success": False, "errorCode": "RUN_FAILED",
    })


@pytest.mark.parametrize(("reason", "error"), [("user asked", "cancelled: user asked"), ("", "run cancelled")])
def test_a_cancelled_run_is_a_workflow_error_message(reason, error):
    run = RunLog().created().started().request_cancel().cancel(reason)
    assert bodies(run)[4] == ("workflow_error", {
        "runId": RID, "type": "workflow_error", "error": error, "success": False, "errorCode": "RUN_CANCELLED",
    })


def test_only_workflow_complete_and_workflow_error_are_terminal():
    assert is_terminal_message(SseMessage(1, "workflow_complete", b"{}"))
    assert is_terminal_message(SseMessage(1, "workflow_error", b"{}"))
    assert not is_terminal_message(SseMessage(1, "node_status", b"{}"))


def test_message_ids_are_event_positions_and_a_resume_returns_only_later_ones():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "thinking", "x").complete(a).record(a).finish()
    assert [m.id for m in render_all(run.events)] == [3, 4, 5, 6, 7]
    assert [m.id for m in render_all(run.events, after=5)] == [6, 7]


def test_messages_are_frozen_structs_of_compact_json():
    message = render_all(RunLog().created().started().fail_run("x").events)[0]
    with pytest.raises(AttributeError):
        message.id = 9
    assert b" " not in message.data and msgspec.json.decode(message.data)["error"] == "x"


def test_a_ten_thousand_event_run_folds_into_one_message_per_visible_event():
    run = RunLog().created().started()
    while len(run.events) < 9_990:
        v = run.visit(f"N{len(run.events) % 7}")
        for i in range(97):
            run.stream(v, "thinking" if i % 3 else "tool_call", f"chunk {i}", "search")
        run.complete(v, {"i": len(run.events)}).record(v)
    run.finish()
    messages = render_all(run.events)
    assert len(run.events) >= 10_000
    assert [m.id for m in messages] == list(range(3, len(run.events) + 1))
    assert is_terminal_message(messages[-1])


def test_a_model_call_sends_nothing_and_its_position_is_a_gap_in_the_ids():
    run = RunLog().created().started()
    a = run.visit("A")
    run.model_called(a, error_code="HTTP_429").model_called(a, attempt=2, prompt_tokens=5).stream(a, "status", "ok")
    assert list(bodies(run)) == [3, 6]


@pytest.mark.parametrize("data", [
    b'{"content":"one line, \\"quoted\\", \\\\n escaped"}', "\u00e9\u20ac\U0001f600".encode(), b"", b"a\nb", b"a\r\nb\rc",
])
@pytest.mark.parametrize("event", ["node_stream", "two\nlines"])
def test_a_frame_has_the_same_bytes_litestar_gives_it(data, event):
    message = SseMessage(42, event, data)
    assert encode_frame(message) == ServerSentEventMessage(data=data, event=event, id=42).encode()
