"""Listing: the latency of one page of `GET /api/v1/runs` at 1k, 10k and 100k runs, both stores.

Target (issue 14): p99 <= 10 ms at 100,000 runs on PostgreSQL.

The service is built and served as `flowtrail serve` does (uvicorn, the app from `create_app`);
the run rows are written straight into the read model's table (`RunRows.put`, 5,000 a
transaction: folding 100,000 real runs would take the bench an hour), spread over 5 workflows
and 3 owner keys, one a second, a quarter of them in each status; on PostgreSQL the table is
ANALYZEd after each fill, as autovacuum would. At each size, each query is asked `--requests`
times over one keep-alive httpx connection (the first 10 are warm-up); the figures are the
client-side latency of the whole HTTP answer, and beside it the read model's query alone
(`ReadModel.page`, in the server's loop). Queries:

* `newest`      - the first page (limit 50), a key that sees all runs;
* `deep`        - a page from a cursor half-way down the whole listing;
* `status`      - `status=FAILED`;
* `workflow`    - `GET /workflows/{name}/runs` (one of the 5);
* `own+status`  - a key that sees only its own runs, `status=RUNNING`, limit 200;
* `after`       - `createdAfter` an hour before the newest run (the last 3,600 runs).

A second table prices the synchronous feed (decision 21): the latency of appending one
`RunStarted` to a run, `--requests` times, through a bare `EventStore` without the feed, with it
after the append's commit (`after_append`, as the service wires it on PostgreSQL) and, on SQLite,
in the append's own transaction (`within_append`, as the service wires it there).

    python -m bench.listing [--store both|sqlite|postgres] [--sizes 1000,10000,100000] [--requests 300]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from api.listing import encode_cursor
from bench.cli import bench_main
from bench.figures import ms, percentile, print_table, verdict
from bench.machine import free_port
from bench.service import Service, settings_for
from bench.stores import Store
from domain import events as ev
from engine.access import ApiKey
from engine.readmodel import RunQuery, run_rows
from engine.readmodel.table import micros
from engine.store import EventStore, parse_database_url
from projections.run_row import RunRow

TARGET_P99_MS = 10.0
WARM_UP = 10
FILL_BATCH = 5000
WORKFLOWS = ("alpha", "bravo", "charlie", "delta", "echo")
OWNERS = ("ops", "team-a", "team-b")
STATUSES = ("CREATED", "RUNNING", "SUCCESS", "FAILED")
KEYS = (ApiKey(key="bench-all", id="ops", sees_all_runs=True), ApiKey(key="bench-own", id="team-a"))
START = datetime(2026, 1, 1, tzinfo=UTC)


def bench_row(n: int) -> RunRow:
    """The n-th run of the bench listing (one a second from START)."""
    status = STATUSES[n % 4]
    created = START + timedelta(seconds=n)
    done = status in ("SUCCESS", "FAILED")
    return RunRow(
        run_id=uuid.UUID(int=(n * 2_654_435_761) % 2**128).hex, workflow_name=WORKFLOWS[n % 5],
        workflow_id=1 + n % 5, workflow_version=1, owner_key_id=OWNERS[n % 3], status=status,  # type: ignore[arg-type]  # one of STATUSES
        cancel_requested=False, cancelled=False, created_at=created,
        started_at=created if status != "CREATED" else None, completed_at=created + timedelta(seconds=5) if done else None,
        error_code="RUN_FAILED" if status == "FAILED" else None, prompt_tokens=n % 1000, completion_tokens=n % 100,
        last_event_id=4,
    )


def fill(service: Service, kind: str, have: int, want: int) -> None:
    """Write rows have..want-1 into the table, then let PostgreSQL's planner see them."""
    rows = service.read_model.rows
    for first in range(have, want, FILL_BATCH):
        rows.put([bench_row(n) for n in range(first, min(want, first + FILL_BATCH))])
    if kind == "postgres":
        with rows.recorder.datastore.transaction(commit=True) as curs:
            curs.execute(f"ANALYZE {service.read_model.reader.table}")


def queries(size: int, deep_cursor: str) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """name -> (key, path, params)."""
    newest = START + timedelta(seconds=size - 1)
    return {
        "newest": ("bench-all", "/api/v1/runs", {"limit": 50}),
        "deep": ("bench-all", "/api/v1/runs", {"limit": 50, "cursor": deep_cursor}),
        "status": ("bench-all", "/api/v1/runs", {"status": "FAILED"}),
        "workflow": ("bench-all", "/api/v1/workflows/charlie/runs", {}),
        "own+status": ("bench-own", "/api/v1/runs", {"status": "RUNNING", "limit": 200}),
        "after": ("bench-all", "/api/v1/runs", {"createdAfter": (newest - timedelta(hours=1)).isoformat()}),
    }


def model_query(name: str, size: int, deep: tuple[int, str]) -> RunQuery:
    """The read model's query behind each HTTP query (what the handler builds)."""
    newest = START + timedelta(seconds=size - 1)
    return {
        "newest": RunQuery(limit=50),
        "deep": RunQuery(limit=50, before=deep),
        "status": RunQuery(limit=50, statuses=("FAILED",)),
        "workflow": RunQuery(limit=50, workflow_id=3),
        "own+status": RunQuery(limit=200, owner_key_id="team-a", statuses=("RUNNING",)),
        "after": RunQuery(limit=50, created_after_us=micros(newest - timedelta(hours=1))),
    }[name]


