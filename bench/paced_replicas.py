"""Runs at a model's pace spread over replicas of one PostgreSQL store: is a second process worth a core?

Each replica is a host built as `flowtrail serve` builds it (bench/host.py), all on one fresh store, the scripted
model paced at 30 steps a second (bench/end_to_end.py's `paced` workflow) and every run it is given executed at
once. Run k is created, followed (one raw SSE client, `types=node_stream`) and started on replica k mod N; the
job queue decides which replica executes it, so a stream may be served by the replica that does not (its live
tail). Per round: each event's delay (arrival minus the time the writer took it, read back from the run's log),
the events/s from the first start to the last event, and each host's share of a core over that time.

    python -m bench.paced_replicas [--runs 300] [--replicas 1,2] [--events 150]

A warm-up round of 50 runs comes first on each row (printed, not in the table).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from bench.channel import Worker
from bench.cli import run_loop
from bench.end_to_end import PACED_STEP_SECONDS, Bench, _timestamps, workflow
from bench.figures import percentile, print_table
from bench.fleet import Fleet
from bench.machine import cpu_seconds

NAME = "paced"
READ_BACK_AT_ONCE = 8


async def one_round(benches: list[Bench], count: int) -> dict[str, Any]:
    """`count` paced runs spread over the hosts: delay p50/p99 ms, events/s, each host's share of a core."""
    n = len(benches)
    hosts = [b.host for b in benches]
    created = await asyncio.gather(*(benches[k % n]._post(f"/api/v1/workflows/{NAME}/runs", {}) for k in range(count)))
    run_ids = [answer.json()["data"]["runId"] for answer in created]
    mine = [[r for k, r in enumerate(run_ids) if k % n == i] for i in range(n)]
    calls = [b.client.send("follow", base_url=b.base,
                           paths=[f"/api/v1/workflows/{NAME}/runs/{r}/stream?types=node_stream" for r in mine[i]])
             for i, b in enumerate(benches)]
    for call in calls:
        await call.wait("connected", timeout=120)
    cpu0, began = [cpu_seconds(h.pid) for h in hosts], time.time()
    await asyncio.gather(*(benches[k % n]._post(f"/api/v1/workflows/{NAME}/runs/{r}/start", None)
                           for k, r in enumerate(run_ids)))
    followed = [(await call.result(timeout=1200))["clients"] for call in calls]
    took = time.time() - began
    shares = [(cpu_seconds(h.pid) - c) / took for h, c in zip(hosts, cpu0)]
    got = {run_id: seen for i in range(n) for run_id, seen in zip(mine[i], followed[i])}
    reading = asyncio.Semaphore(READ_BACK_AT_ONCE)

    async def log_of(run_id: str) -> tuple[str, str]:
        async with reading:
            return run_id, (await benches[0].http.get(f"/api/v1/runs/{run_id}/events")).raise_for_status().text

    delays: list[float] = []
    for run_id, text in await asyncio.gather(*(log_of(r) for r in run_ids)):
        stamps = _timestamps(text)
        delays.extend(at - stamps[fid] for fid, at in zip(got[run_id]["ids"], got[run_id]["arrivals"]))
    events = sum(len(seen["ids"]) for seen in got.values())
    return {"p50": percentile(delays, 50) * 1e3, "p99": percentile(delays, 99) * 1e3, "rate": events / took,
            "cpu": shares}


async def row(replicas: int, runs: int, events: int) -> dict[str, Any]:
    """One table row: `replicas` hosts on one fresh store, a warm-up round of 50, then `runs` paced runs."""
    async with Fleet("paced-replicas") as fleet:
        flows = fleet.workdir / "workflows"
        flows.mkdir()
        (flows / f"{NAME}.json").write_text(json.dumps(workflow(NAME, 1, events)))
        store = fleet.store("postgres")
        hosts = [await fleet.host(store, workflows_dir=flows, name=f"replica-{i}", worker_concurrency=runs,
                                  scripted_pace_seconds=PACED_STEP_SECONDS) for i in range(replicas)]
        benches = []
        for i, host in enumerate(hosts):  # bench.end_to_end's raw SSE clients: each frame's id and arrival
            client = await Worker.start("bench.end_to_end", "--client", name=f"client-{i}")
            fleet.workers.append(client)
            benches.append(Bench(host, client))
        try:
            warm = await one_round(benches, 50)
            print(f"{replicas} replica(s), 50 runs (warm-up): delay p50 {warm['p50']:.0f} / p99 {warm['p99']:.0f} ms",
                  flush=True)
            await asyncio.sleep(3.0)
            found = await one_round(benches, runs)
        finally:
            for bench in benches:
                await bench.close()
    return {"replicas": replicas, "runs": runs, "delay p50 ms": found["p50"], "delay p99 ms": found["p99"],
            "events/s": found["rate"], "host CPU (cores)": " ".join(f"{c:.2f}" for c in found["cpu"])}


async def run(counts: list[int], runs: int, events: int) -> None:
    """One row per replica count, in order."""
    rows = [await row(count, runs, events) for count in counts]
    print_table(f"{runs} runs at 30 events/s ({events} events each) over replicas of one PostgreSQL", rows)


def main() -> None:
    """`python -m bench.paced_replicas`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--replicas", default="1,2", help="comma-separated replica counts, one row each")
    parser.add_argument("--events", type=int, default=150, help="steps of each run (at 30 a second)")
    args = parser.parse_args()
    run_loop(run([int(c) for c in args.replicas.split(",") if c], args.runs, args.events))


if __name__ == "__main__":
    main()
