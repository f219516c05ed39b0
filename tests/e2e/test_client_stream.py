"""The client's stream survives a network that cuts connections anywhere: every message once, in order.

A loopback proxy between the client and a real server cuts each connection after a random
number of bytes (the status line, the headers, mid-frame, between frames); the client resumes
with Last-Event-ID after each cut. Delays are shortened for the test; their order is the seed's.
"""

from __future__ import annotations

import asyncio

import pytest

from flowtrail_client import FlowtrailClient, Reconnection, RunHandle
from tests.fakes.cutting_proxy import CuttingProxy
from tests.support.runs import appending, new_run, open_visit, run_with_steps
from tests.support.sse import read_stream

pytestmark = pytest.mark.store
QUICK = Reconnection(delays=(0.01, 0.02, 0.04, 0.08, 0.16), poll_seconds=0.05)
RUN_PATH = "/api/v1/workflows/allowed-flow/runs/{}"


async def started_proxy(server, **options) -> CuttingProxy:
    proxy = CuttingProxy(server.settings.port, **options)
    await proxy.start()
    return proxy


async def every_message(server, run_id) -> list[tuple[int, str, dict]]:
    """The stream read in one go, straight from the server."""
    async with server.client() as http:
        got = await read_stream(http, RUN_PATH.format(run_id.hex) + "/stream")
    assert got.ended
    return list(zip(got.ids, got.events, got.data))


async def followed(url: str, run_id, reconnection: Reconnection = QUICK) -> list[tuple[int, str, dict]]:
    async with FlowtrailClient(url, "test-key-all", reconnection=reconnection) as client:
        return [(m.id, m.event, m.data) async for m in client.stream(RunHandle(run_id.hex, "allowed-flow"))]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_finished_run_followed_through_randomly_cut_connections_delivers_every_message_once_in_order(
    server, seed,
):
    run_id = await run_with_steps(server.services, 400)
    proxy = await started_proxy(server, seed=seed, longest=6000)
    try:
        got = await followed(proxy.url, run_id)
    finally:
        await proxy.stop()
    assert got == await every_message(server, run_id)
    assert proxy.cuts >= 5


async def test_a_live_run_followed_through_randomly_cut_connections_delivers_every_message_once_in_order(server):
    run_id = await new_run(server.services)
    writer = await server.services.runs.writer(run_id)
    visit = await open_visit(writer)
    proxy = await started_proxy(server, seed=7, longest=3000)
    try:
        writing = asyncio.create_task(appending(server.services, run_id, visit, rounds=5))
        got = await followed(proxy.url, run_id)
        await writing
    finally:
        await proxy.stop()
    assert got == await every_message(server, run_id)
    assert got[-1][1] == "workflow_complete" and proxy.cuts >= 1


async def test_after_five_failed_reconnects_the_client_polls_the_run_and_resumes_when_it_answers(server):
    run_id = await run_with_steps(server.services, 20)
    proxy = await started_proxy(server, seed=0, longest=None)
    proxy.refuse(6)
    try:
        got = await followed(proxy.url, run_id)
    finally:
        await proxy.stop()
    path = RUN_PATH.format(run_id.hex)
    assert proxy.opened_with[:7] == [f"GET {path}/stream HTTP/1.1"] * 6 + [f"GET {path} HTTP/1.1"]
    assert got == await every_message(server, run_id)


def test_the_client_backs_off_1_2_4_8_16_seconds_then_polls_every_30_seconds_by_default():
    assert Reconnection() == Reconnection(delays=(1.0, 2.0, 4.0, 8.0, 16.0), poll_seconds=30.0)
