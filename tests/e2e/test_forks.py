"""Forks and re-runs through real HTTP on both stores: what a fork copies, what it executes again, what it refuses."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import msgspec
import pytest
from httpx_sse import aconnect_sse

from domain import events as ev
from domain.run import RunStatus
from engine.llm.config import ModelConfig
from flowtrail_client import FlowtrailClient
from scripts.audit import audit
from tests.support.engine_runs import edge, engine_settings, node, wait_until, workflow
from tests.support.server import RunningServer

RUNS = "/api/v1/workflows/{name}/runs"


WRITER = workflow("essay", [
    node("input", "userInput", inputs=[{"name": "topic"}]),
    node("outline", "llm", model_id="fake", prompt="Outline {{topic}}"),
    node("essay", "llm", model_id="fake", prompt="Write an essay from {{outline.text}}"),
    node("out", "output", outputs=[{"name": "essay", "value": "{{essay.text}}"}]),
], [edge("input", "outline"), edge("outline", "essay"), edge("essay", "out")])


@pytest.fixture
async def fake_live(store: str, tmp_path: Path, fake_openai) -> AsyncIterator[RunningServer]:
    """A server whose model `fake` is the fake OpenAI server, with the workflow `essay` published."""
    models = [{"id": "fake", "base_url": fake_openai.base_url, "model": "fake-model", "timeout_seconds": 5,
               "first_token_timeout": 5}]
    settings = engine_settings(store, tmp_path / "data", load_demos=False,
                               models=msgspec.convert(models, tuple[ModelConfig, ...]))
    server = await RunningServer(settings).start()
    await server.services.catalogue.publish(WRITER)
    yield server
    await server.stop()


def prompts(fake_openai) -> list[str]:
    """The last user message of every request the fake model received."""
    return [next(m["content"] for m in reversed(r.body["messages"]) if m["role"] == "user") for r in fake_openai.requests]


@dataclass
class Raw:
    """A whole stream as the server sent it: (id, event, data text) of each message."""

    messages: list[tuple[int, str, str]] = field(default_factory=list)

    def data(self) -> list[dict[str, Any]]:
        return [json.loads(text) for _, _, text in self.messages]


async def raw_stream(client: httpx.AsyncClient, path: str, last_event_id: int | None = None) -> Raw:
    got = Raw()
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    async with aconnect_sse(client, "GET", path, headers=headers, timeout=httpx.Timeout(30.0, read=60.0)) as source:
        source.response.raise_for_status()
        async for sse in source.aiter_sse():
            if sse.data:
                got.messages.append((int(sse.id), sse.event, sse.data))
    return got


def run_path(name: str, run_id: str) -> str:
    return f"{RUNS.format(name=name)}/{run_id}"


async def run_to_end(client: httpx.AsyncClient, name: str, run_id: str) -> Raw:
    started = await client.post(f"{run_path(name, run_id)}/start")
    assert started.status_code == 200, started.text
    return await raw_stream(client, f"{run_path(name, run_id)}/stream")


async def finished_run(client: httpx.AsyncClient, name: str, variables: dict[str, Any]) -> tuple[str, Raw]:
    created = await client.post(RUNS.format(name=name), json={"variables": variables})
    assert created.status_code == 201, created.text
    run_id = created.json()["data"]["runId"]
    return run_id, await run_to_end(client, name, run_id)


async def fork(client: httpx.AsyncClient, name: str, run_id: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return await client.post(f"{run_path(name, run_id)}/fork", json=body, headers=headers)


async def stored(server: RunningServer, run_id: str) -> list[ev.RunEvent]:
    return await server.services.runs.events(UUID(run_id))


def visit_of(events: list[ev.RunEvent], node_id: str, iter_seq: int = 1) -> str:
    return next(e.visit_uuid for e in events if isinstance(e, ev.VisitStarted) and e.node_id == node_id
                and e.iter_seq == iter_seq)


def model_calls(events: list[ev.RunEvent]) -> list[tuple[str, str]]:
    return [(e.node_id, e.purpose) for e in events if isinstance(e, ev.ModelCalled)]


def copied_messages(source: Raw, fork: Raw, source_id: str, fork_id: str, visits: set[str]) -> tuple[list[str], list[str]]:
    """The data texts of the messages about `visits`: the source's with its run id made the fork's, and the fork's."""
    def about(raw: Raw) -> list[str]:
        return [text for _, _, text in raw.messages if json.loads(text).get("visitUuid", json.loads(text).get(
            "visit", {}).get("visitUuid")) in visits]
    return [text.replace(source_id, fork_id) for text in about(source)], about(fork)


