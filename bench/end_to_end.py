"""Speed through the whole path (issue 16): HTTP create and start, the engine, the scripted model, the writer, the stream.

The host is a separate process built as `flowtrail serve` builds it (`python -m bench.host`,
scripted pace 0), publishing this bench's workflows from FLOWTRAIL_WORKFLOWS_DIR: one `llm`
node (or three in a chain) whose script emits `status` steps of ~200 bytes, then a text answer.
Clients (a process of raw-socket SSE readers, `python -m bench.end_to_end --client`) attach
with `types=node_stream` before the run is started and record each frame's id and arrival
time. A frame's delay is its arrival minus the chunk's timestamp in the run's log (read back
from `GET /api/v1/runs/{id}/events`, where each NodeStreamed keeps the time the writer took it).

    python -m bench.end_to_end [--store both|sqlite|postgres] [--n 10000] [--runs 2] [--quick]
                               [--cases one,small,fleet,replay,kept,paced] [--paced 500,1000] [--paced-events 150]

`paced`: runs streaming at a model's token rate (the scripted model paced at 1/30 s a step, on a host of its
own), started together and followed by one client each: the other counts of `--paced` in rising order until
one misses the p99 target (150 ms), then the first count (the target's 500): its per-event delay p50 / p99;
the largest count within the p99 target is the "live runs per core" figure (one server process: one event loop, one core
for Python). Its host executes every run it is given at once (`FLOWTRAIL_WORKER_CONCURRENCY` is set to the largest
count: PostgreSQL's job worker runs 100 at a time by default and queues the rest).

`replay`: a finished run of N events (its frames released, so served from the store) read whole by one
client, with `types=node_stream` and without; events/s from the request to the last node_stream frame.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx

from bench.channel import Worker, serve_commands
from bench.cli import run_loop, store_kinds
from bench.figures import median, ms, percentile, print_table, verdict
from bench.fleet import Fleet
from bench.machine import cpu_seconds, machine_idle, rss_kib
from bench.names import API_KEY

STATUS_TEXT = "progress " + "x" * 190  # ~200 bytes of status, with its index in front
_ID = re.compile(rb"id: (\d+)\r\nevent: (\w+)")


def workflow(name: str, nodes: int, steps: int) -> dict[str, Any]:
    """A DAG of `nodes` llm nodes in a chain (then an output node), each scripted to emit `steps` status steps then answer."""
    script = [[*({"status": f"{i:06d} {STATUS_TEXT}"} for i in range(steps)), {"text": "done"}]]
    ids = [f"step-{k + 1}" for k in range(nodes)]
    llm = [{"id": node, "type": "llm", "label": node, "data": {"model_id": "scripted", "prompt": "go", "script": script}}
           for node in ids]
    chain = ["input", *ids, "result"]
    output = {"id": "result", "type": "output", "label": "result",
              "data": {"outputs": [{"name": "text", "type": "string", "value": f"{{{{{ids[-1]}.text}}}}"}]}}
    return {
        "name": name, "displayName": name, "description": "end-to-end bench", "mode": "DAG",
        "nodes": [{"id": "input", "type": "userInput", "label": "in", "data": {"inputs": []}}, *llm, output],
        "edges": [{"source": a, "target": b} for a, b in zip(chain, chain[1:])],
    }


# ---- the client process -------------------------------------------------------------------


async def _read_one(base_url: str, path: str, on_connected: Any) -> dict[str, Any]:
    """One raw SSE client: (id, arrival) of every node_stream frame until the stream ends."""
    clock = time.time
    host, _, port = base_url.removeprefix("http://").partition(":")
    opened = clock()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n"
                  f"X-API-Key: {API_KEY}\r\nConnection: close\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"{path}: {head[:300]!r}")
    on_connected()
    ids: list[int] = []
    arrivals: list[float] = []
    tail = b""
    try:
        while data := await reader.read(1 << 18):
            now = clock()
            data = tail + data
            cut = data.rfind(b"\r\n\r\n") + 4
            tail = data[cut:] if cut >= 4 else data
            for fid, event in _ID.findall(data, 0, cut if cut >= 4 else 0):
                if event == b"node_stream":
                    ids.append(int(fid))
                    arrivals.append(now)
    finally:
        writer.close()
    return {"ids": ids, "arrivals": arrivals, "opened": opened}


async def follow(emit: Any, base_url: str, paths: list[str]) -> dict[str, Any]:
    """Attach one client per path; emits `connected` once all have their headers, answers when all ended."""
    connected = 0
    all_connected = asyncio.Event()

    def on_connected() -> None:
        nonlocal connected
        connected += 1
        if connected == len(paths):
            all_connected.set()

    everything = asyncio.gather(*(_read_one(base_url, path, on_connected) for path in paths))
    waiter = asyncio.ensure_future(all_connected.wait())
    either: list[asyncio.Future[Any]] = [everything, waiter]
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    failure = everything.exception() if everything.done() else None
    if failure is not None:
        raise failure
    emit("connected")
    results = await everything
    waiter.cancel()
    return {"clients": results}


# ---- the orchestrator ---------------------------------------------------------------------


def _timestamps(lines: str) -> dict[int, float]:
    """NodeStreamed positions and their times, from the events endpoint's JSON lines."""
    out = {}
    for line in lines.splitlines():
        event = json.loads(line)
        if event["type"] == "NodeStreamed":
            out[event["originator_version"]] = datetime.fromisoformat(event["timestamp"]).timestamp()
    return out


