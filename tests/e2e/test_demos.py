"""The three shipped demos, end to end through real HTTP on both stores: create, start, follow, answer."""

from __future__ import annotations

import json
from uuid import UUID

import httpx
import pytest
from httpx_sse import aconnect_sse

from flowtrail_client import FlowtrailClient
from tests.support.sse import Received, read_stream


async def create_and_start(client: httpx.AsyncClient, name: str, variables: dict) -> str:
    created = await client.post(f"/api/v1/workflows/{name}/runs", json={"variables": variables})
    assert created.status_code == 201, created.text
    run_id = created.json()["data"]["runId"]
    started = await client.post(f"/api/v1/workflows/{name}/runs/{run_id}/start")
    assert started.status_code == 200, started.text
    return run_id


async def follow(client: httpx.AsyncClient, name: str, run_id: str) -> Received:
    got = await read_stream(client, f"/api/v1/workflows/{name}/runs/{run_id}/stream")
    assert got.ended and got.ids == sorted(set(got.ids))
    return got


def streamed(got: Received, node_id: str, kind: str) -> list[dict]:
    return [d for d in got.data if d["type"] == "node_stream" and d["nodeId"] == node_id and d["kind"] == kind]


def recorded(got: Received, node_id: str) -> list[dict]:
    return [d["visit"] for d in got.data if d["type"] == "visit_recorded" and d["visit"]["nodeId"] == node_id]


async def test_demo_report_researches_summarises_in_parallel_and_writes_the_report(demo_server):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-report", {"topic": "tidal energy"})
        got = await follow(client, "demo-report", run_id)
    statuses = [d["content"] for d in streamed(got, "research", "status")]
    report = recorded(got, "report")[0]
    parallel = {v["visitUuid"] for node in ("summary", "key-points") for v in recorded(got, node)}
    assert got.events[0] == "node_status" and got.data[0]["nodeId"] == "input"
    assert streamed(got, "research", "thinking") and len(streamed(got, "research", "todo_update")) == 3
    assert [d["toolName"] for d in streamed(got, "research", "tool_call")] == ["web_search", "web_search"]
    assert len(streamed(got, "research", "tool_result")) == 2 and len(streamed(got, "research", "step")) == 3
    assert statuses[0].startswith("node answer: output not valid JSON") and statuses[0].endswith("re-formatting (1/2)")
    assert statuses[-1] == "re-formatted output is valid (1/2)"
    assert set(report["predecessorVisitUuids"]) == parallel and len(parallel) == 2
    complete = got.data[-1]
    assert complete["type"] == "workflow_complete" and complete["workingDirFiles"] == ["report.md"]
    assert complete["output"]["data"]["summary"].startswith("tidal energy is explained")
    assert complete["output"]["data"]["sources"] == ["https://example.org/overview", "https://example.org/recent-study"]
    text = (demo_server.services.workspace.path_for(UUID(run_id)) / "report.md").read_text()
    assert text.startswith("# Report: tidal energy\n")


async def test_demo_agentic_revisits_the_draft_after_a_back_edge_and_finishes(demo_server):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-agentic", {"topic": "tides"})
        got = await follow(client, "demo-agentic", run_id)
    decisions = [d["decision"] for d in got.data if d["type"] == "planner_decision"]
    drafts = recorded(got, "draft")
    assert [d["nextNodeId"] for d in decisions] == ["draft", "review", "draft", None]
    assert [(v["iterSeq"], v["fromNodeId"]) for v in drafts] == [(1, "input"), (2, "review")]
    assert drafts[1]["predecessorVisitUuids"] == [recorded(got, "review")[0]["visitUuid"]]
    assert len({v["visitUuid"] for v in drafts}) == 2
    assert [v["sortOrder"] for v in sorted((d["visit"] for d in got.data if d["type"] == "visit_recorded"),
                                           key=lambda v: v["sortOrder"])] == [1, 2, 3, 4, 5]
    assert got.data[-1]["output"]["data"]["answer"].startswith("Draft 2: a short answer about tides")


async def read_until_question(client: httpx.AsyncClient, path: str) -> tuple[int, dict]:
    """Read the stream until the clarify request; (its SSE id, its payload)."""
    async with aconnect_sse(client, "GET", path, timeout=httpx.Timeout(30.0, read=60.0)) as source:
        async for sse in source.aiter_sse():
            if sse.data:
                data = json.loads(sse.data)
                if data.get("kind") == "clarify_request":
                    return int(sse.id), json.loads(data["content"])
    raise AssertionError("the stream ended without a question")


async def test_demo_clarify_pauses_with_two_choices_and_finishes_with_the_answer(demo_server):
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as client:
        run = await client.create("demo-clarify", {"topic": "tides"})
        await client.start(run)
        async for message in client.stream(run):
            if message.data.get("kind") == "clarify_request":
                position, question = message.id, json.loads(message.data["content"])
                break
        state = await client.state(run)
        resumed = await client.answer(run, question["clarify_id"], "short paragraph")
        rest = [message async for message in client.stream(run, after=position)]
    assert question["choices"] == ["bullet list", "short paragraph"]
    assert state.current_pause is not None and state.current_pause.clarify_id == question["clarify_id"]
    assert state.current_pause.choices == ["bullet list", "short paragraph"]
    assert resumed.accepted is True
    assert rest[-1].event == "workflow_complete" and rest[0].id > position
    assert rest[-1].data["output"]["data"]["format"] == "short paragraph"


