"""Runs are traced over OTLP/HTTP on both stores, received by a fake collector on loopback that decodes the protobuf:
a run is one trace (its span, a child per visit, a child per model call with the GenAI attributes, the visits'
context queries), in the caller's trace when the create request sent a `traceparent`; requests have server spans named by route; a run stopped mid-way
continues the same trace after the restart (each process's last spans exported at its shutdown); switched off,
nothing is exported."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from domain.workflow import MODEL_NODE_TYPES
from tests.fakes.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.process import ServerProcess

pytestmark = pytest.mark.store

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
RUNS = "/api/v1/workflows/demo-report/runs"
DEMO_REPORT = json.loads((Path(__file__).resolve().parents[2] / "engine" / "demos" / "demo-report.json").read_text())
NODES = {node["id"]: node["type"] for node in DEMO_REPORT["nodes"]}
RUN_BOUND_SECONDS = 60
"""A demo-report run takes about 1 s unpaced and 6 s at 0.03 s a chunk; the bound is for a loaded machine."""


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    running = OtlpReceiver()
    await running.start()
    yield running
    await running.stop()


def traced_server(store: str, tmp_path: Path, receiver: OtlpReceiver, **env: str) -> ServerProcess:
    """A demo server exporting to `receiver` (batches every 0.1 s unless `env` says otherwise)."""
    server = ServerProcess(store, tmp_path / "data", FLOWTRAIL_LOAD_DEMOS="true")
    server.env = {name: value for name, value in server.env.items() if not name.startswith("OTEL_")}
    server.env.update({
        "FLOWTRAIL_SCRIPTED_PACE_SECONDS": "0", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "flowtrail-under-test", **env,
    })
    return server


async def create_and_start(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    created = await client.post(RUNS, json={"variables": {"topic": "tides"}}, headers=headers)
    assert created.status_code == 201, created.text
    run_id: str = created.json()["data"]["runId"]
    assert (await client.post(f"{RUNS}/{run_id}/start")).status_code == 200
    return run_id


async def status_once_ended(client: httpx.AsyncClient, run_id: str) -> str:
    async def ended() -> str:
        while True:
            status: str = (await client.get(f"{RUNS}/{run_id}")).json()["data"]["status"]
            if status not in ("CREATED", "RUNNING"):
                return status
            await asyncio.sleep(0.1)
    return await asyncio.wait_for(ended(), RUN_BOUND_SECONDS)


async def run_created(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    lines = (await client.get(f"/api/v1/runs/{run_id}/events")).text.splitlines()
    created: dict[str, Any] = json.loads(lines[0])
    assert created["type"] == "RunCreated"
    return created


def run_spans(spans: list[ReceivedSpan], run_id: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == "invoke_workflow demo-report"
            and span.attributes["flowtrail.run.id"] == run_id]


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [span for span in spans if span.parent_span_id == parent.span_id and span.trace_id == parent.trace_id]


def ended_run_span(run_id: str, status: str = "succeeded"):
    return lambda spans: any(span.attributes.get("flowtrail.run.status") == status for span in run_spans(spans, run_id))


async def test_a_dag_run_is_one_trace_in_the_callers_trace_with_a_span_per_visit_and_per_model_call(
    store, tmp_path, receiver,
):
    server = await traced_server(store, tmp_path, receiver).start()
    try:
        async with server.client() as client:
            run_id = await create_and_start(client, {"traceparent": TRACEPARENT})
            assert await status_once_ended(client, run_id) == "SUCCESS"
            created = await run_created(client, run_id)
        spans = await receiver.wait_for(ended_run_span(run_id))
    finally:
        await server.stop()

    create = next(span for span in spans if span.parent_span_id == CALLER_SPAN)
    assert (create.trace_id, create.kind, create.name) == (CALLER_TRACE, "SERVER", f"POST {RUNS.replace('demo-report', '{workflowName}')}")
    assert create.attributes["http.route"] == "/api/v1/workflows/{workflowName}/runs"
    assert created["trace_parent"].startswith(f"00-{CALLER_TRACE}-{create.span_id}-")
    assert create.resource["service.name"] == "flowtrail-under-test"

    [run] = run_spans(spans, run_id)
    assert run.parent_span_id == create.span_id and run.trace_id == CALLER_TRACE
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["gen_ai.workflow.name"] == "demo-report"
    assert run.attributes["flowtrail.run.continues"] is False

    visits = {span.attributes["flowtrail.node.id"]: span for span in children(spans, run)}
    assert set(visits) == set(NODES)
    assert all(visit.name == f"visit {node}" and visit.attributes["flowtrail.visit.status"] == "SUCCESS"
               for node, visit in visits.items())
    queries = [span for span in spans if span.name.startswith("POST /internal/context/")]
    assert queries, "demo-report's agents query the context API"
    assert all(query.parent_span_id in {visit.span_id for visit in visits.values()} for query in queries)
    for node, visit in visits.items():
        calls = [span for span in children(spans, visit) if span.kind == "CLIENT"]
        if NODES[node] not in MODEL_NODE_TYPES:
            assert calls == [] and "gen_ai.operation.name" not in visit.attributes
            continue
        assert visit.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert calls, f"visit {node} has no model call span"
        for call in calls:
            assert call.name == "chat scripted"
            assert call.attributes["gen_ai.operation.name"] == "chat"
            assert call.attributes["gen_ai.request.model"] == "scripted"
            assert call.attributes["gen_ai.provider.name"] == call.attributes["gen_ai.system"] == "flowtrail.scripted"
            assert call.attributes["gen_ai.usage.input_tokens"] > 0
            assert call.attributes["gen_ai.usage.output_tokens"] > 0


MODEL_WORKFLOW = {
    "name": "one-model-call", "displayName": "One model call", "mode": "DAG",
    "nodes": [
        {"id": "input", "type": "userInput", "data": {"inputs": [{"name": "topic"}]}},
        {"id": "ask", "type": "llm", "data": {"model_id": "configured", "prompt": "One word on {{topic}}"}},
        {"id": "done", "type": "output", "data": {"outputs": [{"name": "answer", "value": "{{ask.text}}"}]}},
    ],
    "edges": [{"source": "input", "target": "ask"}, {"source": "ask", "target": "done"}],
}


async def test_a_configured_models_call_names_the_model_the_request_went_out_with(store, tmp_path, receiver, fake_openai):
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "one-model-call.json").write_text(json.dumps(MODEL_WORKFLOW))
    model = {"id": "configured", "base_url": fake_openai.base_url, "model": "fake-model-7"}
    server = await traced_server(store, tmp_path, receiver, FLOWTRAIL_MODELS=json.dumps([model]),
                                 FLOWTRAIL_WORKFLOWS_DIR=str(workflows)).start()
    path = "/api/v1/workflows/one-model-call/runs"
    try:
        async with server.client() as client:
            run_id = (await client.post(path, json={"variables": {"topic": "tides"}})).json()["data"]["runId"]
            assert (await client.post(f"{path}/{run_id}/start")).status_code == 200
        spans = await receiver.wait_for(lambda spans: {"chat fake-model-7", "visit ask"} <= {span.name for span in spans})
    finally:
        await server.stop()
    [call] = [span for span in spans if span.name == "chat fake-model-7"]
    visit = next(span for span in spans if span.span_id == call.parent_span_id)
    assert visit.name == "visit ask" and visit.attributes["flowtrail.run.id"] == run_id
    assert call.attributes["gen_ai.provider.name"] == call.attributes["gen_ai.system"] == "openai"
    assert call.attributes["gen_ai.request.model"] == "fake-model-7"
    assert call.attributes["flowtrail.model.id"] == "configured"
    assert (call.attributes["gen_ai.usage.input_tokens"], call.attributes["gen_ai.usage.output_tokens"]) == (11, 7)
    assert call.attributes["gen_ai.response.finish_reasons"] == ("stop",)


async def test_every_request_has_a_server_span_named_by_its_route_and_probes_have_none(store, tmp_path, receiver):
    server = await traced_server(store, tmp_path, receiver).start()
    try:
        async with server.client() as client:
            run_id = await create_and_start(client, {})
            await status_once_ended(client, run_id)
            assert (await client.get("/readyz")).status_code == 200
            assert (await client.get("/api/v1/no-such-route")).status_code == 404
        spans = await receiver.wait_for(
            lambda spans: ended_run_span(run_id)(spans) and any(span.name == "GET" for span in spans))
    finally:
        await server.stop()

    servers = {span.name: span for span in spans if span.kind == "SERVER"}
    start = servers[f"POST {RUNS.replace('demo-report', '{workflowName}')}/{{runId}}/start"]
    assert start.is_root and start.attributes["http.route"].endswith("/{runId}/start")
    assert f"GET {RUNS.replace('demo-report', '{workflowName}')}/{{runId}}" in servers
    assert "http.route" not in servers["GET"].attributes
    assert not [name for name in servers if "healthz" in name or "readyz" in name or run_id in name]
    [run] = run_spans(spans, run_id)
    create = next(span for span in spans if span.span_id == run.parent_span_id)
    assert create.is_root and create.name == f"POST {RUNS.replace('demo-report', '{workflowName}')}"


async def test_a_run_stopped_mid_way_continues_its_trace_after_the_restart(store, tmp_path, receiver):
    server = traced_server(store, tmp_path, receiver, FLOWTRAIL_SCRIPTED_PACE_SECONDS="0.03",
                           OTEL_BSP_SCHEDULE_DELAY="600000")
    await server.start()
    try:
        async with server.client() as client:
            run_id = await create_and_start(client, {"traceparent": TRACEPARENT})
            await streamed_a_while(client, run_id)
        await server.stop()
        first = await receiver.wait_for(lambda spans: bool(run_spans(spans, run_id)))
        await server.start()
        async with server.client() as client:
            assert await status_once_ended(client, run_id) == "SUCCESS"
    finally:
        await server.stop()
    spans = await receiver.wait_for(ended_run_span(run_id))

    [stopped] = run_spans(first, run_id)
    assert stopped.attributes.get("flowtrail.interrupted") is True
    assert "flowtrail.run.status" not in stopped.attributes
    [stopped_again, continued] = sorted(run_spans(spans, run_id), key=lambda span: span.attributes["flowtrail.run.continues"])
    assert stopped_again == stopped
    assert continued.trace_id == stopped.trace_id == CALLER_TRACE
    assert continued.parent_span_id == stopped.parent_span_id
    assert continued.attributes["flowtrail.run.continues"] is True
    assert continued.attributes["flowtrail.run.status"] == "succeeded"
    later = {span.attributes["flowtrail.node.id"] for span in children(spans, continued)}
    assert "report" in later
    assert {span.attributes["flowtrail.node.id"] for span in children(spans, stopped)} | later == set(NODES)


async def streamed_a_while(client: httpx.AsyncClient, run_id: str) -> None:
    """Wait until the run's model visits streamed a few chunks (it is mid-way)."""
    async def streamed() -> None:
        while True:
            lines = (await client.get(f"/api/v1/runs/{run_id}/events")).text.splitlines()
            if sum('"type":"NodeStreamed"' in line for line in lines) >= 5:
                return
            await asyncio.sleep(0.05)
    await asyncio.wait_for(streamed(), RUN_BOUND_SECONDS)


@pytest.mark.parametrize("off", [{"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}],
                         ids=["sdk-disabled", "exporter-none"])
async def test_switched_off_nothing_is_exported_and_no_trace_is_recorded(store, tmp_path, receiver, off):
    server = await traced_server(store, tmp_path, receiver, **off).start()
    try:
        async with server.client() as client:
            run_id = await create_and_start(client, {"traceparent": TRACEPARENT})
            assert await status_once_ended(client, run_id) == "SUCCESS"
            created = await run_created(client, run_id)
    finally:
        await server.stop()
    assert receiver.requests == 0 and receiver.spans == []
    assert created["trace_parent"] is None
    assert "tracing: exporting" not in server.log()
