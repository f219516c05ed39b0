"""A stream resumed on any replica delivers every event after its Last-Event-ID up to the terminal one, whichever
replica executes the run, and ends only after the terminal event (or with the reconnect hint when its replica stops).

Two and three `flowtrail serve` processes on one PostgreSQL schema run a paced workflow of about 310 events; for each
run a client reads a random number of messages on one replica, then resumes on another with Last-Event-ID, again and
again while the run executes; in the last test the replica executing the run is restarted meanwhile. The seed of the
random hops is printed, so a failure can be replayed.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import httpx

from tests.support.hopping_sse import Hopper
from tests.support.process import ServerProcess
from tests.support.replicas import paced_flow, replicas, runs_active, start_run, stream_path
from tests.support.sse import read_stream

FLOW = "hops-flow"
STEPS_PER_NODE = 100
RUN_BOUND_SECONDS = 90
"""A bound, not a figure: a run takes about 8 s at this pace on a quiet machine."""


def flows_dir(tmp_path: Path) -> str:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / f"{FLOW}.json").write_text(json.dumps(paced_flow(FLOW, "Hops", STEPS_PER_NODE)), encoding="utf-8")
    return str(folder)


async def assert_exact(client: httpx.AsyncClient, hopper: Hopper) -> None:
    """Every connection answered 200 and ended at the terminal event, by a hop, or (a replica stopping) with the
    reconnect hint or a cut; together they delivered the run's whole stream once, in order."""
    assert not hopper.endings("refused"), hopper.endings("refused")
    assert not hopper.endings("clean end without the terminal event"), hopper.connections
    assert hopper.finished
    whole = await read_stream(client, hopper.path)
    assert whole.ended and hopper.ids == whole.ids


def clients_of(servers: list[ServerProcess]) -> list[httpx.AsyncClient]:
    return [server.client() for server in servers]


async def hop_through(servers: list[ServerProcess], runs: int, seed: int) -> list[Hopper]:
    """Start `runs` runs and follow each by hopping over the servers until every run ended."""
    clients = clients_of(servers)
    try:
        run_ids = [await start_run(clients[i % len(clients)], FLOW) for i in range(runs)]
        hoppers = [Hopper(clients, stream_path(FLOW, run_id), random.Random(seed + i)) for i, run_id in enumerate(run_ids)]
        await asyncio.wait_for(asyncio.gather(*(h.follow() for h in hoppers)), RUN_BOUND_SECONDS)
        for hopper in hoppers:
            await assert_exact(clients[0], hopper)
        return hoppers
    finally:
        for client in clients:
            await client.aclose()


async def test_a_stream_hopping_between_two_replicas_at_random_positions_gets_every_event_once(postgres, tmp_path):
    seed = random.randrange(1 << 30)
    print(f"\nseed {seed}")
    async with replicas(postgres, tmp_path, 2, FLOWTRAIL_WORKFLOWS_DIR=flows_dir(tmp_path)) as servers:
        hoppers = await hop_through(servers, 3, seed)
    print(f"{sum(len(h.connections) for h in hoppers)} connections, every one answered 200, none ended early")


async def test_a_stream_hopping_between_three_replicas_at_random_positions_gets_every_event_once(postgres, tmp_path):
    seed = random.randrange(1 << 30)
    print(f"\nseed {seed}")
    async with replicas(postgres, tmp_path, 3, FLOWTRAIL_WORKFLOWS_DIR=flows_dir(tmp_path)) as servers:
        hoppers = await hop_through(servers, 3, seed)
    print(f"{sum(len(h.connections) for h in hoppers)} connections, every one answered 200, none ended early")


async def executing(servers: list[ServerProcess]) -> ServerProcess:
    """The replica that executes the (one) run now."""
    for _ in range(200):
        for server in servers:
            if await runs_active(server):
                return server
        await asyncio.sleep(0.05)
    raise AssertionError("no replica executes the run")


async def test_a_stream_hopping_between_three_replicas_stays_exact_while_the_executing_replica_restarts(
        postgres, tmp_path):
    seed = random.randrange(1 << 30)
    print(f"\nseed {seed}")
    async with replicas(postgres, tmp_path, 3, FLOWTRAIL_WORKFLOWS_DIR=flows_dir(tmp_path)) as servers:
        clients = clients_of(servers)
        try:
            run_id = await start_run(clients[0], FLOW)
            hopper = Hopper(clients, stream_path(FLOW, run_id), random.Random(seed), take=(5, 40))
            following = asyncio.create_task(hopper.follow())
            midway = asyncio.create_task(hopper.got.wait())
            await asyncio.wait({following, midway}, timeout=RUN_BOUND_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            midway.cancel()
            first = await executing(servers)
            await first.stop()
            await first.start()
            await asyncio.wait_for(following, RUN_BOUND_SECONDS)
            await assert_exact(clients[servers.index(first) - 1], hopper)
        finally:
            for client in clients:
                await client.aclose()
    ended = [c.ending for c in hopper.connections]
    print(f"{len(ended)} connections while replica {servers.index(first)} restarted: "
          f"{ {kind: ended.count(kind) for kind in sorted(set(ended))} }")
