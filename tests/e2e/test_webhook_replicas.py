"""Webhooks across replicas on PostgreSQL: a replica killed during an attempt leaves its delivery to another live
replica, which makes the next attempt under the same `webhook-id` once the dead one's heart-beat is overdue."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from tests.e2e.test_webhooks import LOOPBACK, deliveries, ended_run, receiving, verified
from tests.fakes.webhook_receiver import Reply, WebhookReceiver
from tests.support.killable import KillableServer
from tests.support.sockets import holder_of

HELD_SECONDS = 60.0
"""The first attempt is held this long by the receiver (far past the test): only the kill can end it."""


@contextlib.asynccontextmanager
async def two_replicas(postgres: str, tmp_path: Path) -> AsyncIterator[list[KillableServer]]:
    servers = [KillableServer(postgres, tmp_path / f"replica-{i}", **{**LOOPBACK, "FLOWTRAIL_WEBHOOKS_TIMEOUT_SECONDS": "120"})
               for i in range(2)]
    for server in servers:
        server.launch()
    try:
        await asyncio.gather(*(server.ready() for server in servers))
        yield servers
    finally:
        await asyncio.gather(*(server.stop() for server in servers), return_exceptions=True)


async def first_request(receiver: WebhookReceiver) -> int:
    """The source port of the first request, once it came."""
    while not receiver.received:
        await asyncio.sleep(0.02)
    return receiver.received[0].client_port


async def test_a_replica_killed_during_an_attempt_leaves_the_delivery_to_another_live_replica(postgres, tmp_path):
    async with receiving(Reply(200, delay=HELD_SECONDS)) as receiver, two_replicas(postgres, tmp_path) as servers:
        async with servers[0].client() as client:
            run_id = await ended_run(client, receiver.url())
        port = await asyncio.wait_for(first_request(receiver), 40)
        pids = {server.process.pid: server for server in servers if server.process is not None}
        holder = holder_of(port, list(pids))
        assert holder is not None, "the attempt's connection belongs to one of the replicas"
        pids[holder].kill()
        [survivor] = [server for pid, server in pids.items() if pid != holder]
        async with survivor.client() as client:
            [delivery] = await deliveries(client, run_id)
    assert (delivery["state"], delivery["lastStatusCode"]) == ("DELIVERED", 200)
    assert len(receiver.received) >= 2
    assert len({request.headers["webhook-id"] for request in receiver.received}) == 1
    for request in receiver.received:
        verified(request)
    assert "its replica stopped heart-beating; it runs again" in survivor.log()