class Bench:
    """One host, one client process, one HTTP client: creates, attaches, starts, measures."""

    def __init__(self, host: Worker, client: Worker, paced: Bench | None = None) -> None:
        self.host = host
        self.client = client
        self.paced = paced
        """The bench of a host whose scripted model streams at 30 steps/s (the `paced` case)."""
        self.refused = 0
        self.base = host.info["base_url"]
        self.http = httpx.AsyncClient(base_url=self.base, headers={"X-API-Key": API_KEY}, timeout=300.0)

    async def runs(self, name: str, count: int, *, read_back: bool = True) -> dict[str, Any]:
        """Create `count` runs, attach a client to each, start them all; the times and frames of each (and
        each frame's delay, read back from the run's log, unless `read_back` is False)."""
        t_create = time.time()
        self.refused = 0
        created = await asyncio.gather(*(self._post(f"/api/v1/workflows/{name}/runs", {}) for _ in range(count)))
        run_ids = [r.json()["data"]["runId"] for r in created]
        call = self.client.send("follow", base_url=self.base,
                                paths=[f"/api/v1/workflows/{name}/runs/{r}/stream?types=node_stream" for r in run_ids])
        await call.wait("connected", timeout=120)
        cpu0 = cpu_seconds(self.host.pid)

        async def start(run_id: str) -> float:
            sent = time.time()
            await self._post(f"/api/v1/workflows/{name}/runs/{run_id}/start", None)
            return sent

        t_start = await asyncio.gather(*(start(r) for r in run_ids))
        if self.refused:
            print(f"{count} runs: {self.refused} create or start requests answered 503 STORE_UNAVAILABLE and were "
                  "sent again", file=sys.stderr, flush=True)
        clients = (await call.result(timeout=1200))["clients"]
        cpu1 = cpu_seconds(self.host.pid)
        reading = asyncio.Semaphore(READ_BACK_AT_ONCE)

        async def read_back_log(run_id: str) -> httpx.Response:
            async with reading:
                return await self.http.get(f"/api/v1/runs/{run_id}/events")

        logs = await asyncio.gather(*(read_back_log(r) for r in run_ids)) if read_back else []
        delays: list[float] = []
        for got, log in zip(clients, logs):
            stamps = _timestamps(log.raise_for_status().text)
            delays.extend(arrival - stamps[fid] for fid, arrival in zip(got["ids"], got["arrivals"]))
        return {"run_id": run_ids[0], "t_create": t_create, "t_start": t_start, "clients": clients, "delays": delays,
                "cpu": cpu1 - cpu0}

    async def _post(self, path: str, body: Any) -> httpx.Response:
        """POST, sent again after a while when the answer is 503 (the store's queue was longer than a request
        waits), as a client does; counted in `refused`."""
        for _ in range(START_TRIES):
            answer = await self.http.post(path, json=body)
            if answer.status_code != 503:
                break
            self.refused += 1
            await asyncio.sleep(0.2)
        return answer.raise_for_status()

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.http.aclose()


