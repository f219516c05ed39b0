"""The `{workflowName}` segment is resolved once, the seed's way (name first, then a pure ASCII-digit id), on every route."""

from __future__ import annotations

import pytest

from tests.support.api import DEMO_KEY, REPORT, log_end

RUN_ROUTES = [
    ("GET", "{base}/{run}"), ("GET", "{base}/{run}/stream?snapshot=true"), ("GET", "{base}/{run}/workspace"),
    ("POST", "{base}/{run}/start"), ("POST", "{base}/{run}/cancel"),
]
NOT_A_WORKFLOW = ["²", "٣", "1²", "9" * 5000, "0x1", " 1", "-1"]
NAMED_TWO = {**REPORT, "name": "2", "displayName": "named two"}


async def create(api, segment: str) -> str:
    async with api.client(key=DEMO_KEY) as client:
        response = await client.post(f"/api/v1/workflows/{segment}/runs", json={"variables": {"topic": "x"}})
    assert response.status_code == 201, response.text
    return response.json()["data"]["runId"]


async def call(api, method: str, path: str):
    async with api.client(key=DEMO_KEY) as client:
        return await client.request(method, path, json={})


@pytest.mark.parametrize("segment", ["1", "01", "0001", "military-analyze-agent"])
async def test_every_run_route_takes_the_workflow_by_name_or_by_id_with_leading_zeros(api, segment):
    run_id = await create(api, "01")
    base = f"/api/v1/workflows/{segment}/runs"
    async with api.client(key=DEMO_KEY) as client, client.stream("GET", f"{base}/{run_id}/stream") as stream:
        assert stream.status_code == 200
    for method, path in RUN_ROUTES:
        if "stream" not in path:
            response = await call(api, method, path.format(base=base, run=run_id))
            assert response.status_code < 400, (method, path, response.status_code, response.text)


async def test_a_workflow_named_2_hides_the_runs_of_the_workflow_whose_id_is_2(api):
    named_two = await api.services.catalogue.publish(NAMED_TWO)
    report_run = await create(api, "report-pipeline")
    named_run = await create(api, "2")
    assert named_two.workflow_id != 2
    for method, path in RUN_ROUTES:
        before = await log_end(api.services)
        response = await call(api, method, path.format(base="/api/v1/workflows/2/runs", run=report_run))
        assert (response.status_code, response.json()["code"]) == (404, "RUN_NOT_FOUND"), (method, path)
        assert await log_end(api.services) == before
    async with api.client(key=DEMO_KEY) as client:
        assert (await client.get(f"/api/v1/workflows/2/runs/{named_run}")).status_code == 200
        assert (await client.get(f"/api/v1/workflows/{named_two.workflow_id}/runs/{named_run}")).status_code == 200
        assert (await client.get(f"/api/v1/workflows/report-pipeline/runs/{report_run}")).status_code == 200


@pytest.mark.parametrize("segment", NOT_A_WORKFLOW)
async def test_a_segment_that_is_neither_a_name_nor_a_pure_digit_id_is_workflow_not_found_on_create(api, segment):
    before = await log_end(api.services)
    async with api.client(key=DEMO_KEY) as client:
        response = await client.post(f"/api/v1/workflows/{segment}/runs", json={})
    assert (response.status_code, response.json()["code"]) == (404, "WORKFLOW_NOT_FOUND")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("segment", NOT_A_WORKFLOW)
async def test_a_segment_that_is_neither_a_name_nor_a_pure_digit_id_is_run_not_found_on_run_routes(api, segment):
    run_id = await create(api, "1")
    for method, path in RUN_ROUTES:
        before = await log_end(api.services)
        response = await call(api, method, path.format(base=f"/api/v1/workflows/{segment}/runs", run=run_id))
        assert (response.status_code, response.json()["code"]) == (404, "RUN_NOT_FOUND"), (method, path)
        assert await log_end(api.services) == before
