"""Idempotency-Key on run creation: same caller + same request + same version is the same run; survives restarts and races."""

from __future__ import annotations

import asyncio
import copy
from uuid import UUID

import pytest

from domain.idempotency import IdempotencyKeyClaimed, claim_stream_id
from tests.support.api import DEMO_KEY, KEYS, MILITARY, SCOPED_KEY, log_end, start_api_server, tags_since

BASE = "/api/v1/workflows/military-analyze-agent/runs"
BODY = {"variables": {"topic": "AI", "options": {"lang": "zh", "verbose": False}}, "async": True}

def new_key(request) -> str:
    return f"idem-{request.node.name}"[:200].replace("[", "-").replace("]", "")


async def post(client, key, body=BODY, path=BASE):
    return await client.post(path, json=body, headers={"Idempotency-Key": key})


async def test_a_repeated_request_returns_the_original_run_and_appends_nothing(api, client, request):
    key = new_key(request)
    first = await post(client, key)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    before = await log_end(api.services)
    again = await post(client, key)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["data"] == first.json()["data"]
    assert await log_end(api.services) == before
    created = (await api.services.runs.events(UUID(first.json()["data"]["runId"])))[0]
    assert created.idempotency_key == key and created.caller_key_id == "demo"


async def test_the_claim_is_a_stream_of_its_own_with_the_caller_id_never_the_api_key(api, client, request):
    key = new_key(request)
    run_id = (await post(client, key)).json()["data"]["runId"]
    [claim] = await api.services.store.read_stream(claim_stream_id("demo", key))
    assert isinstance(claim, IdempotencyKeyClaimed)
    assert (claim.run_id.hex, claim.caller_key_id, claim.idempotency_key, claim.workflow_version) == (
        run_id, "demo", key, 1)
    stored = await asyncio.to_thread(lambda: api.services.store.sync.app.recorder.select_events(claim.originator_id))
    assert DEMO_KEY.encode() not in stored[0].state


async def test_the_replay_reports_the_runs_current_status(api, client, request):
    key = new_key(request)
    run_id = (await post(client, key)).json()["data"]["runId"]
    await client.post(f"{BASE}/{run_id}/start")
    again = (await post(client, key)).json()["data"]
    assert (again["runId"], again["status"]) == (run_id, "RUNNING")


async def test_key_order_and_spelled_out_defaults_do_not_make_a_different_request(client, request):
    key = new_key(request)
    first = (await post(client, key, {"variables": {"topic": "t", "b": {"y": 2, "x": 1}}})).json()["data"]
    same = await client.post(BASE, content=b'{"ttlHours": 720, "async": true, "variables": {"b": {"x": 1, "y": 2}, "topic": "t"}}',
                             headers={"Idempotency-Key": key, "Content-Type": "application/json"})
    assert same.status_code == 200 and same.json()["data"]["runId"] == first["runId"]


@pytest.mark.parametrize("changed", [
    {**BODY, "variables": {"topic": "other"}},
    {**BODY, "ttlHours": 24},
    {**BODY, "async": False},
])
async def test_the_same_key_with_a_different_request_is_idempotency_key_reused(api, client, request, changed):
    key = new_key(request)
    await post(client, key)
    before = await log_end(api.services)
    response = await post(client, key, changed)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "IDEMPOTENCY_KEY_REUSED" and body["data"] is None and key in body["message"]
    assert await log_end(api.services) == before


async def test_the_same_key_on_another_workflow_is_idempotency_key_reused(client, request):
    key = new_key(request)
    await post(client, key)
    response = await post(client, key, path="/api/v1/workflows/report-pipeline/runs")
    assert response.json()["code"] == "IDEMPOTENCY_KEY_REUSED"


async def test_the_same_key_from_another_caller_is_a_different_request(api, client, request):
    key = new_key(request)
    mine = (await post(client, key, path="/api/v1/workflows/report-pipeline/runs")).json()["data"]["runId"]
    async with api.client(key=SCOPED_KEY) as other:
        theirs = await post(other, key, path="/api/v1/workflows/report-pipeline/runs")
    assert theirs.status_code == 201 and theirs.json()["data"]["runId"] != mine