async def timed_http(client: httpx.AsyncClient, key: str, path: str, params: dict[str, Any], n: int) -> list[float]:
    """Latencies (s) of n GETs after the warm-up; every answer must be a full page or the last one."""
    took = []
    for i in range(n + WARM_UP):
        began = time.perf_counter()
        response = await client.get(path, params=params, headers={"X-API-Key": key})
        elapsed = time.perf_counter() - began
        assert response.status_code == 200, response.text
        if i >= WARM_UP:
            took.append(elapsed)
    return took


async def timed_query(service: Service, query: RunQuery, n: int) -> list[float]:
    """Latencies (s) of the read model's query alone."""
    took = []
    for i in range(n + WARM_UP):
        began = time.perf_counter()
        await service.read_model.page(query)
        if i >= WARM_UP:
            took.append(time.perf_counter() - began)
    return took


async def run_store(kind: str, sizes: list[int], requests: int) -> list[dict[str, Any]]:
    """Figures for one store kind at each size."""
    store = Store(kind, Path(tempfile.mkdtemp(prefix="flowtrail-listing-")))
    port = free_port()
    settings = replace(settings_for(store, store.workdir / "data", port=port, load_demos=False), api_keys=KEYS)
    service, results, have = Service(settings), [], 0
    try:
        async with service.serving():
            for name in WORKFLOWS:
                await service.publish(_flow(name))  # ids 1..5 in this order, as the rows say
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client:
                for size in sizes:
                    fill(service, kind, have, size)
                    have = size
                    middle = bench_row(size // 2)
                    deep = (micros(middle.created_at) or 0, middle.run_id)
                    for name, (key, path, params) in queries(size, encode_cursor(middle)).items():
                        http = await timed_http(client, key, path, params, requests)
                        alone = await timed_query(service, model_query(name, size, deep), requests)
                        results.append({
                            "store": kind, "runs": size, "query": name,
                            "HTTP p50 ms": ms(percentile(http, 50)), "HTTP p99 ms": ms(percentile(http, 99)),
                            "query p50 ms": ms(percentile(alone, 50)), "query p99 ms": ms(percentile(alone, 99)),
                        })
    finally:
        store.drop()
    return results


def append_latencies(kind: str, n: int) -> list[dict[str, Any]]:
    """p50/p99 of one-event appends without and with the read model's feed."""
    store = Store(kind, Path(tempfile.mkdtemp(prefix="flowtrail-feed-")))
    figures = []
    try:
        log = EventStore(parse_database_url(store.url))
        rows = run_rows(log)

        def fed_within(curs: Any, events: Sequence[Any], ids: list[int]) -> bool:
            rows.apply_in(curs, events, ids[-1], track=kind == "sqlite")
            return True

        feeds = ("without", "after its commit", "in its transaction")
        for feed in feeds:
            log.after_append = ((lambda events, ids: rows.apply(events, ids[-1], track=kind == "sqlite"))
                                if feed == "after its commit" else None)
            log.within_append = fed_within if feed == "in its transaction" else None
            took = []
            for _ in range(n + WARM_UP):
                run_id, now = uuid.uuid4(), datetime.now(UTC)
                log.append_to_stream([ev.RunCreated(
                    originator_id=run_id, originator_version=1, timestamp=now, workflow_id=1, workflow_name="alpha",
                    workflow_version=1, display_name="Alpha", mode="DAG", caller_key_id="ops",
                )])
                began = time.perf_counter()
                log.append_to_stream([ev.RunStarted(originator_id=run_id, originator_version=2, timestamp=now)])
                took.append(time.perf_counter() - began)
            took = took[WARM_UP:]
            figures.append({"store": kind, "feed": feed,
                            "append p50 ms": ms(percentile(took, 50)), "append p99 ms": ms(percentile(took, 99))})
        log.close()
    finally:
        store.drop()
    return figures


def _flow(name: str) -> dict[str, Any]:
    return {
        "name": name, "displayName": name.title(), "mode": "DAG",
        "nodes": [{"id": "input", "type": "userInput", "data": {"inputs": [{"name": "topic"}]}},
                  {"id": "done", "type": "output", "data": {"outputs": [{"name": "topic", "value": "{{topic}}"}]}}],
        "edges": [{"source": "input", "target": "done"}],
    }


async def run(kinds: list[str], sizes: str, requests: int) -> list[dict[str, Any]]:
    """Every store kind; prints the table and the verdict on the target."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a log line per request would be measured too
    wanted = [int(s) for s in sizes.split(",")]
    results = []
    for kind in kinds:
        results.extend(await run_store(kind, wanted, requests))
    print_table("Listing: one page of GET /api/v1/runs", results)
    print_table("Appending one event, without and with the read model's feed",
                [f for kind in kinds for f in append_latencies(kind, requests)])
    largest = [r for r in results if r["store"] == "postgres" and r["runs"] == max(wanted)]
    if largest:
        worst = max(r["HTTP p99 ms"] for r in largest)
        print(f"\nPostgreSQL at {max(wanted):,} runs: worst HTTP p99 {worst:.2f} ms "
              f"(target <= {TARGET_P99_MS} ms): {verdict(worst, TARGET_P99_MS, at_least=False)}")
    return results


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated run counts, ascending")
    parser.add_argument("--requests", type=int, default=300, help="timed requests per query and size")


if __name__ == "__main__":
    bench_main(run, _args, __doc__ or "")