async def test_a_fork_mid_dag_copies_the_visits_before_it_byte_for_byte_and_executes_the_rest_again(demo_server):
    async with demo_server.client() as client:
        source_id, source = await finished_run(client, "demo-report", {"topic": "tidal energy"})
        source_events = await stored(demo_server, source_id)
        summary = visit_of(source_events, "summary")
        answer = await fork(client, "demo-report", source_id, {"fromVisit": summary})
        assert answer.status_code == 201, answer.text
        forked = answer.json()["data"]
        fork_id = forked["runId"]
        started_at = next(e.originator_version for e in source_events if isinstance(e, ev.VisitStarted)
                          and e.visit_uuid == summary)
        assert forked["forkedFrom"] == {"runId": source_id, "visitUuid": summary, "position": started_at - 1}
        assert forked["status"] == "CREATED" and forked["links"]["start"].endswith(f"/runs/{fork_id}/start")
        fork_stream = await run_to_end(client, "demo-report", fork_id)
        result = (await client.get(run_path("demo-report", fork_id))).json()["data"]
    fork_events = await stored(demo_server, fork_id)
    copied = {visit_of(source_events, "input"), visit_of(source_events, "research")}
    expected, got = copied_messages(source, fork_stream, source_id, fork_id, copied)
    assert got == expected and len(got) >= 6
    assert fork_stream.messages[-1][1] == "workflow_complete" and result["status"] == "SUCCESS"
    assert isinstance(fork_events[1], ev.RunForked) and fork_events[1].source_run_id == UUID(source_id)
    assert [e.originator_version for e in fork_events] == list(range(1, len(fork_events) + 1))
    assert sorted(set(model_calls(fork_events))) == [("key-points", "node"), ("summary", "node")]
    assert {node for node, _ in model_calls(source_events)} >= {"research", "summary", "key-points"}
    reexecuted = {e.visit_uuid for e in fork_events if isinstance(e, ev.VisitStarted)} - copied
    assert {e.node_id for e in fork_events if isinstance(e, ev.VisitStarted) and e.visit_uuid in reexecuted} == {
        "summary", "key-points", "report"}
    points, points_again = visit_of(source_events, "key-points"), visit_of(fork_events, "key-points")
    seen = tool_results(fork_events, points_again)
    assert seen and seen == [text.replace(points, points_again) for text in tool_results(source_events, points)]
    async with demo_server.client() as client:
        zipped = await client.get(f"{run_path('demo-report', fork_id)}/workspace")
        middle = fork_stream.messages[len(fork_stream.messages) // 2][0]
        resumed = await raw_stream(client, f"{run_path('demo-report', fork_id)}/stream", last_event_id=middle)
    assert zipfile.ZipFile(io.BytesIO(zipped.content)).namelist() == ["report.md"]
    assert resumed.messages == [m for m in fork_stream.messages if m[0] > middle]
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as api:
        assert await audit(api, fork_id) == 0


async def test_a_fork_under_a_newer_version_calls_the_model_only_for_the_edited_node_with_its_new_prompt(
        fake_live, fake_openai):
    fake_openai.will_stream_text("three parts")
    fake_openai.will_stream_text("a first essay")
    async with fake_live.client() as client:
        source_id, _ = await finished_run(client, "essay", {"topic": "tides"})
        edited = json.loads(json.dumps(WRITER))
        edited["nodes"][2]["data"]["prompt"] = "Write a short poem from {{outline.text}}"
        version = (await fake_live.services.catalogue.publish(edited)).version
        fake_openai.will_stream_text("a poem")
        answer = await fork(client, "essay", source_id, {"fromNode": "essay", "workflowVersion": version})
        assert answer.status_code == 201, answer.text
        fork_id = answer.json()["data"]["runId"]
        await run_to_end(client, "essay", fork_id)
        result = (await client.get(run_path("essay", fork_id))).json()["data"]
    assert version == 2 and result["outputs"]["data"] == {"essay": "a poem"}
    assert prompts(fake_openai)[2:] == ["Write a short poem from three parts"] and len(fake_openai.requests) == 3
    fork_events = await stored(fake_live, fork_id)
    assert fork_events[0].workflow_version == 2 and fork_events[1].source_workflow_version == 1
    assert model_calls(fork_events) == [("essay", "node")]


async def test_a_rerun_of_a_run_failed_by_a_model_error_runs_again_from_the_failed_visit_only(fake_live, fake_openai):
    fake_openai.will_stream_text("three parts")
    fake_openai.will_fail(400, "the prompt was refused", "invalid_request_error")
    async with fake_live.client() as client:
        source_id, source = await finished_run(client, "essay", {"topic": "tides"})
        assert source.messages[-1][1] == "workflow_error"
        source_events = await stored(fake_live, source_id)
        failed = visit_of(source_events, "essay")
        fake_openai.will_stream_text("an essay at last")
        answer = await client.post(f"{run_path('essay', source_id)}/rerun")
        assert answer.status_code == 201, answer.text
        rerun = answer.json()["data"]
        await run_to_end(client, "essay", rerun["runId"])
        result = (await client.get(run_path("essay", rerun["runId"]))).json()["data"]
    assert rerun["forkedFrom"]["visitUuid"] == failed
    assert result["status"] == "SUCCESS" and result["outputs"]["data"] == {"essay": "an essay at last"}
    assert prompts(fake_openai) == ["Outline tides", "Write an essay from three parts", "Write an essay from three parts"]
    rerun_events = await stored(fake_live, rerun["runId"])
    assert rerun_events[1].rerun and model_calls(rerun_events) == [("essay", "node")]
    assert not [e for e in rerun_events if isinstance(e, ev.VisitFailed)]


async def test_a_fork_of_a_fork_copies_its_sources_copies_and_own_visits_and_calls_no_model_for_an_output_node(demo_server):
    async with demo_server.client() as client:
        source_id, _ = await finished_run(client, "demo-report", {"topic": "tides"})
        first = (await fork(client, "demo-report", source_id, {"fromNode": "summary"})).json()["data"]
        first_stream = await run_to_end(client, "demo-report", first["runId"])
        answer = await fork(client, "demo-report", first["runId"], {"fromNode": "report"})
        assert answer.status_code == 201, answer.text
        second = answer.json()["data"]
        second_stream = await run_to_end(client, "demo-report", second["runId"])
    first_events, second_events = await stored(demo_server, first["runId"]), await stored(demo_server, second["runId"])
    copied = {visit_of(first_events, node) for node in ("input", "research", "summary", "key-points")}
    expected, got = copied_messages(first_stream, second_stream, first["runId"], second["runId"], copied)
    assert got == expected and second["forkedFrom"]["runId"] == first["runId"]
    assert visit_of(second_events, "research") == visit_of(await stored(demo_server, source_id), "research")
    assert model_calls(second_events) == [] and second_stream.messages[-1][1] == "workflow_complete"
    assert second_stream.data()[-1]["output"] == first_stream.data()[-1]["output"]


async def test_a_fork_copies_a_visits_question_and_its_answer(demo_server):
    async with demo_server.client() as client:
        created = (await client.post(RUNS.format(name="demo-clarify"), json={"variables": {"topic": "tides"}})).json()
        source_id = created["data"]["runId"]
        await client.post(f"{run_path('demo-clarify', source_id)}/start")
        asked = await wait_until(demo_server.services, UUID(source_id), RunStatus.PAUSED)
        assert asked.pending_clarify is not None
        waiting = await fork(client, "demo-clarify", source_id, {"fromNode": "ask"})
        from_paused = await fork(client, "demo-clarify", source_id, {"fromNode": "input"})
        clarify_id = asked.pending_clarify.clarify_id
        await client.post(f"/api/v1/runs/{source_id}/resume", json={"clarifyId": clarify_id, "answer": "short paragraph"})
        source = await raw_stream(client, f"{run_path('demo-clarify', source_id)}/stream")
        forked = (await fork(client, "demo-clarify", source_id, {"fromNode": "result"})).json()["data"]
        fork_stream = await run_to_end(client, "demo-clarify", forked["runId"])
    assert (waiting.status_code, waiting.json()["code"]) == (409, "VISIT_NOT_FINISHED")
    assert from_paused.status_code == 201, from_paused.text
    kinds = [d.get("kind") for d in fork_stream.data()]
    assert "clarify_request" in kinds and fork_stream.data()[-1]["output"] == source.data()[-1]["output"]
    fork_events = await stored(demo_server, forked["runId"])
    assert [e.answer for e in fork_events if isinstance(e, ev.ClarifyAnswered)] == ["short paragraph"]
    assert model_calls(fork_events) == []


def refusal(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["code"]


async def test_forks_are_refused_with_clear_errors_and_append_nothing(demo_server):
    async with demo_server.client() as client:
        source_id, _ = await finished_run(client, "demo-report", {"topic": "tides"})
        demo = (Path(__file__).parents[2] / "engine/demos/demo-report.json").read_text()
        renamed = json.loads(demo.replace('"key-points"', '"points"').replace("{{key-points.", "{{points."))
        version = (await demo_server.services.catalogue.publish(renamed)).version
        before = await demo_server.services.store.last_notification_id()
        answers = {
            "unknown visit": await fork(client, "demo-report", source_id, {"fromVisit": "no-such-visit"}),
            "unknown node": await fork(client, "demo-report", source_id, {"fromNode": "no-such-node"}),
            "neither": await fork(client, "demo-report", source_id, {"variables": {"topic": "x"}}),
            "both": await fork(client, "demo-report", source_id, {"fromNode": "summary", "fromVisit": "x"}),
            "no body": await client.post(f"{run_path('demo-report', source_id)}/fork"),
            "unknown field": await fork(client, "demo-report", source_id, {"fromNode": "summary", "from_node": "x"}),
            "unpublished version": await fork(client, "demo-report", source_id,
                                              {"fromNode": "summary", "workflowVersion": version + 1}),
            "version without the node": await fork(client, "demo-report", source_id,
                                                   {"fromNode": "key-points", "workflowVersion": version}),
            "variable of the wrong type": await fork(client, "demo-report", source_id,
                                                     {"fromNode": "summary", "variables": {"topic": 5}}),
            "uploaded files": await fork(client, "demo-report", source_id,
                                         {"fromNode": "summary", "variables": {"uploadedFiles": []}}),
            "rerun of a success": await client.post(f"{run_path('demo-report', source_id)}/rerun"),
            "another workflow's path": await fork(client, "demo-clarify", source_id, {"fromNode": "summary"}),
        }
        async with demo_server.client(key="test-key-scoped") as scoped:
            answers["a key that may not see the source"] = await fork(scoped, "demo-report", source_id,
                                                                      {"fromNode": "summary"})
        after = await demo_server.services.store.last_notification_id()
    assert {name: refusal(answer) for name, answer in answers.items()} == {
        "unknown visit": (404, "NODE_NOT_FOUND"),
        "unknown node": (404, "NODE_NOT_FOUND"),
        "neither": (400, "VALIDATION_FAILED"),
        "both": (400, "VALIDATION_FAILED"),
        "no body": (400, "VALIDATION_FAILED"),
        "unknown field": (400, "VALIDATION_FAILED"),
        "unpublished version": (404, "WORKFLOW_NOT_FOUND"),
        "version without the node": (404, "NODE_NOT_FOUND"),
        "variable of the wrong type": (400, "VALIDATION_FAILED"),
        "uploaded files": (400, "VALIDATION_FAILED"),
        "rerun of a success": (409, "RUN_NOT_FAILED"),
        "another workflow's path": (404, "RUN_NOT_FOUND"),
        "a key that may not see the source": (404, "RUN_NOT_FOUND"),
    }
    assert "key-points" in answers["version without the node"].json()["message"]
    assert after == before


async def test_a_repeated_fork_with_its_idempotency_key_answers_the_original_fork(demo_server):
    async with demo_server.client() as client:
        source_id, _ = await finished_run(client, "demo-report", {"topic": "tides"})
        first = await fork(client, "demo-report", source_id, {"fromNode": "summary"}, **{"Idempotency-Key": "f-1"})
        end = await demo_server.services.store.last_notification_id()
        again = await fork(client, "demo-report", source_id, {"fromNode": "summary"}, **{"Idempotency-Key": "f-1"})
        other = await fork(client, "demo-report", source_id, {"fromNode": "research"}, **{"Idempotency-Key": "f-1"})
        assert await demo_server.services.store.last_notification_id() == end
    assert first.status_code == 201 and again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true" and again.json()["data"] == first.json()["data"]
    assert refusal(other) == (409, "IDEMPOTENCY_KEY_REUSED")
    folders = set(demo_server.services.workspace.run_folders())
    assert folders == {UUID(source_id), UUID(first.json()["data"]["runId"])}


async def test_a_blocking_fork_answers_with_the_forks_stream(demo_server):
    async with demo_server.client() as client:
        source_id, _ = await finished_run(client, "demo-report", {"topic": "tides"})
        events = []
        async with client.stream("POST", f"{run_path('demo-report', source_id)}/fork",
                                 json={"fromNode": "report", "async": False}) as response:
            assert response.status_code == 200
            fork_id = response.headers["x-run-id"]
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    events.append(line[7:])
        result = (await client.get(run_path("demo-report", fork_id))).json()["data"]
    assert events[-1] == "workflow_complete" and result["status"] == "SUCCESS"


async def scripted_calls(client: httpx.AsyncClient) -> float:
    """Calls to the scripted model so far, as this process's metrics count them."""
    text = (await client.get("/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("flowtrail_model_calls_total{") and 'model="scripted"' in line)


def tool_results(events: list[ev.RunEvent], visit_uuid: str) -> list[str]:
    return [e.content for e in events if isinstance(e, ev.NodeStreamed) and e.visit_uuid == visit_uuid
            and e.kind == "tool_result"]


async def test_a_fork_of_an_agentic_run_resumes_the_planner_with_the_decisions_before_it(demo_server):
    async with demo_server.client() as client:
        source_id, source = await finished_run(client, "demo-agentic", {"topic": "tides"})
        source_events = await stored(demo_server, source_id)
        revision = visit_of(source_events, "draft", iter_seq=2)
        forked = (await fork(client, "demo-agentic", source_id, {"fromVisit": revision})).json()["data"]
        before = await scripted_calls(client)
        fork_stream = await run_to_end(client, "demo-agentic", forked["runId"])
        called = await scripted_calls(client) - before
    fork_events = await stored(demo_server, forked["runId"])
    again = visit_of(fork_events, "draft", iter_seq=2)
    cut = forked["forkedFrom"]["position"]
    after_cut = [e for e in source_events if e.originator_version > cut]
    assert sorted(model_calls(fork_events)) == sorted(model_calls(after_cut)) and called == len(model_calls(fork_events))
    assert ("draft", "node") in model_calls(fork_events) and ("", "planner") in model_calls(fork_events)
    decisions = [d["decision"]["nextNodeId"] for d in fork_stream.data() if d["type"] == "planner_decision"]
    assert decisions == ["draft", "review", "draft", None]
    seen = tool_results(fork_events, again)
    assert len(seen) == 4 and seen == [text.replace(revision, again) for text in tool_results(source_events, revision)]
    assert fork_stream.data()[-1]["output"] == source.data()[-1]["output"]
    copied = {visit_of(source_events, "input"), visit_of(source_events, "draft"), visit_of(source_events, "review")}
    expected, got = copied_messages(source, fork_stream, source_id, forked["runId"], copied)
    assert got == expected


async def test_forks_carry_forked_from_in_get_run_and_the_listing_and_are_listed_under_their_source(demo_server):
    async with demo_server.client() as client:
        source_id, _ = await finished_run(client, "demo-report", {"topic": "tides"})
        first = (await fork(client, "demo-report", source_id, {"fromNode": "summary"})).json()["data"]
        second = (await fork(client, "demo-report", source_id, {"fromNode": "report"})).json()["data"]
        grandchild = (await fork(client, "demo-report", second["runId"], {"fromNode": "research"})).json()["data"]
        source = (await client.get(run_path("demo-report", source_id))).json()["data"]
        viewed = (await client.get(run_path("demo-report", first["runId"]))).json()["data"]
        listed = {item["runId"]: item for item in (await client.get("/api/v1/runs")).json()["data"]["items"]}
        forks = (await client.get(f"{run_path('demo-report', source_id)}/forks")).json()["data"]
        page = (await client.get(f"{run_path('demo-report', source_id)}/forks", params={"limit": 1})).json()["data"]
        rest = (await client.get(f"{run_path('demo-report', source_id)}/forks",
                                 params={"limit": 1, "cursor": page["nextCursor"]})).json()["data"]
        below = (await client.get(f"{run_path('demo-report', second['runId'])}/forks")).json()["data"]
        async with demo_server.client(key="test-key-scoped") as scoped:
            hidden = await scoped.get(f"{run_path('demo-report', source_id)}/forks")
    assert "forkedFrom" not in source and "forkedFrom" not in listed[source_id]
    assert viewed["forkedFrom"] == first["forkedFrom"] == listed[first["runId"]]["forkedFrom"]
    assert listed[grandchild["runId"]]["forkedFrom"]["runId"] == second["runId"]
    assert [item["runId"] for item in forks["items"]] == [second["runId"], first["runId"]]
    assert [item["runId"] for item in page["items"] + rest["items"]] == [second["runId"], first["runId"]]
    assert [item["runId"] for item in below["items"]] == [grandchild["runId"]] and rest["nextCursor"] is None
    assert refusal(hidden) == (404, "RUN_NOT_FOUND")


async def test_a_fork_names_its_sources_chain_link_and_keeps_its_own_copy_when_the_source_is_erased(demo_server):
    async with demo_server.client() as client:
        source_id, _ = await finished_run(client, "demo-report", {"topic": "a fork's own copy"})
        source_events = await stored(demo_server, source_id)
        answer = await fork(client, "demo-report", source_id, {"fromNode": "summary"})
        assert answer.status_code == 201, answer.text
        fork_id = answer.json()["data"]["runId"]
        fork_stream = await run_to_end(client, "demo-report", fork_id)
        events_before = (await client.get(f"/api/v1/runs/{fork_id}/events")).text
        erased = await client.delete(run_path("demo-report", source_id))
        assert erased.status_code == 200, erased.text
        replayed = await raw_stream(client, f"{run_path('demo-report', fork_id)}/stream")
        events_after = (await client.get(f"/api/v1/runs/{fork_id}/events")).text
        source_lines = (await client.get(f"/api/v1/runs/{source_id}/events")).text.splitlines()
    forked = (await stored(demo_server, fork_id))[1]
    assert isinstance(forked, ev.RunForked)
    cut = json.loads(source_lines[forked.source_position - 1])
    assert forked.source_chain_head and forked.source_chain_head == cut["chain"]["link"]
    assert "a fork's own copy" in events_after and events_after == events_before
    assert replayed.messages == fork_stream.messages
    assert visit_of(source_events, "summary")
