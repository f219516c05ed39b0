"""The seed `external-workflow-api.zh.md`, walked end to end over real HTTP on both stores.

Every endpoint, every example field and every error row of the seed has a test here;
runs progress through a hand-driven engine so each step is exact.
"""

from __future__ import annotations

import io
import re
import zipfile
from uuid import UUID

import pytest

from tests.support.api import (
    DEMO_KEY,
    ask,
    complete_visit,
    confirm_cancel,
    fail,
    finish,
    log_end,
    open_visit,
    stream,
)
from tests.support.sse import read_stream

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")
ISO_LOCAL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?$")
BASE = "/api/v1/workflows/military-analyze-agent/runs"
SEED_BODY = {
    "variables": {
        "topic": "大语言模型在企业中的应用",
        "maxTokens": 2048,
        "options": {"lang": "zh", "verbose": False},
    },
    "async": True,
    "ttlHours": 720,
}


async def create(client, body=SEED_BODY, workflow="military-analyze-agent") -> str:
    response = await client.post(f"/api/v1/workflows/{workflow}/runs", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]["runId"]


async def started(client) -> str:
    run_id = await create(client)
    assert (await client.post(f"{BASE}/{run_id}/start")).status_code == 200
    return run_id


def error_of(response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "data"}
    assert body["code"] == code and body["data"] is None and body["message"]
    assert "Traceback" not in body["message"] and "SELECT" not in body["message"]
    return body["message"]


# --- the workflow list ------------------------------------------------------------------


async def test_the_workflow_list_names_id_name_display_name_description_inputs_and_outputs(client):
    response = await client.get("/api/v1/workflows")
    assert response.status_code == 200
    body = response.json()
    assert body["code"] == "OK" and body["message"] == ""
    first = body["data"][0]
    assert first == {
        "workflowId": 1,
        "workflowName": "military-analyze-agent",
        "displayName": "军事分析助手",
        "description": "分析一个主题并写出报告",
        "version": 1,
        "inputs": [
            {"name": "topic", "type": "string", "required": True, "description": "主题"},
            {"name": "maxTokens", "type": "number", "required": False, "description": ""},
        ],
        "outputs": [{"name": "summary", "type": "string", "description": "摘要"}],
    }
    assert [w["workflowName"] for w in body["data"]] == ["military-analyze-agent", "report-pipeline"]


# --- creating a run ---------------------------------------------------------------------


async def test_creating_a_run_from_json_answers_the_seeds_fields_and_links(api, client):
    response = await client.post(f"{BASE}", json=SEED_BODY)
    assert response.status_code == 201
    body = response.json()
    assert body["code"] == "OK" and body["message"] == ""
    data = body["data"]
    run_id = data["runId"]
    assert re.fullmatch(r"[0-9a-f]{32}", run_id)
    assert set(data) == {"runId", "workflowId", "workflowName", "displayName", "status", "createdAt", "links"}
    assert (data["workflowId"], data["workflowName"], data["displayName"], data["status"]) == (
        1, "military-analyze-agent", "军事分析助手", "CREATED")
    assert ISO_UTC.match(data["createdAt"])
    assert data["links"] == {
        "start": f"/api/v1/workflows/military-analyze-agent/runs/{run_id}/start",
        "stream": f"/api/v1/workflows/military-analyze-agent/runs/{run_id}/stream",
        "result": f"/api/v1/workflows/military-analyze-agent/runs/{run_id}",
        "workspace": f"/api/v1/workflows/military-analyze-agent/runs/{run_id}/workspace",
    }
    created = (await api.services.runs.events(UUID(run_id)))[0]
    assert created.variables == SEED_BODY["variables"] and created.ttl_hours == 720
    assert created.caller_key_id == "demo" and created.workflow_version == 1


async def test_async_and_ttl_hours_default_to_true_and_720(api, client):
    run_id = await create(client, {"variables": {"topic": "x"}})
    created = (await api.services.runs.events(UUID(run_id)))[0]
    assert created.ttl_hours == 720 and UUID(run_id) not in api.services.engine.started


async def test_an_empty_body_creates_a_run_with_every_default(api, client):
    response = await client.post("/api/v1/workflows/report-pipeline/runs")
    assert response.status_code == 201
    created = (await api.services.runs.events(UUID(response.json()["data"]["runId"])))[0]
    assert created.variables == {} and created.ttl_hours == 720


