"""The visit index: given a run's events, then its visits, logs and §2.2/§2.3 bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from projections.visits import (
    UnknownMetaKind,
    VisitIndex,
    VisitNotFound,
    meta_view,
    node_logs,
    output_view,
    visit_snapshot,
)
from projections.wire import iso_local, iso_utc
from tests.unit.builders import RUN_ID, RunLog, fold, wire


def index_of(run: RunLog, **kwargs) -> VisitIndex:
    return fold(VisitIndex(**kwargs), run.events)


def test_timestamps_render_as_utc_with_z_and_keep_milliseconds():
    at = datetime(2026, 7, 1, 16, 30, 5, 123456, tzinfo=timezone(timedelta(hours=8)))
    assert iso_utc(at) == "2026-07-01T08:30:05.123Z"
    assert iso_utc(datetime(2026, 7, 1, 8, 30, 5)) == "2026-07-01T08:30:05Z"
    assert iso_local(datetime(2026, 7, 1, 8, 30, 5, tzinfo=UTC)) == "2026-07-01T08:30:05"
    assert iso_utc(None) is None


def test_a_started_visit_is_running_with_its_place_in_the_run():
    run = RunLog().created().started()
    a = run.visit("A", node_type="userInput", label="输入")
    b = run.visit("B", after=a)
    index = index_of(run)
    visit = index.get(b)
    assert (visit.node_id, visit.iter_seq, visit.sort_order, visit.status) == ("B", 1, 2, "RUNNING")
    assert (visit.from_node_id, visit.from_visit_uuid, visit.run_id) == ("A", a, RUN_ID.hex)
    assert index.get(a).node_type == "userInput" and index.get(a).node_label == "输入"
    assert iso_utc(visit.started_at) == "2026-07-01T08:30:04Z"


def test_a_completed_visit_keeps_its_output_envelope():
    run = RunLog().created().started()
    a = run.visit("A")
    run.complete(a, {"result": "hello"})
    visit = index_of(run).get(a)
    assert visit.status == "SUCCESS"
    assert visit.output == {"status": 200, "message": "调用成功", "data": {"result": "hello"}}
    assert iso_utc(visit.completed_at) == "2026-07-01T08:30:04Z"


def test_a_failed_visit_keeps_its_error_and_logs_it_last():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "status", "压缩上下文中").fail(a, "boom")
    visit = index_of(run).get(a)
    assert (visit.status, visit.error, visit.output) == ("FAILED", "boom", None)
    assert [(e.type, e.message) for e in visit.logs] == [("STATUS", "压缩上下文中"), ("ERROR", "boom")]


def test_a_skipped_visit_has_the_iter_seq_its_event_recorded():
    run = RunLog().created().started()
    run.complete(run.visit("S"), {})
    s = run.skip("S", iter_seq=7)
    assert index_of(run).get(s).iter_seq == 7


def test_a_skip_stored_before_skips_recorded_their_iter_seq_counts_the_nodes_visits_before_it():
    run = RunLog().created().started()
    run.complete(run.visit("S"), {})
    s = run.skip("S")
    assert index_of(run).get(s).iter_seq == 2


def test_a_skipped_node_is_a_visit_with_status_skipped():
    run = RunLog().created().started()
    s = run.skip("S", reason="branch not taken")
    visit = index_of(run).get(s)
    assert (visit.status, visit.iter_seq, visit.skip_reason) == ("SKIPPED", 1, "branch not taken")


def test_consecutive_thinking_chunks_become_one_thinking_log_entry():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "thinking", "首先").stream(a, "thinking", "我需要搜索")
    run.stream(a, "tool_call", '{"q":1}', "search")
    run.stream(a, "thinking", "然后")
    visit = index_of(run).get(a)
    assert [(e.type, e.message) for e in visit.logs] == [
        ("THINKING", "首先我需要搜索"), ("TOOL_CALL", "search"), ("THINKING", "然后"),
    ]
    assert visit.logs[0].timestamp == "2026-07-01T08:30:04Z"
    assert visit.log.thinking() == "首先我需要搜索\n然后"
    assert visit.logs_count == 3


def test_thinking_of_another_visit_does_not_break_coalescing():
    run = RunLog().created().started()
    a = run.visit("A")
    b = run.visit("B")
    run.stream(a, "thinking", "a1").stream(b, "thinking", "b1").stream(a, "thinking", "a2")
    index = index_of(run)
    assert [e.message for e in index.get(a).logs] == ["a1a2"]


def test_each_stream_kind_maps_to_its_log_type():
    run = RunLog().created().started()
    a = run.visit("A")
    kinds = ["status", "step", "tool_progress", "tool_call", "tool_result", "todo_update"]
    for kind in kinds:
        run.stream(a, kind, f"<{kind}>", "t" if kind.startswith("tool") else None)
    run.ask(a, "clar-1", "哪个版本?", ("v1", "v2"))
    logs = index_of(run).get(a).logs
    assert [e.type for e in logs] == [
        "STATUS", "STEP", "TOOL_PROGRESS", "TOOL_CALL", "TOOL_RESULT", "TODO_UPDATE", "CLARIFY_REQUEST",
    ]
    assert wire(logs[0]) == {"type": "STATUS", "message": "<status>", "detail": None, "timestamp": "2026-07-01T08:30:04Z"}
    assert (logs[3].message, logs[3].detail) == ("t", "<tool_call>")
    assert (logs[5].message, logs[5].detail) == ("todo", "<todo_update>")
    assert json.loads(str(logs[6].detail)) == {"clarify_id": "clar-1", "question": "哪个版本?", "choices": ["v1", "v2"]}


def test_tool_calls_and_results_are_listed_in_order_with_full_content():
    run = RunLog().created().started()
    a = run.visit("A")
    long_args = "x" * 900
    run.stream(a, "tool_call", long_args, "search").stream(a, "tool_result", "结果摘要", "search")
    run.stream(a, "tool_progress", "{}", "search").stream(a, "tool_call", "{x:2}", "calc")
    assert wire(index_of(run).get(a).log.tool_calls()) == [
        {"tool": "search", "args": long_args}, {"tool": "search", "result": "结果摘要"}, {"tool": "calc", "args": "{x:2}"},
    ]


@pytest.mark.parametrize(
    ("content", "todos"),
    [
        ('[{"text": "任务A", "status": "completed"}]', [{"text": "任务A", "status": "completed"}]),
        ('{"todos": [{"text": "任务B", "status": "pending"}]}', [{"text": "任务B", "status": "pending"}]),
        ('{"other": 1}', []),
        ("not json", []),
    ],
)
def test_the_todo_list_is_the_last_todo_update_parsed(content, todos):
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "todo_update", '[{"text": "old"}]', "todo").stream(a, "todo_update", content, "todo")
    assert index_of(run).get(a).log.todo_list() == todos


def test_a_node_visited_twice_has_two_visits_and_the_last_is_the_default():
    run = RunLog().created().started()
    c1 = run.visit("C")
    g = run.visit("G", after=c1)
    c2 = run.visit("C", after=g)
    index = index_of(run)
    assert [v.visit_uuid for v in index.visits_of("C")] == [c1, c2]
    assert index.visit_at("C").visit_uuid == c2
    assert index.visit_at("C", 1).visit_uuid == c1
    assert index.get(c2).iter_seq == 2


def test_visits_are_listed_by_sort_order():
    run = RunLog().created().started()
    late = run.visit("A", sort_order=5)
    early = run.visit("B", sort_order=1)
    assert [v.visit_uuid for v in index_of(run).in_order()] == [early, late]


def test_unknown_visits_and_nodes_raise_visit_not_found():
    index = index_of(RunLog().created())
    with pytest.raises(VisitNotFound):
        index.get("nope")
    with pytest.raises(VisitNotFound):
        index.visit_at("B")
    run = RunLog().created()
    run.visit("B")
    with pytest.raises(VisitNotFound):
        index_of(run).visit_at("B", 2)


def test_the_index_stops_growing_at_its_cap_and_says_it_overflowed():
    run = RunLog().created().started()
    uuids = [run.visit(f"N{i}") for i in range(5)]
    run.stream(uuids[-1], "thinking", "lost")
    index = index_of(run, max_visits=3)
    assert len(index) == 3 and index.overflowed
    assert index.find(uuids[-1]) is None


def test_the_default_cap_is_two_hundred_visits():
    run = RunLog().created().started()
    for _ in range(201):
        run.visit("A")
    index = index_of(run)
    assert len(index) == 200 and index.overflowed


def test_a_visit_snapshot_is_camel_case_with_logs_as_json_text():
    run = RunLog().created().started()
    a = run.visit("A")
    run.stream(a, "thinking", "想").complete(a, {"r": 1})
    snap = wire(visit_snapshot(index_of(run).get(a)))
    assert snap["visitUuid"] == a and snap["runId"] == RUN_ID.hex and snap["iterSeq"] == 1
    assert snap["status"] == "SUCCESS" and snap["completedAt"] == "2026-07-01T08:30:05Z"
    assert json.loads(snap["logsJson"]) == [
        {"type": "THINKING", "message": "想", "detail": None, "timestamp": "2026-07-01T08:30:04Z"},
    ]
    assert snap["logsCount"] == 1


def _b_run() -> tuple[RunLog, str, str]:
    run = RunLog().created().started()
    a = run.visit("A")
    b1 = run.visit("B", after=a)
    run.stream(b1, "thinking", "第一步").stream(b1, "tool_call", "{q:1}", "search")
    run.stream(b1, "thinking", "第二步").complete(b1, {"result": "hello", "count": 10})
    b2 = run.visit("B", after=b1)
    run.stream(b2, "todo_update", '[{"text": "任务A", "status": "completed"}]', "todo")
    run.complete(b2, {"result": "again"})
    return run, b1, b2


def test_the_output_view_returns_the_whole_data_of_the_last_visit_by_default():
    run, _, b2 = _b_run()
    assert wire(output_view(index_of(run), "B")) == {
        "nodeId": "B", "iterSeq": 2, "visitUuid": b2, "status": 200, "message": "调用成功",
        "data": {"result": "again"}, "requestedField": None,
    }


def test_the_output_view_returns_one_field_of_the_chosen_visit():
    run, b1, _ = _b_run()
    assert wire(output_view(index_of(run), "B", "result", 1)) == {
        "nodeId": "B", "iterSeq": 1, "visitUuid": b1, "status": 200, "message": "调用成功",
        "data": "hello", "requestedField": "result",
    }
    assert output_view(index_of(run), "B", "missing", 1).data is None


def test_the_output_view_of_an_unknown_node_raises_visit_not_found():
    run, _, _ = _b_run()
    with pytest.raises(VisitNotFound):
        output_view(index_of(run), "Z")


def test_the_meta_view_gives_thinking_tool_calls_or_todo_by_kind():
    run, b1, b2 = _b_run()
    index = index_of(run)
    ref = {"nodeId": "B", "iterSeq": 1, "visitUuid": b1}
    assert wire(meta_view(index, None, "B", "THINKING", 1)) == {**ref, "thinking": "第一步\n第二步"}
    assert wire(meta_view(index, b1, None, "TOOL_CALLS")) == {**ref, "toolCalls": [{"tool": "search", "args": "{q:1}"}]}
    assert wire(meta_view(index, None, "B", "TODO")) == {
        "nodeId": "B", "iterSeq": 2, "visitUuid": b2, "todoList": [{"text": "任务A", "status": "completed"}],
    }


def test_the_meta_view_of_kind_all_includes_the_raw_logs_and_is_the_default():
    run, b1, _ = _b_run()
    body = wire(meta_view(index_of(run), b1, "ignored", None))
    assert set(body) == {"nodeId", "iterSeq", "visitUuid", "thinking", "toolCalls", "todoList", "logs"}
    assert [e["type"] for e in body["logs"]] == ["THINKING", "TOOL_CALL", "THINKING"]
    assert body["todoList"] == []


def test_the_meta_view_refuses_unknown_kinds_and_missing_visits():
    run, b1, _ = _b_run()
    index = index_of(run)
    with pytest.raises(UnknownMetaKind):
        meta_view(index, b1, None, "SECRETS")
    with pytest.raises(VisitNotFound):
        meta_view(index, "nope", None, "ALL")
    with pytest.raises(VisitNotFound):
        meta_view(index, None, None, "ALL")


def test_node_logs_are_the_logs_of_every_visit_of_the_node_in_order():
    run, _, _ = _b_run()
    index = index_of(run)
    assert [e.type for e in node_logs(index, "B")] == ["THINKING", "TOOL_CALL", "THINKING", "TODO_UPDATE"]
    with pytest.raises(VisitNotFound):
        node_logs(index, "Z")


def test_a_forgotten_visit_is_gone_from_every_lookup():
    run = RunLog()
    run.created().started()
    a, b = run.visit("A"), run.visit("B")
    index = index_of(run)
    index.forget(a)
    assert index.find(a) is None and index.visits_of("A") == [] and [v.visit_uuid for v in index.in_order()] == [b]
