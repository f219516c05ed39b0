"""On PostgreSQL, a client of one server process sees what another process appends."""

from __future__ import annotations

import asyncio

import pytest

from api.sse import encode_frame
from engine.bootstrap import build_services
from projections.sse import render_all
from tests.support.process import ServerProcess
from tests.support.runs import finish, new_run, open_visit, stream_steps
from tests.support.server import RunningServer, server_settings
from tests.support.sse import read_stream
from tests.support.stores import drop_schema, store_url


@pytest.fixture
async def shared_postgres(tmp_path):
    url, schema = store_url("postgres", tmp_path)
    writer_side = await RunningServer(server_settings(url, tmp_path / "a")).start()
    reader_side = await ServerProcess(url, tmp_path / "b").start()
    yield writer_side, reader_side
    await reader_side.stop()
    await writer_side.stop()
    drop_schema(schema)


def path(run_id) -> str:
    return f"/api/v1/workflows/allowed-flow/runs/{run_id.hex}/stream"


async def appending(services, run_id, visit, rounds: int) -> None:
    writer = await services.runs.writer(run_id)
    for i in range(rounds):
        await stream_steps(writer, visit, 100, start=i * 100)
        await asyncio.sleep(0.01)
    await finish(writer, visit)


async def test_a_client_of_another_process_follows_a_run_live_to_its_end(shared_postgres):
    writer_side, reader_side = shared_postgres
    services = writer_side.services
    run_id = await new_run(services)
    visit = await open_visit(await services.runs.writer(run_id))
    async with reader_side.client() as client:
        reading = asyncio.create_task(read_stream(client, path(run_id)))
        await asyncio.sleep(0.3)
        await appending(services, run_id, visit, rounds=20)
        got = await asyncio.wait_for(reading, 30)
    assert got.ended
    assert got.ids == [m.id for m in render_all(await services.runs.events(run_id))]


async def test_a_reconnect_to_a_second_process_while_the_first_keeps_appending_loses_nothing(shared_postgres):
    writer_side, reader_side = shared_postgres
    services = writer_side.services
    run_id = await new_run(services)
    visit = await open_visit(await services.runs.writer(run_id))
    producer = asyncio.create_task(appending(services, run_id, visit, rounds=30))
    async with writer_side.client() as first:
        before = await read_stream(first, path(run_id), stop_after=700)
    async with reader_side.client() as second:
        after = await read_stream(second, path(run_id), last_event_id=before.ids[-1])
    await producer
    assert after.ended
    assert before.ids + after.ids == [m.id for m in render_all(await services.runs.events(run_id))]


@pytest.fixture
async def two_services(tmp_path):
    url, schema = store_url("postgres", tmp_path)
    pair = [build_services(server_settings(url, tmp_path / side), encode_frame=encode_frame) for side in ("a", "b")]
    for services in pair:
        await services.start()
    yield pair
    for services in pair:
        await services.close()
    drop_schema(schema)


async def test_a_process_that_appends_itself_still_sees_every_event_another_process_appends(two_services):
    ours_side, theirs_side = two_services
    theirs = await new_run(theirs_side)
    their_visit = await open_visit(await theirs_side.runs.writer(theirs))
    watched = await ours_side.hub.get(theirs)
    watched.watchers += 1
    ours = await new_run(ours_side)
    our_visit = await open_visit(await ours_side.runs.writer(ours))
    await asyncio.gather(
        appending(ours_side, ours, our_visit, rounds=15),
        appending(theirs_side, theirs, their_visit, rounds=15),
    )
    expected = [m.id for m in render_all(await theirs_side.runs.events(theirs))]
    for _ in range(100):
        if watched.version == expected[-1]:
            break
        await asyncio.sleep(0.05)
    assert watched.ids == expected
    cursor, frames = 0, []
    while cursor < expected[-1]:
        batch, cursor = watched.frames_after(cursor)
        frames += batch
    assert len(frames) == len(expected)
