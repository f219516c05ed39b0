"""Live delivery on the replica that does not execute a run, and resuming there (issue 22): two replicas, one PostgreSQL.

`--runs` runs of a paced workflow (three scripted nodes of `--steps` status lines each, pace `--pace` s) start at
once on two `flowtrail serve` processes; the job queue spreads them, so each replica executes some runs and learns
of the others' events through its live tail. Every run is followed on both replicas at once by a raw SSE reader in
this process (one clock); for each event the figure is its arrival on the replica that does not execute the run
minus its arrival on the one that does (the executing replica is the one whose reader gets the events first).
A third reader per run follows it on the executing replica for `--resume-after` messages, then resumes on the other
with Last-Event-ID: the figures are how many such resumes were refused and the time from the resume to its first
message. `--burn N` keeps N busy loops running meanwhile: a busy machine.

    python -m bench.replica_delivery [--runs 12] [--steps 100] [--pace 0.02] [--burn 0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.figures import ms, percentile, print_table
from bench.machine import wait_quiet
from bench.names import API_KEY
from bench.replicas import Replica
from bench.stores import Store
from tests.support.replicas import paced_flow, stream_path

FLOW = "paced-flow"
BURNER = "while True: pass"
Arrivals = dict[int, float]


async def read_frames(client: httpx.AsyncClient, path: str, arrivals: Arrivals, *, after: int | None = None,
                      stop_after: int | None = None) -> int:
    """Record each message's id and arrival time until the terminal event (or `stop_after` messages); the status."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    async with client.stream("GET", path, headers=headers, timeout=httpx.Timeout(30.0, read=120.0)) as response:
        if response.status_code != 200:
            return response.status_code
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                arrivals[int(line[3:])] = time.perf_counter()
                if stop_after is not None and len(arrivals) >= stop_after:
                    return 200
            elif line.startswith("event: workflow_"):
                return 200
    return 200


async def resume_elsewhere(clients: list[httpx.AsyncClient], run_id: str, first_after: int) -> tuple[int, float]:
    """Follow on each replica in turn: `first_after` messages on one, then resume on the other; (status of the
    resume, seconds from the resume to its first message)."""
    seen: Arrivals = {}
    await read_frames(clients[0], stream_path(FLOW, run_id), seen, stop_after=first_after)
    resumed: Arrivals = {}
    began = time.perf_counter()
    status = await read_frames(clients[1], stream_path(FLOW, run_id), resumed, after=max(seen), stop_after=1)
    return status, (min(resumed.values()) - began) if resumed else float("nan")


async def start_runs(client: httpx.AsyncClient, count: int) -> list[str]:
    run_ids = []
    for _ in range(count):
        created = await client.post(f"/api/v1/workflows/{FLOW}/runs", json={"variables": {}})
        run_ids.append(created.json()["data"]["runId"])
    return run_ids


def live_delays(pair: tuple[Arrivals, Arrivals]) -> list[float]:
    """Per event: arrival on the replica that lags (does not execute the run) minus arrival on the other."""
    a, b = pair
    shared = [position for position in a if position in b]
    if statistics.median(b[p] - a[p] for p in shared) < 0:
        a, b = b, a
    return [b[p] - a[p] for p in shared]


async def measure(runs: int, steps: int, pace: float, burn: int, workdir: Path) -> dict[str, Any]:
    """One sitting: two replicas on a fresh schema, `runs` runs followed on both, plus one resume per run."""
    flows = workdir / "flows"
    flows.mkdir(parents=True)
    (flows / f"{FLOW}.json").write_text(json.dumps(paced_flow(FLOW, "Paced", steps)), encoding="utf-8")
    store = Store("postgres", workdir)
    replicas = [Replica(store.url, workdir, i) for i in range(2)]
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for replica in replicas:
            replica.env.update(FLOWTRAIL_SCRIPTED_PACE_SECONDS=str(pace), FLOWTRAIL_WORKFLOWS_DIR=str(flows),
                               FLOWTRAIL_LOAD_DEMOS="false")
            await replica.start()
        clients = [httpx.AsyncClient(base_url=r.base_url, headers={"X-API-Key": API_KEY}, timeout=30.0)
                   for r in replicas]
        run_ids = await start_runs(clients[0], runs)
        pairs: list[tuple[Arrivals, Arrivals]] = [({}, {}) for _ in run_ids]
        following = [asyncio.create_task(read_frames(clients[k], stream_path(FLOW, run_id), pairs[i][k]))
                     for i, run_id in enumerate(run_ids) for k in (0, 1)]
        resuming = [asyncio.create_task(resume_elsewhere(clients[::1 if i % 2 else -1], run_id, 100))
                    for i, run_id in enumerate(run_ids)]
        await asyncio.sleep(0.5)
        burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(burn)]
        for run_id in run_ids:
            await clients[0].post(f"/api/v1/workflows/{FLOW}/runs/{run_id}/start")
        await asyncio.gather(*following)
        resumes = await asyncio.gather(*resuming)
        for client in clients:
            await client.aclose()
    finally:
        for burner in burners:
            burner.kill()
        await asyncio.gather(*(r.stop() for r in replicas), return_exceptions=True)
        store.drop()
    delays = [delay for pair in pairs for delay in live_delays(pair)]
    answered = [seconds for status, seconds in resumes if status == 200]
    return {
        "runs": runs, "burn": burn, "events": len(delays),
        "live p50 ms": ms(percentile(delays, 50)), "live p90 ms": ms(percentile(delays, 90)),
        "live p99 ms": ms(percentile(delays, 99)), "live max ms": ms(max(delays)),
        "resumes refused": len(resumes) - len(answered), "resume p50 ms": ms(percentile(answered, 50)),
        "resume max ms": ms(max(answered)) if answered else float("nan"),
    }


async def run(runs: int, steps: int, pace: float, burn: int, repeat: int) -> None:
    """`repeat` sittings, then the table."""
    await wait_quiet("replica_delivery", max_wait=60.0)
    rows = []
    for sitting in range(repeat):
        with tempfile.TemporaryDirectory(prefix="flowtrail-replica-delivery-") as tmp:
            rows.append(await measure(runs, steps, pace, burn, Path(tmp)))
        print(f"sitting {sitting + 1}: live p99 {rows[-1]['live p99 ms']:.1f} ms", flush=True)
    print_table(f"delivery on the replica that does not execute the run ({steps * 3 + 10} events a run, pace {pace} s, "
                f"{burn} busy loops), PostgreSQL", rows)


def main() -> None:
    """`python -m bench.replica_delivery`"""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--pace", type=float, default=0.02)
    parser.add_argument("--burn", type=int, default=0, help="busy loops running while measuring")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(run(args.runs, args.steps, args.pace, args.burn, args.repeat))


if __name__ == "__main__":
    main()
