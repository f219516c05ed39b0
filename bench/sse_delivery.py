"""SSE delivery: events/s to one client for a 10,000-event run, and each event's delay.

Targets (issue 2): >= 15,000 events/s of ~200-byte events; delay from append (the writer's
save returning) to the client receiving the event p99 <= 50 ms.

Per store:
* live        - the client is attached; the server's own writer appends 10,000 step chunks as
                fast as it can (coalescing on, default window), then finishes the run; done
                `repeat` times on fresh runs, the median (by events/s) is shown with the worst
                p99 of all beside it;
* live xproc  - PostgreSQL only: the writer is another process; the server's live tail
                (LISTEN/NOTIFY + asyncpg range reads) delivers;
* replay hot  - the finished run read from the start while it is in memory;
* replay cold - the same after it was evicted from memory (loaded from the store).

events/s counts the step events (~220-byte frames); `live` measures from the writer's first
chunk to the client's last step, `replay` from the request to the last step. The run's three
closing frames (node_status SUCCESS, visit_recorded, workflow_complete) repeat the visit's whole
log and are reported separately as `tail ms`/`tail KiB`.

    python -m bench.sse_delivery [--store both|sqlite|postgres] [--events 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.channel import Worker
from bench.cli import bench_main
from bench.figures import ms, percentile, print_table, verdict
from bench.fleet import Fleet, follow
from bench.frames import Frames, chunk_delays, save_delays

TARGET_RATE = 15_000.0
TARGET_P99_MS = 50.0
COLUMNS = [
    "store",
    "mode",
    "events",
    "frame B",
    "events/s",
    "vs 15k",
    "save->client p50 ms",
    "p99 ms",
    "vs 50ms",
    "p99 worst ms",
    "chunk->client p99 ms",
    "append/s",
    "tail ms",
    "tail KiB",
]


def _row(
    store: str,
    mode: str,
    frames: Frames,
    client: dict[str, Any],
    start: float,
    streamed: dict[str, Any] | None,
) -> dict[str, Any]:
    """Figures of one read: step events/s from `start`, delays when the writer's save times are known."""
    arrivals = [a for a, t in zip(frames.arrival, frames.t) if t > 0.0]
    steps = len(arrivals)
    last_step = max(arrivals) if arrivals else float("nan")
    rate = steps / (last_step - start) if steps else float("nan")
    row: dict[str, Any] = {
        "store": store,
        "mode": mode,
        "events": steps,
        "frame B": client["step_bytes"] / max(1, steps),
        "events/s": rate,
        "vs 15k": verdict(rate, TARGET_RATE, at_least=True),
        "tail ms": ms(client["t_last"] - last_step)
        if client["ended"]
        else float("nan"),
        "tail KiB": (client["bytes"] - client["step_bytes"]) / 1024,
    }
    if streamed is not None:
        delays = save_delays(frames, streamed["saved"]) if streamed.get("saved") else []
        p99 = ms(percentile(delays, 99))
        row.update(
            {
                "save->client p50 ms": ms(percentile(delays, 50)),
                "p99 ms": p99,
                "vs 50ms": verdict(p99, TARGET_P99_MS, at_least=False),
                "chunk->client p99 ms": ms(percentile(chunk_delays(frames), 99)),
                "append/s": steps / (streamed["t1"] - streamed["t0"]),
            }
        )
    return row


async def live(
    fleet: Fleet,
    host: Worker,
    client: Worker,
    store: str,
    events: int,
    writer: Worker | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One live run: client attached first, then the writer appends `events` chunks and finishes."""
    writer = writer or host
    made = await writer.call("new_run", record=True)
    out = fleet.frames_file()
    call = follow(client, host, [made["run"]], out=out)
    await call.wait("connected")
    streamed = await writer.call(
        "stream", run=made["run"], visit=made["visit"], n=events, finish=True
    )
    result = (await call.result())["clients"][0]
    mode = "live" if writer is host else "live xproc"
    return _row(store, mode, Frames.load(out), result, streamed["t0"], streamed), made


async def replay(
    fleet: Fleet,
    host: Worker,
    client: Worker,
    store: str,
    run: str,
    *,
    cold: bool,
    repeat: int,
) -> dict[str, Any]:
    """Read a finished run from the start `repeat` times (evicting it first when `cold`)."""
    rows = []
    for _ in range(repeat):
        if cold:
            evicted = await host.call("evict", run=run)
            if not evicted["gone"]:
                raise RuntimeError(f"run {run} could not be evicted")
        out = fleet.frames_file()
        result = (await follow(client, host, [run], out=out).result())["clients"][0]
        rows.append(
            _row(
                store,
                "replay cold" if cold else "replay hot",
                Frames.load(out),
                result,
                result["t_req"],
                None,
            )
        )
    rows.sort(key=lambda r: r["events/s"])
    middle = dict(rows[len(rows) // 2])
    middle["mode"] += f" (median of {repeat})"
    return middle


async def live_median(
    fleet: Fleet,
    host: Worker,
    client: Worker,
    store: str,
    events: int,
    repeat: int,
    writer: Worker | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`repeat` live runs; the one with the median events/s, with the worst p99 of all beside it."""
    done = [
        await live(fleet, host, client, store, events, writer=writer)
        for _ in range(repeat)
    ]
    done.sort(key=lambda pair: pair[0]["events/s"])
    row, made = done[len(done) // 2]
    row = dict(row)
    row["p99 worst ms"] = max(r["p99 ms"] for r, _ in done)
    row["mode"] += f" (median of {repeat})"
    return row, made


async def run(
    kinds: list[str], events: int = 10_000, repeat: int = 3, xproc: bool = True
) -> list[dict[str, Any]]:
    """Every store; one table."""
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        async with Fleet("sse") as fleet:
            store = fleet.store(kind)
            host = await fleet.host(store)
            client = await fleet.client()
            row, made = await live_median(fleet, host, client, kind, events, repeat)
            rows.append(row)
            if kind == "postgres" and xproc:
                writer = await fleet.host(store, serve=False, name="writer")
                xrow, _ = await live_median(
                    fleet, host, client, kind, events, repeat, writer=writer
                )
                rows.append(xrow)
            for cold in (False, True):
                rows.append(
                    await replay(
                        fleet, host, client, kind, made["run"], cold=cold, repeat=repeat
                    )
                )
    print_table(f"SSE delivery to one client ({events:,}-event run)", rows, COLUMNS)
    return rows


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
