"""Engine overhead with the scripted provider at pace 0, in one process (no HTTP), on each store.

* **one run**: a DAG chain of 10 agent nodes, each playing 10 turns of thinking + a
  `web_search` tool call before its answer (about 470 events a run); events/s = the run's
  events / (RunCompleted - RunStarted), median of the repeats; CPU ms per visit = the
  process's CPU time (event loop + store threads) over the repeats / visits.
* **50 concurrent demo-report runs**: all started at once; runs/s = runs / (last RunCompleted
  - first start), p50/p99 of each run's RunStarted -> RunCompleted, CPU ms per visit.

Default settings (40 ms coalescing window) apart from the pace; demo-report's research node
goes through the re-format path in every run. Each store is measured with the context tools
offered to model visits (the default: a token and a toolbox per visit) and without them
(FLOWTRAIL_CONTEXT_QUERY_ENABLED=0), which isolates the engine's own cost.

    python -m bench.engine_throughput [--store both|sqlite|postgres] [--repeat 5] [--concurrent 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

from api.sse import encode_frame
from bench.common import Store, bench_main, ms, percentile, print_table
from domain import events as ev
from engine.bootstrap import Services, build_services, tune_collector
from engine.settings import ContextSettings, EngineSettings, Settings, StoreSettings

CHAIN, TURNS = 10, 10


def chain_workflow() -> dict[str, Any]:
    """10 agent nodes in a chain, each 10 tool turns then an answer."""
    turn = [{"thinking": "looking up one more source before answering"},
            {"tool_call": {"name": "web_search", "arguments": {"query": "tides"}}}]
    agent = {"model_id": "scripted", "tools": ["web_search"], "prompt": "work",
             "script": [turn] * TURNS + [[{"text": "done"}]]}
    nodes = [{"id": f"n{i}", "type": "agent", "data": agent} for i in range(CHAIN)]
    nodes.append({"id": "out", "type": "output", "data": {"outputs": [{"name": "x", "value": "{{n9.text}}"}]}})
    edges = [{"source": f"n{i}", "target": f"n{i + 1}"} for i in range(CHAIN - 1)] + [{"source": "n9", "target": "out"}]
    return {"name": "bench-chain", "displayName": "Bench chain", "mode": "DAG", "nodes": nodes, "edges": edges}


async def start(services: Services, name: str, variables: dict[str, Any]) -> UUID:
    """Create and start a run of the latest version of a workflow."""
    entry = services.catalogue.find(name)
    created = await services.runs.create(
        workflow_id=entry.workflow_id, workflow_name=name, workflow_version=entry.version,
        display_name=entry.definition.display_name, mode=entry.definition.mode, variables=variables,
    )
    await services.engine.start(created.originator_id)
    return created.originator_id


async def finished(services: Services, run_id: UUID) -> list[ev.RunEvent]:
    """The run's events once it completed (RuntimeError when it did not)."""
    while not (await services.runs.state(run_id)).status.is_terminal:
        await asyncio.sleep(0.01)
    events = await services.runs.events(run_id)
    completed = isinstance(events[-1], ev.RunCompleted)
    if not completed:
        raise RuntimeError(f"run {run_id.hex} did not complete: {events[-1]}")
    return events


def duration(events: list[ev.RunEvent]) -> float:
    """Seconds from RunStarted to the run's last event."""
    started = next(e for e in events if isinstance(e, ev.RunStarted)).timestamp
    return (events[-1].timestamp - started).total_seconds()


def visits(events: list[ev.RunEvent]) -> int:
    """How many visits the run started."""
    return sum(isinstance(e, ev.VisitStarted) for e in events)


async def one_run(services: Services, label: str, repeat: int) -> dict[str, Any]:
    """Events/s and CPU per visit of the chain workflow, run after run."""
    await services.catalogue.publish(chain_workflow())
    await finished(services, await start(services, "bench-chain", {}))  # warm-up
    rates, count, cpu0 = [], 0, time.process_time()
    for _ in range(repeat):
        events = await finished(services, await start(services, "bench-chain", {}))
        rates.append(len(events) / duration(events))
        count += visits(events)
    return {"store": label, "bench": "one run (10 agents x 10 tool turns)", "runs": repeat,
            "events/run": len(events), "events/s": statistics.median(rates),
            "CPU ms/visit": ms((time.process_time() - cpu0) / count)}


async def concurrent(services: Services, label: str, runs: int) -> dict[str, Any]:
    """Runs/s, durations and CPU per visit of demo-report runs started at once."""
    await finished(services, await start(services, "demo-report", {"topic": "warm-up"}))
    cpu0, t0 = time.process_time(), time.time()
    ids = await asyncio.gather(*(start(services, "demo-report", {"topic": f"topic {i}"}) for i in range(runs)))
    logs = await asyncio.gather(*(finished(services, run_id) for run_id in ids))
    last = max(events[-1].timestamp.timestamp() for events in logs)
    durations = [duration(events) for events in logs]
    return {"store": label, "bench": f"{runs} concurrent demo-report runs", "runs": runs,
            "events/run": statistics.median(len(e) for e in logs), "runs/s": runs / (last - t0),
            "p50 ms": ms(percentile(durations, 50)), "p99 ms": ms(percentile(durations, 99)),
            "CPU ms/visit": ms((time.process_time() - cpu0) / sum(visits(e) for e in logs))}


async def run(kinds: list[str], repeat: int, concurrent_runs: int) -> None:
    """Measure each store with and without context tools and print the table."""
    rows = []
    for kind in kinds:
        for tools in (True, False):
            label = f"{kind}, context tools {'on' if tools else 'off'}"
            rows += await measure(kind, label, tools, repeat, concurrent_runs)
    print_table("engine overhead (scripted provider, pace 0)", rows,
                ["store", "bench", "runs", "events/run", "events/s", "runs/s", "p50 ms", "p99 ms", "CPU ms/visit"])


async def measure(kind: str, label: str, tools: bool, repeat: int, concurrent_runs: int) -> list[dict[str, Any]]:
    """Both benches on a fresh store of one kind."""
    workdir = Path(tempfile.mkdtemp(prefix="flowtrail-engine-bench-"))
    store = Store(kind, workdir)
    settings = Settings(data_dir=workdir / "data", store=StoreSettings(database_url=store.url),
                        engine=replace(EngineSettings(), scripted_pace_seconds=0.0),
                        context=ContextSettings(enabled=tools))
    services = build_services(settings, encode_frame=encode_frame)
    try:
        await services.start()
        tune_collector()  # as the server does at start-up
        return [await one_run(services, label, repeat), await concurrent(services, label, concurrent_runs)]
    finally:
        await services.close()
        store.drop()
        shutil.rmtree(workdir, ignore_errors=True)


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--repeat", type=int, default=5, help="runs of the chain workflow per store")
    parser.add_argument("--concurrent", dest="concurrent_runs", type=int, default=50, help="concurrent demo-report runs")


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
