"""End to end with the real engine: the seed's asynchronous flow, the blocking flow, and cancel."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from uuid import UUID

import pytest

from tests.support.api import DEMO_KEY, start_api_server
from tests.support.sse import read_stream


@pytest.fixture
async def live(store, tmp_path):
    server = await start_api_server(store, tmp_path / "data", manual=False, keepalive_seconds=0.5)
    yield server
    await server.stop()


async def test_the_seeds_asynchronous_flow_runs_a_workflow_to_success(live):
    async with live.client(key=DEMO_KEY) as client:
        files = [("payload", (None, json.dumps({"variables": {"topic": "汇总报告"}}).encode(), "application/json")),
                 ("files", ("data.csv", b"a,b\n", "text/csv", {"X-Relative-Path": "inputs/2024/data.csv"}))]
        created = (await client.post("/api/v1/workflows/report-pipeline/runs", files=files)).json()["data"]
        links = created["links"]
        started = await client.post(links["start"])
        assert started.status_code == 200 and started.json()["data"]["status"] == "RUNNING"
        got = await read_stream(client, links["stream"])
        assert got.ended and got.events[-1] == "workflow_complete"
        result = (await client.get(links["result"])).json()["data"]
        assert result["status"] == "SUCCESS" and result["outputs"]["status"] == 200
        assert result["outputs"]["data"] == {"report": "汇总报告"}
        assert {n["nodeId"] for n in result["nodes"]} == {"input", "done"}
        assert result["workspace"]["fileCount"] >= 1
        archive = zipfile.ZipFile(io.BytesIO((await client.get(links["workspace"])).content))
        assert "inputs/2024/data.csv" in archive.namelist()
        again = await client.post(links["start"])
        assert (again.status_code, again.json()["code"]) == (409, "RUN_ALREADY_STARTED")


async def test_a_blocking_creation_answers_with_the_runs_stream(live):
    async with live.client(key=DEMO_KEY) as client:
        events = []
        async with client.stream("POST", "/api/v1/workflows/report-pipeline/runs",
                                 json={"variables": {"topic": "x"}, "async": False}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            run_id = response.headers["x-run-id"]
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    events.append(line[7:])
        assert events[-1] == "workflow_complete"
        state = (await client.get(f"/api/v1/runs/{run_id}/state")).json()["data"]
        assert state == {"runId": run_id, "status": "SUCCESS", "currentPause": None}


async def test_cancelling_a_running_run_is_requested_then_confirmed(live):
    async with live.client(key=DEMO_KEY) as client:
        created = (await client.post("/api/v1/workflows/military-analyze-agent/runs",
                                     json={"variables": {"topic": "x"}})).json()["data"]
        links = created["links"]
        await client.post(links["start"])
        answer = (await client.post(links["start"].replace("/start", "/cancel"))).json()["data"]
        assert answer["outcome"] in ("REQUESTED", "ALREADY_FINISHED")
        got = await read_stream(client, links["stream"])
        assert got.ended
        for _ in range(100):
            result = (await client.get(links["result"])).json()["data"]
            if result["status"] != "RUNNING":
                break
            await asyncio.sleep(0.05)
        if answer["outcome"] == "REQUESTED":
            assert (result["status"], result["cancelRequested"]) == ("FAILED", True)
            assert result["cancelled"] or result["error"]


async def test_a_link_left_in_the_workspace_is_neither_listed_counted_nor_zipped(live, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0")
    async with live.client(key=DEMO_KEY) as client:
        files = [("payload", (None, json.dumps({"variables": {"topic": "t"}}).encode(), "application/json")),
                 ("files", ("data.csv", b"a,b\n", "text/csv", {"X-Relative-Path": "inputs/data.csv"}))]
        created = (await client.post("/api/v1/workflows/report-pipeline/runs", files=files)).json()["data"]
        base = live.services.workspace.path_for(UUID(created["runId"]))
        (base / "inputs" / "passwd").symlink_to(outside / "passwd")
        (base / "etc").symlink_to(outside, target_is_directory=True)
        links = created["links"]
        await client.post(links["start"])
        got = await read_stream(client, links["stream"])
        assert got.events[-1] == "workflow_complete"
        assert got.data[-1]["workingDirFiles"] == ["inputs/data.csv"]
        result = (await client.get(links["result"])).json()["data"]
        assert (result["workspace"]["fileCount"], result["workspace"]["totalBytes"]) == (1, 4)
        archive = zipfile.ZipFile(io.BytesIO((await client.get(links["workspace"])).content))
        assert archive.namelist() == ["inputs/data.csv"]
