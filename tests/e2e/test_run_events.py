"""GET /api/v1/runs/{runId}/events: a run's stored events as JSON Lines, on both stores."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from engine.store import STORED_EVENT_TYPES
from engine.store.mapper import MsgspecMapper
from tests.support.runs import run_with_steps

pytestmark = pytest.mark.store
MAPPER = MsgspecMapper(STORED_EVENT_TYPES)


def decoded_lines(body: bytes) -> list:
    return [MAPPER.decode_state(line) for line in body.splitlines()]


async def test_the_events_of_a_run_are_its_stored_events_one_json_line_each_in_position_order(server):
    run_id = await run_with_steps(server.services, 1200)
    async with server.client() as client:
        answer = await client.get(f"/api/v1/runs/{run_id.hex}/events")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
    assert decoded_lines(answer.content) == await server.services.runs.events(run_id)
    lines = [msgspec.json.decode(line) for line in answer.content.splitlines()]
    assert [line["originator_version"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["type"] == "RunCreated" and lines[-1]["type"] == "RunCompleted"


async def test_a_long_export_is_not_cut_by_the_store_deadline_of_its_request(server):
    run_id = await run_with_steps(server.services, 600)
    store = server.services.store
    read_lines = store._read_lines
    store_seconds = server.settings.store.request_timeout_seconds

    async def a_slow_second_page(stream_id, after, limit):
        if after > 0:
            await asyncio.sleep(store_seconds + 0.3)  # past the request's deadline, which bounds only its first answer
        return await read_lines(stream_id, after, limit)

    store._read_lines = a_slow_second_page
    try:
        async with server.client() as client:
            answer = await client.get(f"/api/v1/runs/{run_id.hex}/events")
    finally:
        del store._read_lines
    assert answer.status_code == 200
    assert decoded_lines(answer.content) == await server.services.runs.events(run_id)


async def test_after_n_answers_only_the_events_past_position_n(server):
    run_id = await run_with_steps(server.services, 10)
    async with server.client() as client:
        answer = await client.get(f"/api/v1/runs/{run_id.hex}/events", params={"after": 5})
        beyond = await client.get(f"/api/v1/runs/{run_id.hex}/events", params={"after": 10_000})
    assert decoded_lines(answer.content) == await server.services.runs.events(run_id, after=5)
    assert beyond.status_code == 200 and beyond.content == b""


@pytest.mark.parametrize("after", ["-1", "x", "1.5", "9" * 20])
async def test_an_after_that_is_not_a_position_is_refused_with_VALIDATION_FAILED(server, after):
    run_id = await run_with_steps(server.services, 1)
    async with server.client() as client:
        answer = await client.get(f"/api/v1/runs/{run_id.hex}/events", params={"after": after})
    assert answer.status_code == 400 and answer.json()["code"] == "VALIDATION_FAILED"


async def test_an_unknown_run_or_one_the_key_may_not_see_is_RUN_NOT_FOUND(server):
    run_id = await run_with_steps(server.services, 1)
    async with server.client() as client:
        unknown = await client.get(f"/api/v1/runs/{'0' * 32}/events")
    async with server.client(key="test-key-scoped") as scoped:
        hidden = await scoped.get(f"/api/v1/runs/{run_id.hex}/events")
    assert unknown.status_code == hidden.status_code == 404
    assert unknown.json() == hidden.json() == {"code": "RUN_NOT_FOUND", "message": "run not found", "data": None}


async def test_the_events_need_a_key(server):
    run_id = await run_with_steps(server.services, 1)
    async with server.client(key=None) as client:
        answer = await client.get(f"/api/v1/runs/{run_id.hex}/events")
    assert answer.status_code == 401 and answer.json()["code"] == "UNAUTHORIZED"
