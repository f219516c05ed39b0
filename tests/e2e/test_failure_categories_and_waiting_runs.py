"""Over real HTTP on both stores: a failed run's `errorCode` in GET run, the listing (filterable) and /metrics, and
a run that waits for a person's answer said to wait, since when, on what question, and listed first by `WAITING`."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from uuid import UUID

from domain import run as decide
from tests.support.api import DEMO_KEY

RUNS = "/api/v1/workflows/military-analyze-agent/runs"


async def created_and_started(api) -> str:
    async with api.client(key=DEMO_KEY) as http:
        response = await http.post(RUNS, json={"variables": {"topic": "x"}})
        run_id = response.json()["data"]["runId"]
        assert (await http.post(f"{RUNS}/{run_id}/start")).status_code == 200
    return run_id


async def get(api, path: str, **params) -> dict:
    async with api.client(key=DEMO_KEY) as http:
        response = await http.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def paused(api, run_id: str) -> None:
    writer = await api.services.runs.writer(UUID(run_id))
    await writer.decide(partial(decide.start_visit, visit_uuid="v1", node_id="node-2", node_type="agent",
                                node_label="Research", iter_seq=1, sort_order=1))
    await writer.decide(partial(decide.request_clarify, clarify_id="c1", visit_uuid="v1", node_id="node-2",
                                question="Which version?", choices=("v1.0", "v2.0")))


async def test_a_failed_run_carries_its_category_in_GET_run_and_the_listing_and_can_be_listed_by_it(api):
    since = datetime.now(UTC).isoformat()
    run_id = await created_and_started(api)
    writer = await api.services.runs.writer(UUID(run_id))
    await writer.decide(partial(decide.fail_run, error="model endpoint answered 503", error_code="MODEL_UNAVAILABLE"))
    served = await get(api, f"{RUNS}/{run_id}")
    assert (served["status"], served["error"], served["errorCode"]) == ("FAILED", "model endpoint answered 503",
                                                                        "MODEL_UNAVAILABLE")
    listed = await get(api, "/api/v1/runs", createdAfter=since, errorCode="MODEL_UNAVAILABLE")
    assert [(i["runId"], i["errorCode"]) for i in listed["items"]] == [(run_id, "MODEL_UNAVAILABLE")]
    assert (await get(api, RUNS, createdAfter=since, errorCode=["NODE_TIMEOUT", "RUN_TIMEOUT"]))["items"] == []


async def test_an_error_code_outside_the_closed_list_is_VALIDATION_FAILED(api):
    async with api.client(key=DEMO_KEY) as http:
        response = await http.get("/api/v1/runs", params={"errorCode": "SOMETHING_ELSE"})
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert "errorCode" in response.json()["message"]


async def test_a_run_that_succeeds_or_runs_has_no_error_code(api):
    run_id = await created_and_started(api)
    served = await get(api, f"{RUNS}/{run_id}")
    assert (served["errorCode"], served["waitingForAnswer"], served["waitingSince"], served["currentPause"]) == (
        None, False, None, None)


async def test_the_metrics_count_failed_runs_by_workflow_and_category(api):
    run_id = await created_and_started(api)
    writer = await api.services.runs.writer(UUID(run_id))
    await writer.decide(partial(decide.fail_run, error="too many visits", error_code="BUDGET_EXHAUSTED"))
    async with api.client() as http:
        text = (await http.get("/metrics")).text
    assert 'flowtrail_runs_failed_total{error_code="BUDGET_EXHAUSTED",workflow="military-analyze-agent"}' in text


async def test_a_run_waiting_for_an_answer_says_so_since_when_and_on_which_question(api):
    run_id = await created_and_started(api)
    await paused(api, run_id)
    served = await get(api, f"{RUNS}/{run_id}")
    assert (served["status"], served["waitingForAnswer"]) == ("RUNNING", True)
    assert served["waitingSince"].endswith("Z")
    assert served["currentPause"] | {"createdAt": None} == {
        "clarifyId": "c1", "nodeId": "node-2", "question": "Which version?", "choices": ["v1.0", "v2.0"],
        "createdAt": None,
    }
    [item] = [i for i in (await get(api, "/api/v1/runs", status="WAITING"))["items"] if i["runId"] == run_id]
    assert (item["status"], item["waitingForAnswer"], item["waitingSince"]) == ("RUNNING", True, served["waitingSince"])


async def test_the_WAITING_filter_lists_only_waiting_runs_and_an_answer_or_a_cancel_ends_the_wait(api):
    since = datetime.now(UTC).isoformat()
    answered, cancelled, waiting, running = [await created_and_started(api) for _ in range(4)]
    for run_id in (answered, cancelled, waiting):
        await paused(api, run_id)
    await (await api.services.runs.writer(UUID(answered))).decide(
        partial(decide.answer_clarify, clarify_id="c1", answer="v2.0"))
    await (await api.services.runs.writer(UUID(cancelled))).decide(decide.request_cancel)
    only_waiting = await get(api, "/api/v1/runs", createdAfter=since, status="WAITING")
    assert [i["runId"] for i in only_waiting["items"]] == [waiting]
    both = await get(api, RUNS, createdAfter=since, status=["WAITING", "CREATED"])
    assert [i["runId"] for i in both["items"]] == [waiting]
    every_running = await get(api, "/api/v1/runs", createdAfter=since, status="RUNNING")
    assert {i["runId"]: i["waitingForAnswer"] for i in every_running["items"]} == {
        running: False, waiting: True, cancelled: False, answered: False,
    }
