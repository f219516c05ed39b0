"""What an operator sees of a real server process running the demos: its JSON log lines and its /metrics."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from httpx_sse import aconnect_sse
from prometheus_client.parser import text_string_to_metric_families

from tests.support.process import ServerProcess
from tests.support.server import KEYS
from tests.support.sse import read_stream
from tests.support.stores import drop_schema, store_url

CONTEXT_TOKEN = re.compile(r"(?<![0-9a-f])[0-9a-f]{48}(?![0-9a-f])")
"""A context token is 48 hex characters (seed internal-context-query-spec); nothing else we log looks like one."""


@dataclass
class Observed:
    """A server process after the demo runs, what it logged, and the run ids by what happened to them."""

    server: ServerProcess
    runs: dict[str, str] = field(default_factory=dict)
    lines: list[dict] = field(default_factory=list)
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def logged(self, logger: str, **fields: object) -> list[dict]:
        """The log lines of a logger whose fields have these values."""
        return [line for line in self.lines if line["logger"] == logger
                and all(line.get(name) == value for name, value in fields.items())]

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a sample over the series that have these labels."""
        return sum(value for (sample, series), value in self.metrics.items()
                   if sample == name and set(labels.items()) <= set(series))


async def create_and_start(client: httpx.AsyncClient, name: str, variables: dict) -> str:
    created = await client.post(f"/api/v1/workflows/{name}/runs", json={"variables": variables})
    assert created.status_code == 201, created.text
    run_id = created.json()["data"]["runId"]
    assert (await client.post(f"/api/v1/workflows/{name}/runs/{run_id}/start")).status_code == 200
    return run_id


async def question_of(client: httpx.AsyncClient, run_id: str) -> str:
    """The clarify id the paused run waits on (read from the stream until the question comes)."""
    path = f"/api/v1/workflows/demo-clarify/runs/{run_id}/stream"
    async with aconnect_sse(client, "GET", path, timeout=httpx.Timeout(30.0, read=60.0)) as source:
        async for sse in source.aiter_sse():
            data = json.loads(sse.data) if sse.data else {}
            if data.get("kind") == "clarify_request":
                return json.loads(data["content"])["clarify_id"]
    raise AssertionError("the stream ended without a question")


async def run_the_demos(server: ServerProcess) -> dict[str, str]:
    """A report (its key points node queries the context API), a clarify answered, and a clarify cancelled."""
    runs: dict[str, str] = {}
    async with server.client() as client:
        runs["completed"] = await create_and_start(client, "demo-report", {"topic": "tides"})
        got = await read_stream(client, f"/api/v1/workflows/demo-report/runs/{runs['completed']}/stream")
        assert got.events[-1] == "workflow_complete"
        runs["answered"] = await create_and_start(client, "demo-clarify", {"topic": "moons"})
        clarify_id = await question_of(client, runs["answered"])
        answer = {"clarifyId": clarify_id, "answer": "bullet list"}
        assert (await client.post(f"/api/v1/runs/{runs['answered']}/resume", json=answer)).status_code == 200
        got = await read_stream(client, f"/api/v1/workflows/demo-clarify/runs/{runs['answered']}/stream")
        assert got.events[-1] == "workflow_complete"
        runs["cancelled"] = await create_and_start(client, "demo-clarify", {"topic": "comets"})
        await question_of(client, runs["cancelled"])
        assert (await client.post(f"/api/v1/workflows/demo-clarify/runs/{runs['cancelled']}/cancel")).status_code == 200
        got = await read_stream(client, f"/api/v1/workflows/demo-clarify/runs/{runs['cancelled']}/stream")
        assert got.events[-1] == "workflow_error"
        assert (await client.get("/api/v1/nothing-here")).status_code == 404
        assert (await client.get("/api/v1/workflows", headers={"X-API-Key": "not-a-key"})).status_code == 401
    return runs