async def test_a_workflow_is_found_by_its_numeric_id_and_links_still_use_its_name(client):
    response = await client.post("/api/v1/workflows/1/runs", json={"variables": {"topic": "tides"}})
    data = response.json()["data"]
    assert data["workflowName"] == "military-analyze-agent"
    assert data["links"]["result"] == f"/api/v1/workflows/military-analyze-agent/runs/{data['runId']}"
    assert (await client.get(f"/api/v1/workflows/1/runs/{data['runId']}")).status_code == 200


async def test_ttl_hours_is_kept_with_the_run(api, client):
    run_id = await create(client, {"variables": {"topic": "tides"}, "ttlHours": 24})
    assert (await api.services.runs.events(UUID(run_id)))[0].ttl_hours == 24


# --- starting ---------------------------------------------------------------------------


async def test_starting_a_created_run_answers_running_and_a_second_start_is_run_already_started(api, client):
    run_id = await create(client)
    response = await client.post(f"{BASE}/{run_id}/start")
    assert response.status_code == 200
    data = response.json()["data"]
    assert (data["runId"], data["status"], data["workflowName"]) == (run_id, "RUNNING", "military-analyze-agent")
    assert ISO_UTC.match(data["startedAt"])
    before = await log_end(api.services)
    error_of(await client.post(f"{BASE}/{run_id}/start"), 409, "RUN_ALREADY_STARTED")
    assert await log_end(api.services) == before


async def test_starting_a_finished_run_is_still_run_already_started(api, client):
    run_id = await started(client)
    await finish(api.services, UUID(run_id))
    error_of(await client.post(f"{BASE}/{run_id}/start"), 409, "RUN_ALREADY_STARTED")


async def test_starting_a_run_cancelled_before_it_started_is_run_already_finished(api, client):
    run_id = await create(client)
    cancel = (await client.post(f"{BASE}/{run_id}/cancel")).json()["data"]
    assert (cancel["status"], cancel["cancelRequested"], cancel["cancelled"]) == ("CREATED", True, False)
    read = (await client.get(f"{BASE}/{run_id}")).json()["data"]
    assert (read["status"], read["startedAt"], read["cancelRequested"]) == ("CREATED", None, True)
    assert (await client.get(f"/api/v1/runs/{run_id}/state")).json()["data"]["status"] == "CREATED"
    error_of(await client.post(f"{BASE}/{run_id}/start"), 410, "RUN_ALREADY_FINISHED")
    await confirm_cancel(api.services, UUID(run_id))
    error_of(await client.post(f"{BASE}/{run_id}/start"), 410, "RUN_ALREADY_FINISHED")


# --- the stream -------------------------------------------------------------------------


async def test_the_stream_carries_the_seeds_events_with_running_node_type_and_label(api, client):
    run_id = await started(client)
    services, rid = api.services, UUID(run_id)
    visit = await open_visit(services, rid)
    await stream(services, rid, visit, "thinking", "首先我需要搜索相关资料...")
    await complete_visit(services, rid, visit)
    await finish(services, rid)
    got = await read_stream(client, f"{BASE}/{run_id}/stream")
    assert got.ended
    assert got.events == ["node_status", "node_stream", "node_status", "visit_recorded", "workflow_complete"]
    running, chunk, done, recorded, complete = got.data
    assert running == {"runId": run_id, "type": "node_status", "nodeId": "node-2", "visitUuid": visit,
                       "status": "RUNNING", "nodeType": "agent", "nodeLabel": "研究助手"}
    assert chunk == {"runId": run_id, "type": "node_stream", "nodeId": "node-2", "visitUuid": visit,
                     "kind": "thinking", "content": "首先我需要搜索相关资料...", "toolName": None}
    assert done["status"] == "SUCCESS" and done["output"] == {"status": 200, "message": "调用成功", "data": {"research": "..."}}
    assert {"logs", "contextSnapshot", "error"} <= set(done)
    assert recorded["visit"]["visitUuid"] == visit and "logsJson" in recorded["visit"]
    assert complete["success"] is True and complete["output"]["data"] == {"summary": "本报告探讨了..."}
    assert "workingDirFiles" in complete
    assert got.ids == sorted(got.ids)


