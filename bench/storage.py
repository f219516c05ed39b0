"""Storage: bytes on disk per stored event, as runs accumulate, after erasing half of them, and after reclaiming space.

Runs of a typical shape (15 events: created with ~100 bytes of variables, started, one visit of
eight ~300-byte thinking chunks, a model call, the visit's and the run's ~300-byte outputs) are
appended straight through the event store (`EventStore.append_to_stream`, one transaction a run,
hash chain included), with no service around it. Bytes on disk are measured at a quarter, half
and all of `--runs`:

* SQLite: the database file plus its write-ahead log, after a TRUNCATE checkpoint;
* PostgreSQL: `pg_total_relation_size` of the events table (heap, TOAST and indexes).

Then every other run is erased (`EventStore.erase_stream`, as `DELETE` does: content rewritten
to skeletons in place, a `RunErased` event appended) and the bytes measured again, then after
the space is given back: SQLite `VACUUM`; PostgreSQL plain `VACUUM` and `VACUUM FULL`. "chain
B/event" is the raw size of the chain cells (link, skeleton and content digests) per event.

    python -m bench.storage [--store both|sqlite|postgres] [--runs 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from bench.cli import bench_main
from bench.figures import print_table
from bench.stores import PG_BASE, Store
from domain import events as ev
from engine.store import EventStore, parse_database_url
from engine.store.url import qualified_table

THINKING = "The tide tables for the estuary show two highs a day; the survey asks how much energy " * 3
OUTPUT = {"status": 200, "message": "ok", "data": {"summary": THINKING, "sources": ["a", "b", "c"]}}
AT = datetime(2026, 12, 1, tzinfo=UTC)


def one_run(run_id: UUID) -> list[ev.RunEvent]:
    """A run of 15 events, as the engine would store it."""
    at: dict[str, Any] = {"originator_id": run_id, "timestamp": AT}
    events: list[ev.RunEvent] = [
        ev.RunCreated(**at, originator_version=1, workflow_id=1, workflow_name="demo-report", workflow_version=1,
                      display_name="Report", mode="DAG", variables={"topic": "tidal energy in the estuary " * 3},
                      caller_key_id="bench"),
        ev.RunStarted(**at, originator_version=2),
        ev.VisitStarted(**at, originator_version=3, visit_uuid=run_id.hex, node_id="research", node_type="agent",
                        node_label="Research", iter_seq=1, sort_order=1),
    ]
    events += [ev.NodeStreamed(**at, originator_version=4 + i, visit_uuid=run_id.hex, node_id="research",
                               kind="thinking", content=THINKING) for i in range(8)]
    events += [
        ev.ModelCalled(**at, originator_version=12, visit_uuid=run_id.hex, node_id="research", model_id="gpt",
                       purpose="node", attempt=1, latency_ms=812.5, prompt_tokens=640, completion_tokens=210,
                       finish_reason="stop", prompt_sha256="ab" * 32),
        ev.VisitCompleted(**at, originator_version=13, visit_uuid=run_id.hex, node_id="research", output=OUTPUT),
        ev.VisitRecorded(**at, originator_version=14, visit_uuid=run_id.hex, node_id="research"),
        ev.RunCompleted(**at, originator_version=15, output=OUTPUT),
    ]
    return events


class Disk:
    """Bytes on disk of one store's events, and its ways to give space back."""

    def __init__(self, store: Store, log: EventStore) -> None:
        self.store = store
        self.log = log
        self.table = log.events_table

    def _pg(self, statement: str) -> Any:
        import psycopg

        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            cursor = conn.execute(statement)
            row = cursor.fetchone() if cursor.description else None
        return None if row is None else row[0]

    def _sqlite(self, statement: str) -> Any:
        import sqlite3

        assert self.log.location.sqlite_path is not None
        with sqlite3.connect(self.log.location.sqlite_path, isolation_level=None) as conn:
            row = conn.execute(statement).fetchone()
        return None if row is None else row[0]

    def bytes(self) -> int:
        """Bytes the events occupy on disk now."""
        if self.store.kind == "sqlite":
            self.log.forget_erased_bytes()
            path = self.log.location.sqlite_path
            assert path is not None
            return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        table = qualified_table(self.log.location.schema, self.table)
        return int(self._pg(f"SELECT pg_total_relation_size('{table}')"))

    def chain_bytes(self) -> int:
        """Raw bytes of the chain cells of every event."""
        size = "length" if self.store.kind == "sqlite" else "octet_length"
        table = f'"{self.table}"' if self.store.kind == "sqlite" else qualified_table(self.log.location.schema, self.table)
        statement = (f"SELECT SUM(COALESCE({size}(chain_link), 0) + COALESCE({size}(chain_skeleton), 0) "
                     f"+ COALESCE({size}(chain_content), 0)) FROM {table}")
        return int((self._sqlite if self.store.kind == "sqlite" else self._pg)(statement) or 0)

    def reclaims(self) -> list[tuple[str, Callable[[], None]]]:
        """The ways to give the space of erased content back, in order: (stage name, action)."""
        if self.store.kind == "sqlite":
            return [("after VACUUM", lambda: self._sqlite("VACUUM"))]
        table = qualified_table(self.log.location.schema, self.table)
        return [("after VACUUM", lambda: self._pg(f"VACUUM {table}")),
                ("after VACUUM FULL", lambda: self._pg(f"VACUUM FULL {table}"))]


def erase(log: EventStore, run_id: UUID) -> float:
    """Erase one run as DELETE does; seconds it took."""
    began = time.perf_counter()
    log.erase_stream(run_id, lambda count: ev.RunErased(
        originator_id=run_id, originator_version=16, timestamp=AT, erased_by="bench", events_erased=count))
    return time.perf_counter() - began


def measure(kind: str, runs: int) -> list[dict[str, Any]]:
    """Fill a fresh store, erase half of it, give the space back; a row of figures at each stage."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flowtrail-storage-") as workdir:
        store = Store(kind, Path(workdir))
        log = EventStore(parse_database_url(store.url))
        disk = Disk(store, log)
        events = 0

        def row(stage: str, count: int) -> None:
            size = disk.bytes()
            rows.append({"store": kind, "stage": stage, "runs": count, "events": events, "MB on disk": size / 1e6,
                         "B/event": size / events, "chain B/event": disk.chain_bytes() / events})

        try:
            run_ids: list[UUID] = []
            marks = {runs // 4, runs // 2, runs}
            began = time.perf_counter()
            for n in range(1, runs + 1):
                run_id = uuid4()
                log.append_to_stream(one_run(run_id))
                run_ids.append(run_id)
                events += 15
                if n in marks:
                    row("appended", n)
            appended_s = time.perf_counter() - began
            took = [erase(log, run_id) for run_id in run_ids[::2]]
            events += len(took)
            row(f"half erased ({statistics.median(took) * 1000:.1f} ms/run median)", runs)
            for stage, reclaim in disk.reclaims():
                reclaim()
                row(stage, runs)
            print(f"{kind}: appended {runs} runs in {appended_s:.1f} s, erased {len(took)} in {sum(took):.1f} s")
        finally:
            log.close()
            store.drop()
    return rows


async def run(kinds: list[str], runs: int) -> None:
    """Measure each store kind in turn and print one table."""
    rows = []
    for kind in kinds:
        rows += await asyncio.to_thread(measure, kind, runs)
    print_table(f"Bytes on disk per stored event ({runs} runs of 15 events; half erased)", rows)


def add_args(parser: argparse.ArgumentParser) -> None:
    """--runs."""
    parser.add_argument("--runs", type=int, default=10_000, help="runs to store (15 events each)")


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
