"""The stream's opt-in snapshot mode and its event-type and node filters, over real HTTP."""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from tests.support.api import (
    ask,
    complete_visit,
    finish,
    open_visit,
    stream,
)
from tests.support.sse import read_stream

BASE = "/api/v1/workflows/military-analyze-agent/runs"

async def busy_run(api, client, *, done: bool) -> tuple[str, str, str]:
    """A run with a finished visit of node-2 and an open visit of node-3 that asked a question."""
    run_id = (await client.post(BASE, json={"variables": {"topic": "tides"}})).json()["data"]["runId"]
    await client.post(f"{BASE}/{run_id}/start")
    services, rid = api.services, UUID(run_id)
    first = await open_visit(services, rid)
    await stream(services, rid, first, "thinking", "想一想")
    await complete_visit(services, rid, first)
    second = await open_visit(services, rid, node_id="node-3", label="输出")
    await stream(services, rid, second, "status", "写作中", node_id="node-3")
    if done:
        await complete_visit(services, rid, second, node_id="node-3")
        await finish(services, rid)
    else:
        await ask(services, rid, second, "clar-1", "继续吗?", ("是", "否"), node_id="node-3")
    return run_id, first, second


async def test_a_snapshot_first_sends_every_visit_then_goes_on_live(api, client):
    run_id, first, second = await busy_run(api, client, done=False)
    hot = await api.services.runs.hot(UUID(run_id))
    got = await read_stream(client, f"{BASE}/{run_id}/stream?snapshot=true", stop_after=1)
    assert got.events == ["snapshot"] and got.ids == [hot.version]
    snap = got.data[0]
    assert (snap["runId"], snap["type"], snap["status"], snap["cancelRequested"], snap["cancelled"]) == (
        run_id, "snapshot", "RUNNING", False, False)
    assert snap["currentPause"]["clarifyId"] == "clar-1" and snap["currentPause"]["choices"] == ["是", "否"]
    visits = snap["visits"]
    assert [(v["visitUuid"], v["nodeId"], v["status"]) for v in visits] == [
        (first, "node-2", "SUCCESS"), (second, "node-3", "RUNNING")]
    first_log = json.loads(visits[0]["logsJson"])[0]
    assert (first_log["type"], first_log["message"]) == ("THINKING", "想一想")
    await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": "clar-1", "answer": "是"})
    await complete_visit(api.services, UUID(run_id), second, node_id="node-3")
    await finish(api.services, UUID(run_id))
    rest = await read_stream(client, f"{BASE}/{run_id}/stream", last_event_id=got.ids[0])
    assert rest.events == ["node_status", "visit_recorded", "workflow_complete"] and rest.ended


async def test_a_snapshot_of_a_finished_run_is_followed_by_its_terminal_event_and_the_stream_ends(api, client):
    run_id, _, _ = await busy_run(api, client, done=True)
    got = await read_stream(client, f"{BASE}/{run_id}/stream?snapshot=1")
    assert got.events == ["snapshot", "workflow_complete"] and got.ended
    assert got.data[0]["status"] == "SUCCESS" and len(got.data[0]["visits"]) == 2


async def test_with_last_event_id_the_snapshot_is_not_sent(api, client):
    run_id, _, _ = await busy_run(api, client, done=True)
    full = await read_stream(client, f"{BASE}/{run_id}/stream")
    got = await read_stream(client, f"{BASE}/{run_id}/stream?snapshot=true", last_event_id=full.ids[-2])
    assert got.events == ["workflow_complete"]


async def test_a_type_filter_sends_only_those_types_and_the_terminal_event(api, client):
    run_id, _, _ = await busy_run(api, client, done=True)
    got = await read_stream(client, f"{BASE}/{run_id}/stream?types=node_stream")
    assert got.events == ["node_stream", "node_stream", "workflow_complete"] and got.ended
    full = await read_stream(client, f"{BASE}/{run_id}/stream")
    assert set(got.ids) <= set(full.ids)


async def test_a_node_filter_sends_only_that_nodes_events_and_run_level_events(api, client):
    run_id, _, second = await busy_run(api, client, done=True)
    got = await read_stream(client, f"{BASE}/{run_id}/stream?nodes=node-3")
    assert {d.get("nodeId") or d.get("visit", {}).get("nodeId") for d in got.data[:-1]} == {"node-3"}
    assert got.events == ["node_status", "node_stream", "node_status", "visit_recorded", "workflow_complete"]
    both = await read_stream(client, f"{BASE}/{run_id}/stream?nodes=node-3&types=node_status&snapshot=true")
    assert both.events == ["snapshot", "workflow_complete"]
    assert [v["visitUuid"] for v in both.data[0]["visits"]] == [second]


@pytest.mark.parametrize("query", ["types=node_started", "types=node_status,bogus", "snapshot=maybe",
                                   "nodes=" + ",".join(f"n{i}" for i in range(101))])
async def test_bad_stream_options_are_validation_failed(api, client, query):
    run_id, _, _ = await busy_run(api, client, done=True)
    response = await client.get(f"{BASE}/{run_id}/stream?{query}")
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