async def test_the_stream_answers_as_server_sent_events_without_proxy_buffering(api, client):
    run_id = await started(client)
    await fail(api.services, UUID(run_id), "boom")
    async with client.stream("GET", f"{BASE}/{run_id}/stream", headers={"Accept": "text/event-stream"}) as response:
        text = (await response.aread()).decode()
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    assert "event: workflow_error" in text and '"success":false' in text


# --- the result -------------------------------------------------------------------------


async def test_the_result_of_a_finished_run_has_exactly_the_seeds_shape(api, client):
    run_id = await started(client)
    services, rid = api.services, UUID(run_id)
    visit = await open_visit(services, rid)
    for _ in range(3):
        await stream(services, rid, visit, "tool_call", '{"q":"x"}', tool_name="search")
    await complete_visit(services, rid, visit)
    await finish(services, rid)
    response = await client.get(f"{BASE}/{run_id}")
    assert response.status_code == 200
    data = response.json()["data"]
    seed_fields = {"runId", "workflowId", "workflowName", "displayName", "status", "startedAt", "completedAt",
                   "error", "outputs", "nodes", "workspace"}
    assert set(data) == seed_fields | {"createdAt", "cancelRequested", "cancelled", "usage", "errorCode",
                                       "waitingForAnswer", "waitingSince", "currentPause", "chain"}
    assert data["usage"] == {"promptTokens": 0, "completionTokens": 0}
    assert set(data["chain"]) == {"position", "link"} and len(data["chain"]["link"]) == 64
    assert (data["runId"], data["workflowId"], data["workflowName"], data["displayName"]) == (
        run_id, 1, "military-analyze-agent", "军事分析助手")
    assert data["status"] == "SUCCESS" and data["error"] is None
    assert ISO_UTC.match(data["startedAt"]) and ISO_UTC.match(data["completedAt"])
    assert data["outputs"] == {"status": 200, "message": "工作流执行成功", "data": {"summary": "本报告探讨了..."}}
    assert data["nodes"] == [{
        "nodeId": "node-2",
        "nodeType": "agent",
        "label": "研究助手",
        "status": "SUCCESS",
        "output": {"status": 200, "message": "调用成功", "data": {"research": "..."}},
        "error": None,
        "logsCount": 3,
        "logsUrl": f"/api/v1/workflows/military-analyze-agent/runs/{run_id}/nodes/node-2/logs",
    }]
    assert data["workspace"] == {
        "fileCount": 0, "totalBytes": 0,
        "downloadUrl": f"/api/v1/workflows/military-analyze-agent/runs/{run_id}/workspace",
    }
    assert (data["cancelRequested"], data["cancelled"]) == (False, False)


async def test_a_created_run_reads_created_with_no_times_and_no_nodes(client):
    run_id = await create(client)
    data = (await client.get(f"{BASE}/{run_id}")).json()["data"]
    assert data["status"] == "CREATED" and data["startedAt"] is None and data["completedAt"] is None
    assert data["nodes"] == [] and data["outputs"] is None


async def test_a_failed_run_reads_failed_with_its_error(api, client):
    run_id = await started(client)
    await fail(api.services, UUID(run_id), "node-2 timed out")
    data = (await client.get(f"{BASE}/{run_id}")).json()["data"]
    assert (data["status"], data["error"]) == ("FAILED", "node-2 timed out")
    assert ISO_UTC.match(data["completedAt"])


# --- node logs --------------------------------------------------------------------------


