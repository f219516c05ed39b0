"""On PostgreSQL, the services of one process see what another process appends to a run they watch."""

from __future__ import annotations

import asyncio

import pytest

from api.sse import encode_frame
from engine.bootstrap import build_services
from projections.sse import render_all
from tests.support.runs import appending, new_run, open_visit
from tests.support.server import server_settings
from tests.support.stores import drop_schema, store_url


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
    watched = await ours_side.hot_runs.get(theirs)
    with watched.watch():
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