async def test_a_new_workflow_version_makes_the_key_refuse_instead_of_replaying(api, client, request):
    key = new_key(request)
    await post(client, key, path="/api/v1/workflows/report-pipeline/runs")
    from tests.support.api import REPORT

    changed = copy.deepcopy(REPORT)
    changed["description"] = f"changed for {key}"
    await api.services.catalogue.publish(changed)
    response = await post(client, key, path="/api/v1/workflows/report-pipeline/runs")
    assert response.json()["code"] == "IDEMPOTENCY_KEY_REUSED" and "version" in response.json()["message"]


async def test_concurrent_identical_requests_create_one_run(api, client, request):
    key = new_key(request)
    before = await log_end(api.services)
    responses = await asyncio.gather(*(post(client, key) for _ in range(8)))
    run_ids = {r.json()["data"]["runId"] for r in responses}
    assert len(run_ids) == 1
    assert sorted(r.status_code for r in responses) == [200] * 7 + [201]
    assert sorted(tags_since(api.services, before)) == ["IdempotencyKeyClaimed", "RunCreated"]


async def test_a_repeated_multipart_request_returns_the_original_run_and_leaves_no_second_copy(api, client, request):
    key = new_key(request)
    files = [("payload", (None, b'{"variables": {"topic": "t"}}', "application/json")), ("files", ("a.txt", b"same", "text/plain"))]
    root = api.settings.workspaces_dir
    first = await client.post(BASE, files=files, headers={"Idempotency-Key": key})
    dirs = set(root.iterdir())
    again = await client.post(BASE, files=files, headers={"Idempotency-Key": key})
    assert again.status_code == 200 and again.json()["data"]["runId"] == first.json()["data"]["runId"]
    assert set(root.iterdir()) == dirs
    other = [files[0], ("files", ("a.txt", b"different", "text/plain"))]
    assert (await client.post(BASE, files=other, headers={"Idempotency-Key": key})).json()["code"] == "IDEMPOTENCY_KEY_REUSED"


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "tab\there", "é"])
async def test_a_malformed_idempotency_key_is_validation_failed(api, client, key):
    before = await log_end(api.services)
    response = await client.post(BASE, json=BODY, headers={"Idempotency-Key": key.encode("utf-8")})
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert await log_end(api.services) == before


async def test_a_blocking_repeat_reattaches_to_the_original_runs_stream(api, client, request):
    from tests.support.api import finish
    from tests.support.sse import read_stream

    key = new_key(request)
    async with client.stream("POST", "/api/v1/workflows/report-pipeline/runs", json={"async": False},
                             headers={"Idempotency-Key": key}) as first:
        assert first.status_code == 200 and first.headers["content-type"].startswith("text/event-stream")
        run_id = first.headers["x-run-id"]
    await finish(api.services, UUID(run_id))
    again = await read_stream_post(client, key)
    assert again == ["workflow_complete"]
    got = await read_stream(client, f"/api/v1/workflows/report-pipeline/runs/{run_id}/stream")
    assert got.events == ["workflow_complete"]


async def read_stream_post(client, key) -> list[str]:
    events = []
    async with client.stream("POST", "/api/v1/workflows/report-pipeline/runs", json={"async": False},
                             headers={"Idempotency-Key": key}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                events.append(line[7:])
    return events


async def test_keys_survive_a_restart_and_hold_across_two_servers_on_one_store(store, tmp_path):
    first = await start_api_server(store, tmp_path / "a", keys=KEYS)
    second = await start_api_server(store, tmp_path / "b", keys=KEYS)
    try:
        async with first.client(key=DEMO_KEY) as a, second.client(key=DEMO_KEY) as b:
            racing = await asyncio.gather(*(post(c, "shared-key") for c in (a, b, a, b)))
            assert len({r.json()["data"]["runId"] for r in racing}) == 1
        await first.stop()
        restarted = await start_api_server(store, tmp_path / "a", keys=KEYS)
        try:
            async with restarted.client(key=DEMO_KEY) as again:
                replay = await post(again, "shared-key")
            assert replay.status_code == 200 and replay.json()["data"]["runId"] == racing[0].json()["data"]["runId"]
        finally:
            await restarted.stop()
    finally:
        await second.stop()
    assert MILITARY["name"] == "military-analyze-agent"
