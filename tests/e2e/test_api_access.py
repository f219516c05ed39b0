"""Re-authorisation: every request re-checks the key's scope and the run's owner; runs outside them do not exist; a removed key loses access."""

from __future__ import annotations

import pytest

from engine.access import ApiKey
from tests.support.api import AUDITOR_KEY, DEMO_KEY, ID_SCOPED_KEY, KEYS, SCOPED_KEY, log_end, start_api_server

MILITARY_RUNS = "/api/v1/workflows/military-analyze-agent/runs"
REPORT_RUNS = "/api/v1/workflows/report-pipeline/runs"
RUN_ENDPOINTS = [
    ("POST", "{base}/{run}/start"), ("GET", "{base}/{run}"), ("GET", "{base}/{run}/stream"),
    ("GET", "{base}/{run}/nodes/node-2/logs"), ("GET", "{base}/{run}/workspace"), ("POST", "{base}/{run}/cancel"),
    ("POST", "/api/v1/runs/{run}/resume"), ("GET", "/api/v1/runs/{run}/state"), ("GET", "/api/v1/runs/{run}/audit"),
]
READ_ENDPOINTS = [("GET", "{base}/{run}"), ("GET", "{base}/{run}/workspace"), ("GET", "/api/v1/runs/{run}/state"),
                  ("GET", "/api/v1/runs/{run}/audit")]


async def create(server, key=DEMO_KEY, base=MILITARY_RUNS) -> str:
    async with server.client(key=key) as client:
        response = await client.post(base, json={"variables": {"topic": "x"}})
    assert response.status_code == 201, response.text
    return response.json()["data"]["runId"]


async def answer(server, key, method, path, run_id, base=MILITARY_RUNS):
    async with server.client(key=key) as client:
        return await client.request(method, path.format(base=base, run=run_id), json={"clarifyId": "c", "answer": "a"})


@pytest.mark.parametrize("key", [SCOPED_KEY, ID_SCOPED_KEY])
async def test_a_scoped_key_lists_only_the_workflows_in_its_scope(api, key):
    async with api.client(key=key) as client:
        listed = (await client.get("/api/v1/workflows")).json()["data"]
    assert [w["workflowName"] for w in listed] == ["report-pipeline"]


@pytest.mark.parametrize("key", [SCOPED_KEY, ID_SCOPED_KEY])
@pytest.mark.parametrize("workflow", ["military-analyze-agent", "1"])
async def test_a_scoped_key_cannot_create_a_run_of_a_workflow_outside_its_scope(api, key, workflow):
    before = await log_end(api.services)
    async with api.client(key=key) as client:
        response = await client.post(f"/api/v1/workflows/{workflow}/runs", json={})
    assert (response.status_code, response.json()["code"]) == (404, "WORKFLOW_NOT_FOUND")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("key", [SCOPED_KEY, ID_SCOPED_KEY])
@pytest.mark.parametrize("method,path", RUN_ENDPOINTS)
async def test_a_run_outside_the_keys_scope_is_run_not_found_on_every_endpoint(api, key, method, path):
    run_id = await create(api)
    before = await log_end(api.services)
    response = await answer(api, key, method, path, run_id)
    assert (response.status_code, response.json()) == (404, {"code": "RUN_NOT_FOUND", "message": "run not found", "data": None})
    assert await log_end(api.services) == before


@pytest.mark.parametrize("owner,other", [(SCOPED_KEY, ID_SCOPED_KEY), (ID_SCOPED_KEY, SCOPED_KEY), (DEMO_KEY, SCOPED_KEY)])
@pytest.mark.parametrize("method,path", RUN_ENDPOINTS)
async def test_a_run_another_key_created_is_run_not_found_on_every_endpoint(api, owner, other, method, path):
    run_id = await create(api, key=owner, base=REPORT_RUNS)
    before = await log_end(api.services)
    response = await answer(api, other, method, path, run_id, base=REPORT_RUNS)
    assert (response.status_code, response.json()) == (404, {"code": "RUN_NOT_FOUND", "message": "run not found", "data": None})
    assert await log_end(api.services) == before


@pytest.mark.parametrize("key", [SCOPED_KEY, ID_SCOPED_KEY])
@pytest.mark.parametrize("method,path", READ_ENDPOINTS)
async def test_a_key_uses_the_runs_it_created(api, key, method, path):
    run_id = await create(api, key=key, base=REPORT_RUNS)
    assert (await answer(api, key, method, path, run_id, base=REPORT_RUNS)).status_code == 200


@pytest.mark.parametrize("key", [DEMO_KEY, AUDITOR_KEY])
@pytest.mark.parametrize("method,path", READ_ENDPOINTS)
async def test_a_key_that_sees_all_runs_uses_the_runs_of_its_workflows_whoever_created_them(api, key, method, path):
    run_id = await create(api, key=SCOPED_KEY, base=REPORT_RUNS)
    assert (await answer(api, key, method, path, run_id, base=REPORT_RUNS)).status_code == 200


@pytest.mark.parametrize("method,path", RUN_ENDPOINTS)
async def test_a_key_that_sees_all_runs_still_sees_none_outside_its_scope(api, method, path):
    run_id = await create(api, key=DEMO_KEY)
    response = await answer(api, AUDITOR_KEY, method, path, run_id)
    assert (response.status_code, response.json()["code"]) == (404, "RUN_NOT_FOUND")


async def test_a_key_removed_from_the_configuration_loses_access_after_a_restart(store, tmp_path):
    first = await start_api_server(store, tmp_path / "data", keys=KEYS)
    run_id = await create(first, key=SCOPED_KEY, base=REPORT_RUNS)
    await first.stop()
    narrowed = (ApiKey(key=DEMO_KEY, id="demo", sees_all_runs=True), ApiKey(key=SCOPED_KEY, id="scoped", workflow_names=("other",)))
    second = await start_api_server(store, tmp_path / "data", keys=narrowed)
    try:
        for method, path in RUN_ENDPOINTS:
            gone = await answer(second, "id-scoped-key", method, path, run_id, base=REPORT_RUNS)
            assert (gone.status_code, gone.json()["code"]) == (401, "UNAUTHORIZED")
            narrowed_out = await answer(second, SCOPED_KEY, method, path, run_id, base=REPORT_RUNS)
            assert (narrowed_out.status_code, narrowed_out.json()["code"]) == (404, "RUN_NOT_FOUND")
        async with second.client(key=SCOPED_KEY) as client:
            assert (await client.get("/api/v1/workflows")).json()["data"] == []
        async with second.client(key=DEMO_KEY) as client:
            assert (await client.get(f"{REPORT_RUNS}/{run_id}")).status_code == 200
    finally:
        await second.stop()
