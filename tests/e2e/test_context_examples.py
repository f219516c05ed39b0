"""Every example of §2, over real HTTP, on both stores: from memory and, identically, from the store."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from domain import run as decide
from engine.context.views import output_body
from projections.wire import to_json
from tests.support.context_runs import (
    B_OUTPUT,
    B_TODOS,
    ContextClient,
    ExampleRun,
    Visits,
    back_edge_run,
    join_run,
    linear_run,
)
from tests.support.runs import new_run
from tests.support.server import RunningServer, free_port, server_settings


async def ask_both_ways(server, example: ExampleRun, what: str, **body) -> dict:
    """The answer from memory and, after the run goes cold, from the store; asserts they are byte-identical."""
    services = server.services
    token = services.tokens.issue(example.run_id, example.asker)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        hot = await client.post(what, **body)
        await services.runs.release(example.run_id)
        services.hot_runs.forget(example.run_id)
        cold = await client.post(what, **body)
    assert (hot.status_code, hot.headers["x-context-source"]) == (200, "memory")
    assert (cold.status_code, cold.headers["x-context-source"]) == (200, "store")
    assert hot.content == cold.content
    body = hot.json()
    assert (body["code"], body["message"]) == (200, "success")
    return body["data"]


async def ask(server, example: ExampleRun, what: str, **body):
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        return await client.post(what, **body)


async def test_the_path_of_a_linear_run_is_the_first_example(server):
    example = await linear_run(server.services)
    assert await ask_both_ways(server, example, "path", visitUuid="v4") == {
        "visitUuids": ["v1", "v2", "v3", "v4"],
        "nodeIds": ["A", "B", "C", "G"],
        "paths": [{"sequence": ["A", "B", "C", "G"], "visitUuids": ["v1", "v2", "v3", "v4"], "hasBacktrack": False}],
        "backtrackEdgeKeys": [],
        "truncated": False,
    }


async def test_the_path_of_a_revisit_marks_the_back_edge_as_in_the_second_example(server):
    example = await back_edge_run(server.services)
    assert await ask_both_ways(server, example, "path", visitUuid="v4") == {
        "visitUuids": ["v1", "v2", "v3", "v4"],
        "nodeIds": ["A", "B", "G", "C"],
        "paths": [{"sequence": ["A", "B", "G", "C"], "visitUuids": ["v1", "v2", "v3", "v4"], "hasBacktrack": True}],
        "backtrackEdgeKeys": ["G->C"],
        "truncated": False,
    }


async def test_a_path_query_without_a_visit_uuid_answers_for_the_asking_visit(server):
    example = await linear_run(server.services)
    assert (await ask_both_ways(server, example, "path"))["visitUuids"] == ["v1", "v2", "v3", "v4"]


async def test_a_dag_join_gives_one_path_per_branch(server):
    example = await join_run(server.services)
    data = await ask_both_ways(server, example, "path", visitUuid="d")
    assert [p["sequence"] for p in data["paths"]] == [["A", "B", "D"], ["A", "C", "D"]]
    assert (data["visitUuids"], data["nodeIds"]) == (["a", "b", "c", "d"], ["A", "B", "C", "D"])


async def test_the_output_envelope_of_a_node_is_its_whole_data(server):
    example = await linear_run(server.services)
    assert await ask_both_ways(server, example, "output", nodeId="B", field=None, iterSeq=None) == {
        "nodeId": "B", "iterSeq": 1, "visitUuid": "v2", "status": 200, "message": "调用成功",
        "data": B_OUTPUT["data"], "requestedField": None,
    }


async def test_a_single_field_of_the_output_is_returned_alone(server):
    example = await linear_run(server.services)
    assert await ask_both_ways(server, example, "output", nodeId="B", field="result", iterSeq=None) == {
        "nodeId": "B", "iterSeq": 1, "visitUuid": "v2", "status": 200, "message": "调用成功",
        "data": "hello", "requestedField": "result",
    }


async def test_the_iter_seq_picks_a_visit_and_null_picks_the_last_one_before_the_asker(server):
    example = await back_edge_run(server.services)
    last = await ask_both_ways(server, example, "output", nodeId="C")
    assert (last["visitUuid"], last["iterSeq"]) == ("c1", 1)
    first = await ask(server, example, "output", nodeId="C", iterSeq=1)
    assert first.json()["data"]["visitUuid"] == "c1"


async def test_meta_thinking_joins_the_thinking_steps(server):
    example = await linear_run(server.services)
    assert await ask_both_ways(server, example, "meta", visitUuid=None, nodeId="B", kind="THINKING", iterSeq=None) == {
        "nodeId": "B", "iterSeq": 1, "visitUuid": "v2", "thinking": "第一步\n第二步",
    }


async def test_meta_tool_calls_lists_calls_and_results_in_order(server):
    example = await linear_run(server.services)
    assert await ask_both_ways(server, example, "meta", nodeId="B", kind="TOOL_CALLS") == {
        "nodeId": "B", "iterSeq": 1, "visitUuid": "v2",
        "toolCalls": [
            {"tool": "search", "args": "{q:1}"},
            {"tool": "search", "result": "结果摘要"},
            {"tool": "calc", "args": "{x:2}"},
        ],
    }


async def test_meta_todo_is_the_last_todo_update(server):
    example = await linear_run(server.services)
    assert await ask_both_ways(server, example, "meta", nodeId="B", kind="TODO") == {
        "nodeId": "B", "iterSeq": 1, "visitUuid": "v2", "todoList": B_TODOS,
    }


@pytest.mark.parametrize("kind", ["ALL", None])
async def test_meta_all_carries_everything_with_the_raw_logs(server, kind):
    example = await linear_run(server.services)
    data = await ask_both_ways(server, example, "meta", nodeId="B", kind=kind)
    assert data["thinking"] == "第一步\n第二步"
    assert len(data["toolCalls"]) == 3 and data["todoList"] == B_TODOS
    assert [entry["type"] for entry in data["logs"]] == [
        "THINKING", "STATUS", "THINKING", "TOOL_CALL", "TOOL_RESULT", "TOOL_CALL", "TODO_UPDATE", "TODO_UPDATE",
    ]
    assert data["logs"][3] == {**data["logs"][3], "message": "search", "detail": "{q:1}"}
    assert all(set(entry) == {"type", "timestamp", "message", "detail"} for entry in data["logs"])


async def test_meta_by_visit_uuid_wins_over_the_node_id(server):
    example = await linear_run(server.services)
    data = await ask_both_ways(server, example, "meta", visitUuid="v2", nodeId="C", kind="THINKING")
    assert (data["nodeId"], data["visitUuid"]) == ("B", "v2")


async def test_after_a_restart_the_same_answers_come_from_the_store(store, tmp_path):
    settings = server_settings(store, tmp_path / "data")
    queries = [("path", {}), ("output", {"nodeId": "B"}), ("meta", {"nodeId": "B", "kind": "ALL"})]
    first = await RunningServer(settings).start()
    example = await linear_run(first.services)
    writer = await first.services.runs.writer(example.run_id)
    await writer.decide(lambda run, at: decide.request_clarify(  # paused on a question: the restart leaves it be
        run, at, clarify_id="q1", visit_uuid="v4", node_id="G", question="Which one?"))
    before = [await ask(first, example, what, **body) for what, body in queries]
    await first.stop()
    second = await RunningServer(replace(settings, port=free_port())).start()
    try:
        after = [await ask(second, example, what, **body) for what, body in queries]
    finally:
        await second.stop()
    assert [r.headers["x-context-source"] for r in before + after] == ["memory"] * 3 + ["store"] * 3
    assert [r.content for r in before] == [r.content for r in after]


async def test_a_finished_run_is_served_from_memory_while_held_then_from_the_store_and_30_minutes_once_read_again(server):
    services = server.services
    example = await linear_run(services)
    writer = await services.runs.writer(example.run_id)
    await writer.decide(
        lambda run, at: decide.complete_visit(run, at, visit_uuid="v4", node_id="G", output={"data": {}}),
        lambda run, at: decide.complete_run(run, at, output={"status": 200, "message": "done", "data": {}}),
    )
    held = services.hot_runs.find(example.run_id)
    assert (await services.context.run_index(example.run_id))[1] == "memory"
    await services.runs.release(example.run_id)
    index, source = await services.context.run_index(example.run_id)
    assert source == "store" and services.hot_runs.find(example.run_id) is None and len(index) == len(held.sse.index)
    hot = await services.runs.hot(example.run_id)
    assert (await services.context.run_index(example.run_id))[1] == "memory"
    hot.summary.completed_at -= timedelta(minutes=29)
    assert (await services.context.run_index(example.run_id))[1] == "memory"
    hot.summary.completed_at -= timedelta(minutes=1)
    index, source = await services.context.run_index(example.run_id)
    assert source == "store" and index is not hot.sse.index and len(index) == len(hot.sse.index)


async def test_a_cold_run_is_caught_up_from_the_log_on_every_read(server):
    services = server.services
    run_id = await new_run(services)
    visits = Visits(await services.runs.writer(run_id))
    await visits.visit("A", "a")
    await visits.open("B", "b", after="a")
    await visits.open("D", "d", after="a")
    example = ExampleRun(run_id, "d")
    token = services.tokens.issue(run_id, "d")
    services.hot_runs.forget(run_id)
    async with ContextClient(server.base_url, run_id, token) as client:
        before = await client.post("output", nodeId="B")
        await visits.close("B", "b", B_OUTPUT)
        after = await client.post("output", nodeId="B")
    assert (before.json()["data"]["status"], after.json()["data"]["status"]) == (None, 200)
    assert after.headers["x-context-source"] == "store"
    fresh = await services.context.asker_view(services.tokens.authenticate(token))
    assert after.json()["data"] == json.loads(to_json(output_body(fresh, "B", None, None)))
    assert example.asker == fresh.asker.visit_uuid
