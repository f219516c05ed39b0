"""What one run costs the host, apart from its stream: many runs of one step each, created, followed and started together.

The host is built as `flowtrail serve` builds it (bench/host.py, scripted pace 0); each run's workflow is
bench/end_to_end.py's, with a single status step, so nearly everything a run costs is its opening and
closing (the start request, the decisions of its visits, the job, the read model) rather than its
stream. Per round: `--runs` runs are created, one raw SSE client attaches to each, then all are started at
once; the host's CPU (every thread, not the database's) over each phase is divided by the runs, and each
run's first event is timed from the first start request.

    python -m bench.run_cost [--store both|sqlite|postgres] [--runs 50] [--rounds 5]

The first round warms the host up and is left out of the medians.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from bench.channel import Worker
from bench.cli import bench_main
from bench.end_to_end import Bench, workflow
from bench.figures import median, percentile, print_table
from bench.fleet import Fleet
from bench.machine import cpu_seconds

NAME = "one-step"


async def one_round(bench: Bench, count: int) -> dict[str, float]:
    """Create, attach and start `count` runs; host CPU ms a run for each phase, first event p50/p99 ms."""
    pid = bench.host.pid
    cpu0 = cpu_seconds(pid)
    created = await asyncio.gather(*(bench._post(f"/api/v1/workflows/{NAME}/runs", {}) for _ in range(count)))
    cpu1 = cpu_seconds(pid)
    run_ids = [answer.json()["data"]["runId"] for answer in created]
    call = bench.client.send("follow", base_url=bench.base,
                             paths=[f"/api/v1/workflows/{NAME}/runs/{r}/stream?types=node_stream" for r in run_ids])
    await call.wait("connected", timeout=120)
    cpu2 = cpu_seconds(pid)
    began = time.time()
    await asyncio.gather(*(bench._post(f"/api/v1/workflows/{NAME}/runs/{r}/start", None) for r in run_ids))
    clients = (await call.result(timeout=600))["clients"]
    cpu3 = cpu_seconds(pid)
    firsts = [c["arrivals"][0] - began for c in clients]
    return {"create": (cpu1 - cpu0) / count * 1e3, "attach": (cpu2 - cpu1) / count * 1e3,
            "run": (cpu3 - cpu2) / count * 1e3, "first_p50": percentile(firsts, 50) * 1e3,
            "first_p99": percentile(firsts, 99) * 1e3}


async def run(kinds: list[str], runs: int, rounds: int) -> None:
    """Measure each store and print the medians of the rounds after the first."""
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        async with Fleet("run-cost") as fleet:
            flows = fleet.workdir / "workflows"
            flows.mkdir()
            (flows / f"{NAME}.json").write_text(json.dumps(workflow(NAME, 1, 1)))
            host = await fleet.host(fleet.store(kind), workflows_dir=flows, scripted_pace_seconds=0)
            client = await Worker.start("bench.end_to_end", "--client", name="client")
            fleet.workers.append(client)
            bench = Bench(host, client)
            try:
                found = [await one_round(bench, runs) for _ in range(rounds)][1:]
            finally:
                await bench.close()
        row: dict[str, Any] = {"store": kind}
        for key, label in (("create", "create CPU ms/run"), ("attach", "attach CPU ms/run"),
                           ("run", "start to end CPU ms/run"), ("first_p50", "first event p50 ms"),
                           ("first_p99", "first event p99 ms")):
            row[label] = median([f[key] for f in found])
        rows.append(row)
    print_table(f"{runs} one-step runs at once: the host's CPU a run (medians of {rounds - 1} rounds)", rows)


def add_args(parser: Any) -> None:
    """The bench's own options."""
    parser.add_argument("--runs", type=int, default=50, help="runs created and started together in a round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the first is a warm-up)")


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