async def scrape(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text) for sample in family.samples
    }


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def observed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Observed]:
    tmp = tmp_path_factory.mktemp(f"observed-{request.param}")
    url, schema = store_url(request.param, tmp)
    server = await ServerProcess(
        url, tmp / "data", FLOWTRAIL_LOAD_DEMOS="true", FLOWTRAIL_LOG_FORMAT="json", FLOWTRAIL_LOG_LEVEL="DEBUG",
    ).start()
    try:
        seen = Observed(server, runs=await run_the_demos(server))
        seen.metrics = await scrape(server)
        await server.stop()
        seen.lines = [json.loads(line) for line in server.log().splitlines()]
        yield seen
    finally:
        await server.stop()
        if schema is not None:
            drop_schema(schema)


def test_every_log_line_of_the_process_is_one_json_object_with_ts_level_logger_and_msg(observed):
    assert observed.lines
    for line in observed.lines:
        assert {"ts", "level", "logger", "msg"} <= set(line), line
    loggers = {line["logger"] for line in observed.lines}
    assert {"flowtrail", "flowtrail.access", "flowtrail.runs", "uvicorn.error"} <= loggers


def test_each_request_is_logged_with_its_route_template_status_duration_and_key_id(observed):
    run_id = observed.runs["completed"]
    creates = observed.logged("flowtrail.access", method="POST", route="/api/v1/workflows/{workflowName}/runs")
    streams = observed.logged("flowtrail.access", route="/api/v1/workflows/{workflowName}/runs/{runId}/stream")
    assert len(creates) == 3 and {line["status"] for line in creates} == {201}
    assert {line["key_id"] for line in creates} == {KEYS[0].id}
    assert all(isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0 for line in creates)
    assert streams and all(run_id not in line["route"] for line in streams)
    assert observed.logged("flowtrail.access", route="(unmatched)", status=404)
    assert observed.logged("flowtrail.access", route="/api/v1/workflows", status=401, key_id="-")
    assert observed.logged("flowtrail.access", route="/internal/context/output", status=200, key_id="-")


def test_uvicorns_own_access_log_is_replaced(observed):
    assert not [line for line in observed.lines if line["logger"] == "uvicorn.access"]


@pytest.mark.parametrize("outcome,steps", [
    ("completed", ["created", "started", "completed"]),
    ("answered", ["created", "started", "paused", "resumed", "completed"]),
    ("cancelled", ["created", "started", "paused", "cancel requested", "cancelled"]),
])
def test_each_lifecycle_step_of_a_run_is_one_line_with_its_workflow_version_and_duration(observed, outcome, steps):
    lines = observed.logged("flowtrail.runs", run_id=observed.runs[outcome])
    assert [line["msg"] for line in lines] == [f"run {step}" for step in steps]
    assert {line["workflow"] for line in lines} == {"demo-report" if outcome == "completed" else "demo-clarify"}
    assert {line["version"] for line in lines} == {1}
    durations = [line["duration_ms"] for line in lines]
    assert durations[0] == 0 and durations == sorted(durations)


def test_no_api_key_and_no_context_token_reaches_the_log(observed):
    text = observed.server.log()
    assert observed.logged("flowtrail.access", route="/internal/context/path")
    for key in KEYS:
        assert key.key not in text
    assert "not-a-key" not in text
    assert not CONTEXT_TOKEN.findall(text)


def test_the_counters_moved_with_the_demo_runs(observed):
    metric = observed.metric
    assert metric("flowtrail_http_requests_total", route="/api/v1/workflows/{workflowName}/runs", status="201") == 3
    assert metric("flowtrail_runs_created_total", workflow="demo-clarify") == 2
    assert metric("flowtrail_runs_finished_total", workflow="demo-report", status="succeeded") == 1
    assert metric("flowtrail_runs_finished_total", workflow="demo-clarify", status="succeeded") == 1
    assert metric("flowtrail_runs_finished_total", workflow="demo-clarify", status="cancelled") == 1
    assert metric("flowtrail_runs_active") == 0
    assert metric("flowtrail_events_appended_total") > 50
    assert metric("flowtrail_append_seconds_count") > 10
    assert metric("flowtrail_sse_messages_total") > 50
    assert metric("flowtrail_sse_clients") == 0
    assert metric("flowtrail_context_queries_total", endpoint="/output", status="200") >= 1
    assert metric("flowtrail_model_calls_total", model="scripted", purpose="node", outcome="ok") >= 3
    assert metric("flowtrail_model_tokens_total", model="scripted", kind="completion") > 0
    assert metric("flowtrail_store_errors_total") == 0