def tool_results(got: Received, node_id: str) -> dict[str, list]:
    """Full tool results of a node's visits, from the recorded visits' logs (the stream truncates them)."""
    results: dict[str, list] = {}
    for visit in recorded(got, node_id):
        for entry in json.loads(visit["logsJson"]):
            if entry["type"] == "TOOL_RESULT":
                detail = entry["detail"]
                results.setdefault(entry["message"], []).append(json.loads(detail) if detail.startswith("{") else detail)
    return results


async def test_demo_reports_key_points_node_reads_the_research_through_the_context_tools(demo_server):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-report", {"topic": "tidal energy"})
        got = await follow(client, "demo-report", run_id)
    calls = [d["toolName"] for d in streamed(got, "key-points", "tool_call")]
    results = tool_results(got, "key-points")
    assert calls == ["get_predecessor_paths", "get_node_output", "get_node_meta"]
    assert results["get_predecessor_paths"][0]["paths"][0]["sequence"] == ["input", "research", "key-points"]
    assert "https://example.org/overview" in json.dumps(results["get_node_output"][0])
    assert "error" not in results["get_node_meta"][0]


async def test_demo_agentics_revisited_draft_sees_the_back_edge_through_the_context_tools(demo_server):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-agentic", {"topic": "tides"})
        got = await follow(client, "demo-agentic", run_id)
    results = tool_results(got, "draft")
    paths = results["get_predecessor_paths"][0]
    assert paths["backtrackEdgeKeys"] == ["review->draft"]
    assert paths["paths"][0]["sequence"] == ["input", "draft", "review", "draft"]
    assert all("error" not in r for outputs in results.values() for r in outputs if isinstance(r, dict))


AWKWARD_TOPICS = ['the "quoted" topic', "back\\slash and \\u0041", "two\nlines\tand a tab", "潮汐能 – énergie ☃"]


@pytest.mark.parametrize("topic", AWKWARD_TOPICS)
async def test_demo_report_takes_any_topic_verbatim(demo_server, topic):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-report", {"topic": topic})
        got = await follow(client, "demo-report", run_id)
    assert got.events[-1] == "workflow_complete", got.data[-1]
    data = got.data[-1]["output"]["data"]
    assert data["summary"].startswith(f"{topic} is explained")
    assert data["sources"] == ["https://example.org/overview", "https://example.org/recent-study"]
    research = recorded(got, "research")[0]
    assert research["output"]["data"]["research"].startswith(f"{topic}: the overview")
    text = (demo_server.services.workspace.path_for(UUID(run_id)) / "report.md").read_text(encoding="utf-8")
    assert text.startswith(f"# Report: {topic}\n")


@pytest.mark.parametrize("topic", AWKWARD_TOPICS)
async def test_demo_agentic_takes_any_topic_verbatim(demo_server, topic):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-agentic", {"topic": topic})
        got = await follow(client, "demo-agentic", run_id)
    assert got.events[-1] == "workflow_complete", got.data[-1]
    assert got.data[-1]["output"]["data"]["answer"].startswith(f"Draft 2: a short answer about {topic},")


@pytest.mark.parametrize("topic", AWKWARD_TOPICS)
async def test_demo_clarify_takes_any_topic_verbatim(demo_server, topic):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-clarify", {"topic": topic})
        path = f"/api/v1/workflows/demo-clarify/runs/{run_id}/stream"
        position, question = await read_until_question(client, path)
        await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": question["clarify_id"], "answer": topic})
        rest = await read_stream(client, path, last_event_id=position)
    assert question["question"] == f"Which format should the piece about {topic} use?"
    assert rest.events[-1] == "workflow_complete", rest.data[-1]
    assert rest.data[-1]["output"]["data"] == {"format": topic, "text": f"A short piece about {topic}, in the format the user chose."}


async def test_a_demo_runs_result_carries_the_token_totals_of_its_recorded_model_calls(demo_server):
    async with demo_server.client() as client:
        run_id = await create_and_start(client, "demo-agentic", {"topic": "heat pumps"})
        got = await follow(client, "demo-agentic", run_id)
        result = (await client.get(f"/api/v1/workflows/demo-agentic/runs/{run_id}")).json()["data"]
    events = await demo_server.services.runs.events(UUID(run_id))
    calls = [e for e in events if type(e).__name__ == "ModelCalled"]
    assert {"node", "planner"} <= {call.purpose for call in calls}
    assert result["usage"] == {"promptTokens": sum(c.prompt_tokens for c in calls),
                               "completionTokens": sum(c.completion_tokens for c in calls)}
    assert result["usage"]["promptTokens"] > 0
    assert not {c.originator_version for c in calls} & set(got.ids)