async def test_node_logs_are_type_message_detail_timestamp_with_thinking_coalesced(api, client):
    run_id = await started(client)
    services, rid = api.services, UUID(run_id)
    visit = await open_visit(services, rid)
    await stream(services, rid, visit, "thinking", "首先")
    await stream(services, rid, visit, "thinking", "搜索")
    await stream(services, rid, visit, "tool_call", '{"q":"LLM"}', tool_name="search")
    await stream(services, rid, visit, "tool_result", "3 results", tool_name="search")
    await stream(services, rid, visit, "status", "压缩上下文中")
    await stream(services, rid, visit, "step", '{"iteration":1,"prev_tools":[]}')
    await stream(services, rid, visit, "tool_progress", '{"event_type":"x","name":"search","preview":null}', tool_name="search")
    await stream(services, rid, visit, "todo_update", '[{"task":"a"}]', tool_name="todo")
    await ask(services, rid, visit, "clar-1", "哪个版本?", ("v1", "v2"))
    response = await client.get(f"{BASE}/{run_id}/nodes/node-2/logs")
    assert response.status_code == 200
    logs = response.json()["data"]
    assert [entry["type"] for entry in logs] == [
        "THINKING", "TOOL_CALL", "TOOL_RESULT", "STATUS", "STEP", "TOOL_PROGRESS", "TODO_UPDATE", "CLARIFY_REQUEST"]
    assert all(set(entry) == {"type", "message", "detail", "timestamp"} for entry in logs)
    assert logs[0]["message"] == "首先搜索"
    assert logs[1]["message"] == "search" and logs[1]["detail"] == '{"q":"LLM"}'
    assert all(ISO_UTC.match(entry["timestamp"]) for entry in logs)


async def test_a_failed_visit_logs_an_error_entry(api, client):
    from domain import run as decide

    run_id = await started(client)
    services, rid = api.services, UUID(run_id)
    visit = await open_visit(services, rid)
    writer = await services.runs.writer(rid)
    await writer.decide(lambda run, at: decide.fail_visit(run, at, visit_uuid=visit, node_id="node-2", error="quota"))
    logs = (await client.get(f"{BASE}/{run_id}/nodes/node-2/logs")).json()["data"]
    assert logs[-1]["type"] == "ERROR" and logs[-1]["message"] == "quota"


async def test_a_node_of_the_workflow_not_visited_yet_has_no_logs_and_an_unknown_node_is_not_found(api, client):
    run_id = await started(client)
    assert (await client.get(f"{BASE}/{run_id}/nodes/node-3/logs")).json()["data"] == []
    error_of(await client.get(f"{BASE}/{run_id}/nodes/no-such-node/logs"), 404, "NODE_NOT_FOUND")


# --- the workspace ----------------------------------------------------------------------


