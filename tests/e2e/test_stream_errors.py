"""Bad stream requests get the documented error envelope and append nothing."""

from __future__ import annotations

import uuid

import pytest

from api.errors import ApiError
from api.sse import encode_frame
from api.streams import resume_cursor
from engine.runs.hot import HotRun
from tests.support.api import log_end
from tests.support.runs import OTHER_FLOW, new_run, run_with_steps


async def get_stream(server, path, *, key="test-key-all", headers=None):
    async with server.client(key=key) as client:
        return await client.get(path, headers=headers or {})


@pytest.fixture
async def finished_run(server):
    return await run_with_steps(server.services, 5)


async def test_a_request_without_an_api_key_is_unauthorized(server, finished_run):
    before = await log_end(server.services)
    response = await get_stream(server, f"/api/v1/workflows/allowed-flow/runs/{finished_run.hex}/stream", key=None)
    assert response.status_code == 401
    assert response.json() == {"code": "UNAUTHORIZED", "message": "missing X-API-Key header", "data": None}
    assert await log_end(server.services) == before


async def test_an_api_key_in_the_query_string_is_not_accepted(server, finished_run):
    path = f"/api/v1/workflows/allowed-flow/runs/{finished_run.hex}/stream?X-API-Key=test-key-all"
    response = await get_stream(server, path, key=None)
    assert response.status_code == 401


async def test_a_wrong_api_key_is_unauthorized(server, finished_run):
    response = await get_stream(server, f"/api/v1/workflows/allowed-flow/runs/{finished_run.hex}/stream", key="nope")
    assert response.status_code == 401
    assert response.json()["code"] == "UNAUTHORIZED"


async def test_an_unknown_run_is_not_found(server):
    response = await get_stream(server, f"/api/v1/workflows/allowed-flow/runs/{uuid.uuid4().hex}/stream")
    assert response.status_code == 404
    assert response.json() == {"code": "RUN_NOT_FOUND", "message": "run not found", "data": None}


async def test_a_run_of_a_workflow_outside_the_keys_scope_looks_like_it_does_not_exist(server):
    run_id = await new_run(server.services, OTHER_FLOW)
    response = await get_stream(server, f"/api/v1/workflows/other-flow/runs/{run_id.hex}/stream", key="test-key-scoped")
    assert response.status_code == 404
    assert response.json()["code"] == "RUN_NOT_FOUND"


async def test_a_run_addressed_under_another_workflow_is_not_found(server, finished_run):
    response = await get_stream(server, f"/api/v1/workflows/other-flow/runs/{finished_run.hex}/stream")
    assert response.status_code == 404
    assert response.json()["code"] == "RUN_NOT_FOUND"


async def test_a_run_may_be_addressed_by_its_numeric_workflow_id(server, finished_run):
    response = await get_stream(server, f"/api/v1/workflows/7/runs/{finished_run.hex}/stream")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"


async def test_a_malformed_run_id_is_a_validation_error(server):
    response = await get_stream(server, "/api/v1/workflows/allowed-flow/runs/not-a-run/stream")
    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_FAILED"


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "9" * 40])
async def test_a_last_event_id_that_is_not_a_position_is_a_validation_error(server, finished_run, value):
    before = await log_end(server.services)
    response = await get_stream(
        server, f"/api/v1/workflows/allowed-flow/runs/{finished_run.hex}/stream", headers={"Last-Event-ID": value}
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "VALIDATION_FAILED" and "Last-Event-ID" in body["message"] and body["data"] is None
    assert await log_end(server.services) == before


async def test_a_last_event_id_beyond_the_runs_last_event_is_a_validation_error(server, finished_run):
    response = await get_stream(
        server, f"/api/v1/workflows/allowed-flow/runs/{finished_run.hex}/stream", headers={"Last-Event-ID": "999"}
    )
    assert response.status_code == 400
    assert "beyond the run's last event" in response.json()["message"]


async def test_an_unknown_route_answers_in_the_envelope(server):
    response = await get_stream(server, "/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["data"] is None


async def test_a_last_event_id_beyond_what_a_loading_run_knows_is_checked_against_the_log(server, finished_run):
    services = server.services
    last = await services.store.last_position(finished_run)
    loading = HotRun(finished_run, max_frames=100, encode_frame=encode_frame)
    loading.store_last = last - 3
    assert await resume_cursor(services.runs, loading, str(last - 1)) == last - 1
    with pytest.raises(ApiError) as beyond:
        await resume_cursor(services.runs, loading, str(last + 1))
    assert beyond.value.code == "VALIDATION_FAILED"


async def test_a_last_event_id_beyond_what_a_loaded_run_has_applied_is_checked_against_the_log_and_caught_up(
        server, finished_run):
    services = server.services
    events = await services.runs.events(finished_run)
    trailing = HotRun(finished_run, max_frames=100, encode_frame=encode_frame)
    trailing.offer(events[:-3])
    trailing.complete = True  # loaded, but the live tail has not brought the last three events yet
    assert await resume_cursor(services.runs, trailing, str(events[-2].originator_version)) == events[-2].originator_version
    assert trailing.version == events[-1].originator_version and trailing.terminal_id == trailing.version
    with pytest.raises(ApiError) as beyond:
        await resume_cursor(services.runs, trailing, str(trailing.version + 1))
    assert beyond.value.code == "VALIDATION_FAILED"
