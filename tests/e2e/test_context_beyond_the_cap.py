"""A run with more visits than the memory index keeps (250 > 200): every answer comes from the store, on both stores."""

from __future__ import annotations

from domain import run as decide
from projections.visits import MAX_VISITS_PER_RUN
from tests.support.context_runs import CHAIN, LOOPS, ContextClient, long_run
from tests.support.sse import read_stream

RUN = "/api/v1/workflows/allowed-flow/runs/{}"


async def test_the_visits_past_the_memory_cap_ask_and_are_answered_from_the_store(server):
    example = await long_run(server.services)
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        path = await client.post("path")
        act = await client.post("output", nodeId="act")
        late = await client.post("meta", nodeId="plan", kind="THINKING")
        early = await client.post("output", nodeId="step-001", field="n")
    assert server.services.hot_runs.find(example.run_id).sse.index.overflowed
    assert {r.status_code for r in (path, act, late, early)} == {200}
    assert {r.headers["x-context-source"] for r in (path, act, late, early)} == {"store"}
    chain = path.json()["data"]
    assert chain["truncated"] is True and len(chain["paths"]) == 1
    assert chain["visitUuids"] == [f"v{n:03}" for n in range(51, 251)]
    assert len(chain["visitUuids"]) == MAX_VISITS_PER_RUN == 200
    assert chain["backtrackEdgeKeys"] == ["act->plan", "plan->act"] and chain["paths"][0]["hasBacktrack"]
    assert act.json()["data"] == {
        "nodeId": "act", "iterSeq": LOOPS // 2, "visitUuid": "v248", "status": 200, "message": "调用成功",
        "data": {"n": 248}, "requestedField": None}
    assert (late.json()["data"]["visitUuid"], late.json()["data"]["thinking"]) == ("v249", "thought 249")
    assert early.json()["data"]["data"] == 1


async def test_the_run_views_and_the_stream_show_the_visits_past_the_memory_cap(server):
    example = await long_run(server.services)
    writer = await server.services.runs.writer(example.run_id)
    await writer.decide(
        lambda run, at: decide.complete_visit(run, at, visit_uuid="v250", node_id="report", output={"data": {}}),
        lambda run, at: decide.record_visit(run, at, visit_uuid="v250", node_id="report"),
        lambda run, at: decide.complete_run(run, at, output={"status": 200, "message": "done", "data": {}}),
    )
    async with server.client() as client:
        run = (await client.get(RUN.format(example.run_id.hex))).json()["data"]
        logs = (await client.get(RUN.format(example.run_id.hex) + "/nodes/plan/logs")).json()["data"]
        got = await read_stream(client, RUN.format(example.run_id.hex) + "/stream")
        snapshot = await read_stream(client, RUN.format(example.run_id.hex) + "/stream?snapshot=true")
    nodes = {node["nodeId"]: node for node in run["nodes"]}
    recorded = [d["visit"] for e, d in zip(got.events, got.data, strict=True) if e == "visit_recorded"]
    ended = [d for e, d in zip(got.events, got.data, strict=True) if e == "node_status" and d["status"] == "SUCCESS"]
    assert len(nodes) == CHAIN + 3 and {"plan", "act", "report"} <= set(nodes)
    assert [entry["message"] for entry in logs] == [f"thought {n}" for n in range(201, 250) if n % 2 == 1]
    assert len(recorded) == 250 and all("logsJson" in visit for visit in recorded)
    assert recorded[-2]["visitUuid"] == "v249" and recorded[-2]["logsCount"] == 1
    assert ended[-2]["visitUuid"] == "v249" and [e["message"] for e in ended[-2]["logs"]] == ["thought 249"]
    [state] = [d for e, d in zip(snapshot.events, snapshot.data, strict=True) if e == "snapshot"]
    assert [visit["visitUuid"] for visit in state["visits"]] == [visit["visitUuid"] for visit in recorded]