async def test_the_workspace_downloads_as_a_zip_not_wrapped_in_the_envelope(api, client):
    run_id = await create(client)
    base = api.services.workspace.path_for(UUID(run_id))
    (base / "out").mkdir(parents=True)
    (base / "out" / "report.md").write_text("# 报告", encoding="utf-8")
    (base / "big.bin").write_bytes(bytes(range(256)) * 8192)
    response = await client.get(f"{BASE}/{run_id}/workspace")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert f'{run_id}.zip"' in response.headers["content-disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert archive.namelist() == ["big.bin", "out/report.md"]
    assert archive.read("out/report.md").decode() == "# 报告"
    assert archive.read("big.bin") == bytes(range(256)) * 8192
    data = (await client.get(f"{BASE}/{run_id}")).json()["data"]["workspace"]
    assert (data["fileCount"], data["totalBytes"]) == (2, len("# 报告".encode()) + 256 * 8192)


async def test_an_empty_workspace_is_an_empty_zip(client):
    run_id = await create(client)
    response = await client.get(f"{BASE}/{run_id}/workspace")
    assert zipfile.ZipFile(io.BytesIO(response.content)).namelist() == []


# --- AskFor: resume and state -----------------------------------------------------------


async def asked(api, client) -> tuple[str, str]:
    run_id = await started(client)
    visit = await open_visit(api.services, UUID(run_id))
    await ask(api.services, UUID(run_id), visit, "clar-5678", "选择版本", ("v1.0", "v2.0"))
    return run_id, visit


async def test_state_restores_the_pause_with_choices_as_an_array_and_a_local_date_time(api, client):
    run_id, _ = await asked(api, client)
    response = await client.get(f"/api/v1/runs/{run_id}/state")
    assert response.status_code == 200
    data = response.json()["data"]
    assert set(data) == {"runId", "status", "currentPause"}
    assert (data["runId"], data["status"]) == (run_id, "RUNNING")
    pause = data["currentPause"]
    assert set(pause) == {"clarifyId", "nodeId", "question", "choices", "createdAt"}
    assert (pause["clarifyId"], pause["nodeId"], pause["question"], pause["choices"]) == (
        "clar-5678", "node-2", "选择版本", ["v1.0", "v2.0"])
    assert ISO_LOCAL.match(pause["createdAt"])


async def test_state_of_a_run_with_no_pause_has_a_null_current_pause(client):
    run_id = await create(client)
    assert (await client.get(f"/api/v1/runs/{run_id}/state")).json()["data"] == {
        "runId": run_id, "status": "CREATED", "currentPause": None}


async def test_resume_answers_accepted_run_id_and_clarify_id_and_clears_the_pause(api, client):
    run_id, _ = await asked(api, client)
    response = await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": "clar-5678", "answer": "v2.0"})
    assert response.status_code == 200
    assert response.json() == {"code": "OK", "message": "",
                               "data": {"accepted": True, "runId": run_id, "clarifyId": "clar-5678"}}
    answered = (await api.services.runs.events(UUID(run_id)))[-1]
    assert (answered.clarify_id, answered.answer) == ("clar-5678", "v2.0")
    assert (await client.get(f"/api/v1/runs/{run_id}/state")).json()["data"]["currentPause"] is None


async def test_a_repeated_answer_is_clarify_already_answered_409_and_appends_nothing(api, client):
    run_id, _ = await asked(api, client)
    body = {"clarifyId": "clar-5678", "answer": "v2.0"}
    await client.post(f"/api/v1/runs/{run_id}/resume", json=body)
    before = await log_end(api.services)
    error_of(await client.post(f"/api/v1/runs/{run_id}/resume", json=body), 409, "CLARIFY_ALREADY_ANSWERED")
    error_of(await client.post(f"/api/v1/runs/{run_id}/resume", json={**body, "answer": "v1.0"}),
             409, "CLARIFY_ALREADY_ANSWERED")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("body", [
    None, b"", b"not json", b'{"clarifyId": "clar-5678"}', b'{"answer": "x"}', b'{"clarifyId": "", "answer": "x"}',
    b'{"clarifyId": 5, "answer": "x"}', b'{"clarifyId": "c", "answer": ""}', b'[]',
])
async def test_a_resume_without_a_valid_body_is_validation_failed(api, client, body):
    run_id, _ = await asked(api, client)
    before = await log_end(api.services)
    response = await client.post(f"/api/v1/runs/{run_id}/resume", content=body,
                                 headers={"Content-Type": "application/json"})
    error_of(response, 400, "VALIDATION_FAILED")
    assert await log_end(api.services) == before


async def test_a_resume_with_a_malformed_run_id_is_validation_failed(client):
    error_of(await client.post("/api/v1/runs/not-a-run/resume", json={"clarifyId": "c", "answer": "a"}),
             400, "VALIDATION_FAILED")


async def test_a_resume_of_an_unknown_run_is_run_not_found(client):
    error_of(await client.post(f"/api/v1/runs/{'0' * 32}/resume", json={"clarifyId": "c", "answer": "a"}),
             404, "RUN_NOT_FOUND")


async def test_a_resume_with_an_unknown_clarify_id_or_before_the_run_started_is_clarify_not_found(api, client):
    run_id, _ = await asked(api, client)
    error_of(await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": "clar-0", "answer": "a"}),
             404, "CLARIFY_NOT_FOUND")
    created = await create(client)
    error_of(await client.post(f"/api/v1/runs/{created}/resume", json={"clarifyId": "clar-5678", "answer": "a"}),
             404, "CLARIFY_NOT_FOUND")


async def test_a_repeated_answer_after_the_run_finished_is_still_clarify_already_answered(api, client):
    run_id, _ = await asked(api, client)
    body = {"clarifyId": "clar-5678", "answer": "v2.0"}
    await client.post(f"/api/v1/runs/{run_id}/resume", json=body)
    await fail(api.services, UUID(run_id), "stopped")
    error_of(await client.post(f"/api/v1/runs/{run_id}/resume", json=body), 409, "CLARIFY_ALREADY_ANSWERED")
    error_of(await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": "clar-0", "answer": "a"}),
             410, "RUN_ALREADY_FINISHED")


async def test_a_resume_of_a_finished_run_is_run_already_finished(api, client):
    run_id, _ = await asked(api, client)
    await fail(api.services, UUID(run_id), "stopped")
    before = await log_end(api.services)
    error_of(await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": "clar-5678", "answer": "a"}),
             410, "RUN_ALREADY_FINISHED")
    assert await log_end(api.services) == before


async def test_a_resume_once_a_cancel_was_requested_is_run_already_finished_and_appends_nothing(api, client):
    run_id, _ = await asked(api, client)
    await client.post(f"{BASE}/{run_id}/cancel")
    before = await log_end(api.services)
    response = await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": "clar-5678", "answer": "v2.0"})
    assert "being cancelled" in error_of(response, 410, "RUN_ALREADY_FINISHED")
    assert await log_end(api.services) == before


# --- cancel -----------------------------------------------------------------------------


async def test_cancel_is_requested_first_and_cancelled_only_once_the_engine_confirms(api, client):
    run_id = await started(client)
    response = await client.post(f"{BASE}/{run_id}/cancel")
    assert response.status_code == 200
    assert response.json()["data"] == {"runId": run_id, "outcome": "REQUESTED", "status": "RUNNING",
                                       "cancelRequested": True, "cancelled": False}
    data = (await client.get(f"{BASE}/{run_id}")).json()["data"]
    assert (data["status"], data["cancelRequested"], data["cancelled"]) == ("RUNNING", True, False)
    again = (await client.post(f"{BASE}/{run_id}/cancel")).json()["data"]
    assert again["outcome"] == "ALREADY_REQUESTED"
    await confirm_cancel(api.services, UUID(run_id))
    data = (await client.get(f"{BASE}/{run_id}")).json()["data"]
    assert (data["status"], data["cancelRequested"], data["cancelled"]) == ("FAILED", True, True)
    assert data["error"] == "run cancelled"


async def test_cancelling_a_finished_run_says_it_had_already_finished(api, client):
    run_id = await started(client)
    await finish(api.services, UUID(run_id))
    before = await log_end(api.services)
    data = (await client.post(f"{BASE}/{run_id}/cancel")).json()["data"]
    assert (data["outcome"], data["status"], data["cancelRequested"], data["cancelled"]) == (
        "ALREADY_FINISHED", "SUCCESS", False, False)
    assert await log_end(api.services) == before


# --- identity, envelope and errors ------------------------------------------------------


RUN_ENDPOINTS = [
    ("POST", "{base}/{run}/start"), ("GET", "{base}/{run}"), ("GET", "{base}/{run}/stream"),
    ("GET", "{base}/{run}/nodes/node-2/logs"), ("GET", "{base}/{run}/workspace"), ("POST", "{base}/{run}/cancel"),
    ("POST", "/api/v1/runs/{run}/resume"), ("GET", "/api/v1/runs/{run}/state"),
]
ALL_ENDPOINTS = [("GET", "/api/v1/workflows"), ("POST", "{base}")] + RUN_ENDPOINTS


@pytest.mark.parametrize("method,path", ALL_ENDPOINTS)
async def test_every_endpoint_refuses_a_missing_key_a_wrong_key_and_a_key_in_the_query(api, client, method, path):
    run_id = await create(client)
    url = path.format(base=BASE, run=run_id)
    before = await log_end(api.services)
    async with api.client(key=None) as anonymous:
        error_of(await anonymous.request(method, url, json={}), 401, "UNAUTHORIZED")
        error_of(await anonymous.request(method, url, params={"X-API-Key": DEMO_KEY}), 401, "UNAUTHORIZED")
    async with api.client(key="wrong-key") as wrong:
        error_of(await wrong.request(method, url, json={}), 401, "UNAUTHORIZED")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("method,path", RUN_ENDPOINTS)
async def test_every_run_endpoint_answers_validation_failed_for_a_malformed_run_id(api, client, method, path):
    error_of(await client.request(method, path.format(base=BASE, run="a3f9b2c1"), json={"clarifyId": "c", "answer": "a"}),
             400, "VALIDATION_FAILED")


@pytest.mark.parametrize("method,path", RUN_ENDPOINTS)
async def test_every_run_endpoint_answers_run_not_found_for_an_unknown_run(api, client, method, path):
    before = await log_end(api.services)
    error_of(await client.request(method, path.format(base=BASE, run="f" * 32), json={"clarifyId": "c", "answer": "a"}),
             404, "RUN_NOT_FOUND")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("method,path", [(m, p) for m, p in RUN_ENDPOINTS if p.startswith("{base}")])
async def test_a_run_addressed_under_another_workflow_is_run_not_found(api, client, method, path):
    run_id = await create(client)
    other = "/api/v1/workflows/report-pipeline/runs"
    error_of(await client.request(method, path.format(base=other, run=run_id)), 404, "RUN_NOT_FOUND")


@pytest.mark.parametrize("method,path", [("POST", "/api/v1/workflows/{w}/runs")])
@pytest.mark.parametrize("workflow", ["no-such-flow", "999", "Military-Analyze-Agent"])
async def test_an_unknown_workflow_is_workflow_not_found(api, client, method, path, workflow):
    before = await log_end(api.services)
    error_of(await client.request(method, path.format(w=workflow), json={}), 404, "WORKFLOW_NOT_FOUND")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("body,fragment", [
    (b"{", "not valid JSON"),
    (b'{"variables": []}', "$.variables"),
    (b'{"variables": null}', "$.variables"),
    (b'{"async": "yes"}', "$.async"),
    (b'{"ttlHours": 0}', "$.ttlHours"),
    (b'{"ttlHours": 1.5}', "$.ttlHours"),
    (b'{"ttlHours": 100000}', "$.ttlHours"),
    (b'{"ttl_hours": 5}', "ttl_hours"),
    (b'{"variables": {"uploadedFiles": ["/etc/passwd"]}}', "uploadedFiles"),
    (b'"just a string"', "object"),
])
async def test_a_malformed_creation_request_is_validation_failed_with_a_readable_message(api, client, body, fragment):
    before = await log_end(api.services)
    response = await client.post(BASE, content=body, headers={"Content-Type": "application/json"})
    assert fragment in error_of(response, 400, "VALIDATION_FAILED")
    assert await log_end(api.services) == before


async def test_a_creation_request_of_another_media_type_is_refused(api, client):
    before = await log_end(api.services)
    error_of(await client.post(BASE, content=b"topic=x", headers={"Content-Type": "text/plain"}),
             415, "UNSUPPORTED_MEDIA_TYPE")
    assert await log_end(api.services) == before


async def test_an_unexpected_failure_is_internal_error_without_details(api, client):
    class Broken:
        async def start(self, run_id):
            raise RuntimeError("SELECT secret FROM flowtrail_events")

    run_id = await create(client)
    api.services.engine = Broken()
    message = error_of(await client.post(f"{BASE}/{run_id}/start"), 500, "INTERNAL_ERROR")
    assert "secret" not in message


async def test_a_workflow_the_engine_finds_unsound_is_graph_invalid(api, client):
    from domain.errors import GraphInvalid

    class Refusing:
        async def start(self, run_id):
            raise GraphInvalid(["node 'node-2' has unknown type 'robot'"])

    run_id = await create(client)
    api.services.engine = Refusing()
    before = await log_end(api.services)
    assert "robot" in error_of(await client.post(f"{BASE}/{run_id}/start"), 400, "GRAPH_INVALID")
    assert await log_end(api.services) == before


async def test_cors_is_open_on_the_api_for_any_origin_and_header(client):
    response = await client.options(
        "/api/v1/workflows",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "X-API-Key, Last-Event-ID"},
    )
    assert response.status_code in (200, 204)
    assert response.headers["access-control-allow-origin"] == "*"
    assert "x-api-key" in response.headers["access-control-allow-headers"].lower()
    simple = await client.get("/api/v1/workflows", headers={"Origin": "https://app.example"})
    assert simple.headers["access-control-allow-origin"] == "*"


async def test_without_an_engine_start_is_engine_unavailable_and_appends_nothing(api, client):
    run_id = await create(client)
    api.services.engine = None
    before = await log_end(api.services)
    error_of(await client.post(f"{BASE}/{run_id}/start"), 503, "ENGINE_UNAVAILABLE")
    error_of(await client.post(BASE, json={"async": False}), 503, "ENGINE_UNAVAILABLE")
    assert await log_end(api.services) == before