def _events(result: dict[str, Any]) -> int:
    return sum(len(c["ids"]) for c in result["clients"])


def _last(result: dict[str, Any]) -> float:
    return max(c["arrivals"][-1] for c in result["clients"])


CASES = ("one", "small", "fleet", "replay", "kept", "paced")
PACED_STEP_SECONDS = 1 / 30
START_TRIES = 20
PACED_REST_SECONDS = 3.0
READ_BACK_AT_ONCE = 8
PACED_P99_MS = 150


async def measure(
    bench: Bench, n: int, runs: int, fleet_n: int, fleet_runs: int, kept_runs: int, cases: tuple[str, ...] = CASES,
    paced_counts: Sequence[int] = (500,),
) -> dict[str, float]:
    """Every figure of the issue's table for one store (medians over `runs` repetitions), or those of `cases`."""
    figures: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        figures.setdefault(key, []).append(value)

    await bench.runs("e2e-one-small", 1)  # warm-up
    for _ in range(runs):
        if "one" in cases:
            one = await bench.runs("e2e-one", 1)
            add("rate", _events(one) / (_last(one) - one["t_create"]))
            add("p50", ms(percentile(one["delays"], 50)))
            add("p99", ms(percentile(one["delays"], 99)))
            add("cpu", one["cpu"] / _events(one) * 1e6)
            chain = await bench.runs("e2e-chain", 1)
            arrivals = chain["clients"][0]["arrivals"]
            add("chain", len(arrivals) / (arrivals[-1] - arrivals[0]))
            add("chain_total", len(arrivals) / (arrivals[-1] - chain["t_create"]))
        if "small" in cases:
            small = await bench.runs("e2e-one-small", 1)
            add("first", ms(small["clients"][0]["arrivals"][0] - small["t_create"]))
        if "fleet" in cases:
            many = await bench.runs("e2e-one-small", fleet_runs)
            firsts = [c["arrivals"][0] - s for c, s in zip(many["clients"], many["t_start"])]
            add("fleet", _events(many) / (_last(many) - min(many["t_start"])))
            add("fleet_first", ms(median(firsts)))
            add("fleet_first_p99", ms(percentile(firsts, 99)))
            add("fleet_p50", ms(percentile(many["delays"], 50)))
            add("fleet_p99", ms(percentile(many["delays"], 99)))
    if "replay" in cases:
        for key, rate in (await replay_rates(bench, "e2e-one", runs)).items():
            add(key, rate)
    if "paced" in cases and bench.paced is not None:
        found = await paced_figures(bench.paced, paced_counts[0], paced_counts[1:])
        figures.update({key: [value] for key, value in found.items()})
    if "kept" in cases:
        await bench.runs("e2e-one-small", 10, read_back=False)  # caches and allocator arenas at their high-water mark
        await bench.host.call("gc", trim=True)
        before = rss_kib(bench.host.pid)["VmRSS"]
        for _ in range(kept_runs // 10):
            await bench.runs("e2e-one-small", 10, read_back=False)
        await asyncio.sleep(1.0)
        as_is = rss_kib(bench.host.pid)["VmRSS"]
        await bench.host.call("gc", trim=True)
        after = rss_kib(bench.host.pid)["VmRSS"]
        events = kept_runs // 10 * 10 * fleet_n
        add("kept_rss", (as_is - before) * 1024 / events)
        add("kept", (after - before) * 1024 / events)
    return {key: median(values) for key, values in figures.items()}


async def paced_round(bench: Bench, count: int) -> tuple[float, float]:
    """`count` runs at a model's pace, started together: their per-event delay p50 and p99 (ms)."""
    cpu0, began = cpu_seconds(bench.host.pid), time.time()
    result = await bench.runs("e2e-paced", count)
    share = (cpu_seconds(bench.host.pid) - cpu0) / (time.time() - began)
    p50, p99 = ms(percentile(result["delays"], 50)), ms(percentile(result["delays"], 99))
    rate = _events(result) / (_last(result) - min(result["t_start"]))
    print(f"paced: {count} runs at 30 events/s: delay p50 {p50:.0f} ms, p99 {p99:.0f} ms, server CPU {share:.2f} "
          f"cores, {rate:,.0f} events/s", file=sys.stderr, flush=True)
    return p50, p99


async def paced_figures(bench: Bench, target: int, search: Sequence[int]) -> dict[str, float]:
    """Rising counts until one misses the p99 target (the largest that met it), then the target count's delays."""
    carried = 0
    for count in sorted(search):
        if (await paced_round(bench, count))[1] > PACED_P99_MS:
            break
        carried = count
        await asyncio.sleep(PACED_REST_SECONDS)
    await asyncio.sleep(PACED_REST_SECONDS)
    p50, p99 = await paced_round(bench, target)
    if p99 <= PACED_P99_MS:
        carried = max(carried, target)
    return {"paced_p50": p50, "paced_p99": p99, "paced_carried": carried}


async def replay_rates(bench: Bench, name: str, rounds: int) -> dict[str, float]:
    """A finished run read whole from the store (its frames released), filtered and not: node_stream events/s."""
    finished = await bench.runs(name, 1)
    run_id = finished["run_id"]
    rates: dict[str, list[float]] = {"replay": [], "replay_all": []}
    for _ in range(rounds):
        for key, query in (("replay", "?types=node_stream"), ("replay_all", "")):
            call = bench.client.send("follow", base_url=bench.base,
                                     paths=[f"/api/v1/workflows/{name}/runs/{run_id}/stream{query}"])
            got = (await call.result(timeout=300))["clients"][0]
            rates[key].append(len(got["ids"]) / (got["arrivals"][-1] - got["opened"]))
    return {key: median(values) for key, values in rates.items()}


ROWS = [
    ("rate", "one run, N={n}: events/s, create to last event", 30000, True),
    ("p50", "same, per-event delay p50 ms", 10, False),
    ("p99", "same, per-event delay p99 ms", 50, False),
    ("chain", "same, 3 nodes in a chain: streaming-phase events/s", 30000, True),
    ("chain_total", "same, 3 nodes in a chain: events/s, create to last event", None, True),
    ("first", "one run, N={m}: create to first event ms", 20, False),
    ("fleet", "{k} concurrent runs x {m} events: aggregate events/s", 30000, True),
    ("fleet_first", "same: start to first event p50 ms", 100, False),
    ("fleet_first_p99", "same: start to first event p99 ms", 300, False),
    ("fleet_p50", "same: per-event delay p50 ms", None, False),
    ("fleet_p99", "same: per-event delay p99 ms", 300, False),
    ("replay", "finished run of {n} events read whole from the store, types=node_stream: events/s", 100000, True),
    ("replay_all", "same, unfiltered: node_stream events/s", 100000, True),
    ("paced_p50", "{p} runs at 30 events/s each: per-event delay p50 ms", 60, False),
    ("paced_p99", "same: per-event delay p99 ms", PACED_P99_MS, False),
    ("paced_carried", "live runs at 30 events/s one process carries within p99 <= 150 ms", None, True),
    ("cpu", "server CPU per event us (one run, N={n})", 40, False),
    ("kept_rss", "RSS growth after {r} finished runs of {m} events, as is (no gc, no trim), B/event", 100, False),
    ("kept", "same after gc.collect() and malloc_trim, B/event", 100, False),
]


async def run(
    kinds: list[str], n: int, runs: int, concurrent: int, small: int, kept: int, cases: tuple[str, ...] = CASES,
    paced_counts: Sequence[int] = (500,), paced_events: int = 150,
) -> None:
    """Measure each store and print the table with each target beside its figure."""
    found: dict[str, dict[str, float]] = {}
    for kind in kinds:
        async with Fleet("end-to-end") as fleet:
            flows = fleet.workdir / "workflows"
            flows.mkdir()
            for name, nodes, steps in (("e2e-one", 1, n), ("e2e-chain", 3, n // 3), ("e2e-one-small", 1, small),
                                       ("e2e-paced", 1, paced_events)):
                (flows / f"{name}.json").write_text(json.dumps(workflow(name, nodes, steps)))
            host = await fleet.host(fleet.store(kind), workflows_dir=flows, scripted_pace_seconds=0)
            client = await Worker.start("bench.end_to_end", "--client", name="client")
            fleet.workers.append(client)
            paced = None
            if "paced" in cases:
                # every paced run executes at once: PostgreSQL's job worker would run 100 and queue the rest
                paced_host = await fleet.host(fleet.store(kind), workflows_dir=flows, name="paced",
                                              scripted_pace_seconds=PACED_STEP_SECONDS,
                                              worker_concurrency=max(paced_counts))
                paced = Bench(paced_host, client)
            bench = Bench(host, client, paced)
            try:
                found[kind] = await measure(bench, n, runs, small, concurrent, kept, cases, paced_counts)
            finally:
                await bench.close()
                if paced is not None:
                    await paced.close()
    rows = []
    for key, label, target, at_least in ROWS:
        if key not in found[kinds[0]]:
            continue
        row: dict[str, Any] = {"case": label.format(n=f"{n:,}", m=f"{small:,}", k=concurrent, r=kept, p=paced_counts[0])}
        for kind in kinds:
            row[kind] = found[kind][key]
            row[f"{kind} vs target"] = "-" if target is None else verdict(found[kind][key], target, at_least=at_least)
        row["target"] = "-" if target is None else (">= " if at_least else "<= ") + f"{target:,}"
        rows.append(row)
    print_table(f"end to end (medians of {runs} run(s)); server CPU excludes the database's", rows)


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options (defaults: the issue's table)."""
    parser.add_argument("--n", type=int, default=10_000, help="status steps of the one-run cases")
    parser.add_argument("--runs", type=int, default=2, help="repetitions (the figures are medians)")
    parser.add_argument("--concurrent", type=int, default=50, help="runs of the concurrent case")
    parser.add_argument("--small", type=int, default=1_000, help="steps of the small and concurrent runs")
    parser.add_argument("--kept", type=int, default=100, help="finished runs of the memory case")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated cases to measure, of {','.join(CASES)} (one = one run and the chain)")
    parser.add_argument("--paced", default="500,50,100,150,200,300,400",
                        help="run counts of the paced case: the target's count (measured last), then the counts "
                             "searched in rising order for the most runs within the p99 target")
    parser.add_argument("--paced-events", type=int, default=150, help="steps of each paced run (at 30/s)")
    parser.add_argument("--quick", action="store_true", help="a quick look: N=2,000, 1 run, 10 concurrent, 20 kept")


def main() -> None:
    """`python -m bench.end_to_end`: measures at once (the machine's idle share is printed, not waited for)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["both", "sqlite", "postgres"], default="both")
    add_args(parser)
    args = parser.parse_args()
    if args.quick:
        args.n, args.runs, args.concurrent, args.kept = 2_000, 1, 10, 20

    async def go() -> None:
        print(f"machine idle {await machine_idle(2.0):.0%} before measuring", file=sys.stderr, flush=True)
        cases = tuple(c for c in args.cases.split(",") if c)
        counts = [int(c) for c in args.paced.split(",") if c]
        await run(store_kinds(args.store), args.n, args.runs, args.concurrent, args.small, args.kept, cases,
                  counts, args.paced_events)

    run_loop(go())


if __name__ == "__main__":
    if sys.argv[1:] == ["--client"]:
        run_loop(serve_commands({"follow": follow}, {}))
    else:
        main()
