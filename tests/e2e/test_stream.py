"""The run stream over real HTTP: order, resume, errors, keep-alive, on both stores."""

from __future__ import annotations

import random

from projections.sse import render_all
from tests.support.runs import finish, new_run, open_visit, run_with_steps, stream_steps
from tests.support.sse import read_stream


def stream_path(run_id, workflow="allowed-flow") -> str:
    return f"/api/v1/workflows/{workflow}/runs/{run_id.hex}/stream"


async def expected_ids(server, run_id) -> list[int]:
    events = await server.services.runs.events(run_id)
    return [m.id for m in render_all(events)]


async def test_a_client_reads_every_event_of_a_finished_run_in_order_and_the_stream_ends(server):
    run_id = await run_with_steps(server.services, 50)
    async with server.client() as client:
        got = await read_stream(client, stream_path(run_id))
    assert got.ended
    assert got.ids == await expected_ids(server, run_id)
    assert got.events[0] == "node_status" and got.events[-1] == "workflow_complete"
    assert got.data[1] == {
        "runId": run_id.hex, "type": "node_stream", "nodeId": "research", "visitUuid": got.data[0]["visitUuid"],
        "kind": "step", "content": '{"iteration":0}', "toolName": None,
    }


async def test_resuming_with_last_event_id_sends_only_what_came_after(server):
    run_id = await run_with_steps(server.services, 20)
    ids = await expected_ids(server, run_id)
    async with server.client() as client:
        got = await read_stream(client, stream_path(run_id), last_event_id=ids[9])
    assert got.ids == ids[10:]


async def test_random_disconnects_while_the_run_appends_lose_and_repeat_nothing(server):
    services = server.services
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    rng = random.Random(7)
    seen: list[int] = []
    async with server.client() as client:
        for round_ in range(12):
            await stream_steps(writer, visit, 250, start=round_ * 250)
            got = await read_stream(client, stream_path(run_id), last_event_id=seen[-1] if seen else None,
                                    stop_after=rng.randint(1, 400))
            seen.extend(got.ids)
        await finish(writer, visit)
        got = await read_stream(client, stream_path(run_id), last_event_id=seen[-1])
        seen.extend(got.ids)
    assert got.ended
    assert seen == await expected_ids(server, run_id)
    assert len(seen) >= 3000


async def test_an_idle_stream_receives_keep_alive_comments(server):
    services = server.services
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    await open_visit(writer)
    lines = []
    async with server.client() as client:
        headers = {"Last-Event-ID": "3"}
        async with client.stream("GET", stream_path(run_id), headers=headers) as response:
            async for line in response.aiter_lines():
                lines.append(line)
                if line.startswith(":"):
                    break
    assert lines == [": keep-alive"]


async def test_a_reconnect_after_the_server_restarted_continues_from_the_store(store, tmp_path):
    from tests.support.server import RunningServer, server_settings

    settings = server_settings(store, tmp_path / "data")
    first = await RunningServer(settings).start()
    run_id = await run_with_steps(first.services, 300)
    async with first.client() as client:
        before = await read_stream(client, stream_path(run_id), stop_after=120)
    await first.stop()
    second = await RunningServer(server_settings(store, tmp_path / "data")).start()
    try:
        async with second.client() as client:
            after = await read_stream(client, stream_path(run_id), last_event_id=before.ids[-1])
        assert before.ids + after.ids == await expected_ids(second, run_id)
        assert after.ended
    finally:
        await second.stop()


async def test_a_reconnect_older_than_the_memory_buffer_is_served_from_the_store(store, tmp_path):
    from tests.support.server import RunningServer, server_settings

    server = await RunningServer(server_settings(store, tmp_path / "data", hot_buffer_messages=5000)).start()
    try:
        run_id = await run_with_steps(server.services, 7000)
        hot = await server.services.runs.hot(run_id)
        assert not hot.covers(10)
        async with server.client() as client:
            got = await read_stream(client, stream_path(run_id), last_event_id=10)
        assert got.ids == [i for i in await expected_ids(server, run_id) if i > 10]
    finally:
        await server.stop()


async def test_a_reader_that_falls_behind_the_memory_buffer_mid_stream_still_gets_every_event(store, tmp_path):
    import re

    from api.limits import StreamSlot
    from api.streams import OpenStream
    from tests.support.server import RunningServer, server_settings

    server = await RunningServer(server_settings(store, tmp_path / "data", hot_buffer_messages=5000)).start()
    try:
        services = server.services
        run_id = await new_run(services)
        writer = await services.runs.writer(run_id)
        visit = await open_visit(writer)
        await stream_steps(writer, visit, 100)
        hot = await services.runs.hot(run_id)
        opened = OpenStream(StreamSlot(lambda: None), services.settings.stream, services.keys, services.keys.keys[0])
        frames = opened.follow(services.runs, hot, 0)
        ids = [int(i) for i in re.findall(rb"id: (\d+)", (await anext(frames)).encode())]
        await stream_steps(writer, visit, 7000, start=100)
        await finish(writer, visit)
        assert not hot.covers(ids[-1])
        async for batch in frames:
            ids += [int(i) for i in re.findall(rb"id: (\d+)", batch.encode())]
        assert ids == await expected_ids(server, run_id)
    finally:
        await server.stop()
