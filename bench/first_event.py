"""One run's create to first event, taken apart (issue 27: <= 20 ms on SQLite, 40 ms on PostgreSQL).

The host and the client process are bench.end_to_end's (one `llm` node scripted to emit 1,000 `status`
steps at zero pace). For each sample this process creates a run, has the client attach to its stream
(`types=node_stream`), starts it and waits for the first frame; then reads the run's log, whose events keep
the time the server made them. The steps, medians over the samples (ms):

* `create`, `attach`, `start`     - the create request, the client's attach (the bench's own hop to its
                                    client process and the SSE response head), the start request;
* `start to RunStarted`           - the start request sent to the time `RunStarted` was made;
* `RunStarted to first chunk`     - the engine's decisions before the model's first chunk (the visits'
                                    starts, the input visit's end) and the model call's set-up;
* `first chunk to client`         - the first `NodeStreamed` made to its frame at the client;
* `total`                         - the create request sent to the first frame (end_to_end's `first`).

    python -m bench.first_event [--store both|sqlite|postgres] [--samples 30]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from typing import Any

from bench.channel import Worker
from bench.cli import bench_main
from bench.end_to_end import Bench, workflow
from bench.figures import median, ms, print_table
from bench.fleet import Fleet

TARGET_MS = {"sqlite": 20.0, "postgres": 40.0}
STEPS = ("create", "attach", "start", "start to RunStarted", "RunStarted to first chunk", "first chunk to client",
         "total")


def _first_stamps(log: str) -> dict[str, float]:
    """Each event type's first time in the run's log (epoch seconds)."""
    stamps: dict[str, float] = {}
    for line in log.splitlines():
        event = json.loads(line)
        stamps.setdefault(event["type"], datetime.fromisoformat(event["timestamp"]).timestamp())
    return stamps


async def sample(bench: Bench, name: str) -> dict[str, float]:
    """The steps of one run's way to its first event, seconds."""
    sent = time.time()
    created = await bench.http.post(f"/api/v1/workflows/{name}/runs", json={})
    run_id = created.raise_for_status().json()["data"]["runId"]
    answered = time.time()
    call = bench.client.send("follow", base_url=bench.base,
                             paths=[f"/api/v1/workflows/{name}/runs/{run_id}/stream?types=node_stream"])
    await call.wait("connected", timeout=60)
    attached = time.time()
    (await bench.http.post(f"/api/v1/workflows/{name}/runs/{run_id}/start")).raise_for_status()
    started = time.time()
    first = (await call.result(timeout=120))["clients"][0]["arrivals"][0]
    stamps = _first_stamps((await bench.http.get(f"/api/v1/runs/{run_id}/events")).raise_for_status().text)
    return {
        "create": answered - sent, "attach": attached - answered, "start": started - attached,
        "start to RunStarted": stamps["RunStarted"] - attached,
        "RunStarted to first chunk": stamps["NodeStreamed"] - stamps["RunStarted"],
        "first chunk to client": first - stamps["NodeStreamed"], "total": first - sent,
    }


async def run(kinds: list[str], samples: int) -> None:
    """Print each store's steps, medians of `samples` runs after one warm-up."""
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        async with Fleet("first-event") as fleet:
            flows = fleet.workdir / "workflows"
            flows.mkdir()
            (flows / "first.json").write_text(json.dumps(workflow("first", 1, 1000)))
            host = await fleet.host(fleet.store(kind), workflows_dir=flows, scripted_pace_seconds=0)
            client = await Worker.start("bench.end_to_end", "--client", name="client")
            fleet.workers.append(client)
            bench = Bench(host, client)
            try:
                await sample(bench, "first")
                found = [await sample(bench, "first") for _ in range(samples)]
            finally:
                await bench.close()
        row: dict[str, Any] = {"store": kind}
        row.update({step: ms(median([f[step] for f in found])) for step in STEPS})
        row["target"] = TARGET_MS[kind]
        rows.append(row)
    print_table(f"one run's create to first event, taken apart (medians of {samples} runs, ms)", rows)


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--samples", type=int, default=30, help="runs measured per store (after one warm-up)")


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
