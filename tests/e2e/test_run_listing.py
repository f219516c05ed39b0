"""The run listing over real HTTP on both stores: pages, filters, ownership, bad parameters, fresh rows."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from uuid import UUID

import pytest

from domain import events as ev
from domain import run as decide
from engine.readmodel import RunQuery, rebuilt_rows
from tests.support.api import AUDITOR_KEY, DEMO_KEY, SCOPED_KEY

MILITARY_RUNS = "/api/v1/workflows/military-analyze-agent/runs"
REPORT_RUNS = "/api/v1/workflows/report-pipeline/runs"


def now() -> str:
    return datetime.now(UTC).isoformat()


async def create(api, key=DEMO_KEY, base=MILITARY_RUNS) -> str:
    async with api.client(key=key) as http:
        response = await http.post(base, json={"variables": {"topic": "x"}})
    assert response.status_code == 201, response.text
    return response.json()["data"]["runId"]


async def listed(api, key=DEMO_KEY, path="/api/v1/runs", **params) -> dict:
    async with api.client(key=key) as http:
        response = await http.get(path, params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["code"], body["message"]) == ("OK", "")
    return body["data"]


async def every_page(api, key=DEMO_KEY, path="/api/v1/runs", **params) -> list[dict]:
    items, cursor = [], None
    while True:
        page = await listed(api, key, path, **params, **({"cursor": cursor} if cursor else {}))
        items.extend(page["items"])
        cursor = page["nextCursor"]
        if cursor is None:
            return items


async def test_paging_through_many_runs_lists_each_once_newest_first(api):
    since = now()
    created = [await create(api) for _ in range(23)]
    items = await every_page(api, createdAfter=since, limit=5)
    assert [i["runId"] for i in items] == created[::-1]


async def test_a_created_run_is_listed_as_soon_as_its_creation_is_answered(api):
    since = now()
    run_id = await create(api)
    page = await listed(api, createdAfter=since)
    assert page == {"items": [{
        "runId": run_id, "workflowName": "military-analyze-agent", "workflowId": 1, "workflowVersion": 1,
        "status": "CREATED", "ownerKeyId": "demo", "cancelRequested": False, "cancelled": False,
        "createdAt": page["items"][0]["createdAt"], "startedAt": None, "completedAt": None, "errorCode": None,
        "promptTokens": 0, "completionTokens": 0, "lastEventId": 1, "waitingForAnswer": False, "waitingSince": None,
    }], "nextCursor": None}


async def test_the_row_of_a_run_that_finished_has_its_status_times_tokens_and_last_position(api):
    since = now()
    run_id = await create(api)
    async with api.client(key=DEMO_KEY) as http:
        assert (await http.post(f"{MILITARY_RUNS}/{run_id}/start")).status_code == 200
    writer = await api.services.runs.writer(UUID(run_id))
    await writer.decide(partial(model_called, prompt=11, completion=3), partial(model_called, prompt=5, completion=2))
    await writer.decide(partial(decide.complete_run, output={"status": 200}))
    [item] = (await listed(api, createdAfter=since))["items"]
    async with api.client(key=DEMO_KEY) as http:
        served = (await http.get(f"{MILITARY_RUNS}/{run_id}")).json()["data"]
    assert {k: item[k] for k in ("status", "createdAt", "startedAt", "completedAt")} == {
        k: served[k] for k in ("status", "createdAt", "startedAt", "completedAt")}
    assert (item["status"], item["promptTokens"], item["completionTokens"]) == ("SUCCESS", 16, 5)
    assert item["startedAt"] is not None and item["completedAt"] is not None
    assert item["lastEventId"] == await api.services.store.last_position(UUID(run_id)) == 5


def model_called(run, at, *, prompt: int, completion: int) -> ev.ModelCalled:
    return ev.ModelCalled(
        originator_id=run.id, originator_version=run.version + 1, timestamp=at, visit_uuid="v", node_id="node-2",
        model_id="scripted", purpose="node", attempt=1, latency_ms=1.5, prompt_tokens=prompt,
        completion_tokens=completion,
    )


async def test_a_failed_run_is_listed_with_the_code_of_its_error_and_a_cancelled_one_as_RUN_CANCELLED(api):
    since = now()
    failed, cancelled = await create(api), await create(api)
    writer = await api.services.runs.writer(UUID(failed))
    await writer.decide(partial(decide.fail_run, error="RUN_TIMEOUT: the run took longer than 1 s"))
    async with api.client(key=DEMO_KEY) as http:
        assert (await http.post(f"{MILITARY_RUNS}/{cancelled}/cancel")).status_code == 200
    await (await api.services.runs.writer(UUID(cancelled))).decide(decide.cancel_run)
    items = {i["runId"]: i for i in (await listed(api, createdAfter=since))["items"]}
    assert (items[failed]["status"], items[failed]["errorCode"]) == ("FAILED", "RUN_TIMEOUT")
    assert (items[cancelled]["status"], items[cancelled]["errorCode"]) == ("FAILED", "RUN_CANCELLED")
    assert items[cancelled]["cancelRequested"] and items[cancelled]["cancelled"]


async def test_filters_by_status_workflow_and_creation_time(api):
    since = now()
    military, report = await create(api), await create(api, base=REPORT_RUNS)
    middle = now()
    started = await create(api, base=REPORT_RUNS)
    async with api.client(key=DEMO_KEY) as http:
        assert (await http.post(f"{REPORT_RUNS}/{started}/start")).status_code == 200
    ids = [i["runId"] for i in await every_page(api, createdAfter=since, workflow="report-pipeline")]
    assert ids == [started, report]
    ids = [i["runId"] for i in await every_page(api, createdAfter=since, status="RUNNING")]
    assert ids == [started]
    ids = [i["runId"] for i in await every_page(api, createdAfter=since, status=["CREATED", "RUNNING"])]
    assert ids == [started, report, military]
    ids = [i["runId"] for i in await every_page(api, createdAfter=since, createdBefore=middle)]
    assert ids == [report, military]
    ids = [i["runId"] for i in await every_page(api, path=REPORT_RUNS, createdAfter=since, limit=1)]
    assert ids == [started, report]


async def test_creation_bounds_take_a_Z_or_an_offset(api):
    since = datetime.now(UTC)
    run_id = await create(api)
    assert [i["runId"] for i in await every_page(api, createdAfter=since.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))] == [run_id]
    assert await every_page(api, createdAfter=since.astimezone(timezone(timedelta(hours=8))).isoformat(),
                            createdBefore=since.isoformat()) == []


async def test_a_key_lists_only_its_own_runs_of_its_workflows_unless_it_sees_all_runs(api):
    since = now()
    mine = await create(api, key=SCOPED_KEY, base=REPORT_RUNS)
    demo_report, demo_military = await create(api, base=REPORT_RUNS), await create(api)
    assert [i["runId"] for i in await every_page(api, SCOPED_KEY, createdAfter=since)] == [mine]
    assert [i["runId"] for i in await every_page(api, AUDITOR_KEY, createdAfter=since)] == [demo_report, mine]
    everything = [i["runId"] for i in await every_page(api, DEMO_KEY, createdAfter=since)]
    assert everything == [demo_military, demo_report, mine]
    assert await every_page(api, SCOPED_KEY, createdAfter=since, workflow="military-analyze-agent") == []


async def test_the_runs_of_a_workflow_outside_the_keys_scope_are_WORKFLOW_NOT_FOUND(api):
    async with api.client(key=SCOPED_KEY) as http:
        response = await http.get(MILITARY_RUNS)
    assert (response.status_code, response.json()["code"]) == (404, "WORKFLOW_NOT_FOUND")


BEYOND_64_BITS = base64.urlsafe_b64encode(f"{2**63}.{'0' * 32}".encode()).decode().rstrip("=")
"""A cursor of the right form whose time is past what a signed 64-bit column holds."""
BAD_PARAMETERS = [
    ({"limit": "0"}, "limit"), ({"limit": "201"}, "limit"), ({"limit": "many"}, "limit"),
    ({"status": "DONE"}, "status"), ({"createdAfter": "2026-01-01T00:00:00"}, "createdAfter"),
    ({"createdBefore": "yesterday"}, "createdBefore"), ({"cursor": "not-a-cursor"}, "cursor"),
    ({"cursor": "MTIzLm5vdC1oZXg"}, "cursor"), ({"cursor": BEYOND_64_BITS}, "cursor"),
    ({"createdAfter": "x" * 65}, "createdAfter"), ({"createdBefore": "y" * 65}, "createdBefore"),
]
ONLY_ON_RUNS = [({"workflow": ""}, "workflow"), ({"workflow": "demo\x00report"}, "workflow")]
"""Only /runs takes a workflow filter."""


@pytest.mark.parametrize("path,params,named", [
    *(("/api/v1/runs", params, named) for params, named in BAD_PARAMETERS + ONLY_ON_RUNS),
    *((REPORT_RUNS, params, named) for params, named in BAD_PARAMETERS),
])
async def test_a_bad_listing_parameter_is_VALIDATION_FAILED_naming_it(api, params, named, path):
    async with api.client(key=DEMO_KEY) as http:
        response = await http.get(path, params=params)
    body = response.json()
    assert (response.status_code, body["code"], body["data"]) == (400, "VALIDATION_FAILED", None)
    assert named in body["message"]


async def test_one_workflow_is_served_in_the_shape_of_the_workflow_list(api):
    async with api.client(key=SCOPED_KEY) as http:
        listed_workflows = (await http.get("/api/v1/workflows")).json()["data"]
        one = await http.get("/api/v1/workflows/report-pipeline")
        outside = await http.get("/api/v1/workflows/military-analyze-agent")
    assert one.status_code == 200 and one.json()["data"] == listed_workflows[0]
    assert (outside.status_code, outside.json()["code"]) == (404, "WORKFLOW_NOT_FOUND")


async def test_the_rows_rebuilt_from_the_log_equal_the_rows_kept_live(api):
    run_id = await create(api)
    await (await api.services.runs.writer(UUID(run_id))).decide(partial(decide.fail_run, error="boom"))
    rebuilt, _ = rebuilt_rows(api.services.store.sync)
    stored = await api.services.read_model.page(RunQuery(limit=100_000))
    assert sorted(rebuilt, key=lambda r: r.run_id) == sorted(stored, key=lambda r: r.run_id)
