"""Append: stream chunks durably appended per second through RunWriter, beside a raw baseline.

Target (issue 2): on PostgreSQL, >= 0.5 of a raw asyncpg `executemany` of the same rows into a
table of the same shape, measured in the same run, counting chunks.

The writer side is the service as the server builds it (`build_services`, started: asyncpg
pool and, on PostgreSQL, the live tail), one run, one open visit; chunks are handed to
`RunWriter.stream` as fast as the loop allows (one `sleep(0)` between chunks), with the default
coalescing window, then flushed. Two chunk kinds:

* `step`     - never merged: every chunk becomes one event (batched per transaction);
* `thinking` - token deltas of ~5 bytes: consecutive chunks merge into one event per window.

The raw side writes one row per chunk (the mapper's own encoding of the same NodeStreamed
event): PostgreSQL - asyncpg `executemany` into a table of the library's shape (originator_id
uuid, originator_version bigint, topic text, state bytea, notification_id bigserial, primary
key (originator_id, originator_version), unique index on notification_id), once as one call
(one transaction) and once in 512-row transactions like the writer's; SQLite (for information)
- sqlite3 `executemany` in one transaction into the library's table shape, WAL mode, library
default synchronous. Rounds alternate raw and writer; the median round is printed.

    python -m bench.append [--store both|sqlite|postgres] [--chunks 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from bench.common import NODE_ID, Fleet, bench_main, median, open_run_visit, print_table, verdict

TARGET_RATIO = 0.5
BATCH = 512


def _content(kind: str, i: int) -> str:
    return f'{{"i":{i},"t":{time.time():.6f}}}' if kind == "step" else f"tok{i % 10} "


def _rows(mapper: Any, kind: str, n: int) -> list[tuple[uuid.UUID, int, str, bytes]]:
    """One stored row per chunk, as the library would store a NodeStreamed event of it."""
    from domain import events as ev

    run_id = uuid.uuid4()
    visit = uuid.uuid4().hex
    now = datetime.now(UTC)
    rows = []
    for v in range(1, n + 1):
        event = ev.NodeStreamed(
            originator_id=run_id,
            originator_version=v,
            timestamp=now,
            visit_uuid=visit,
            node_id=NODE_ID,
            kind=kind,
            content=_content(kind, v),
        )
        stored = mapper.to_stored_event(event)
        rows.append((run_id, v, stored.topic, stored.state))
    return rows


class PgRaw:
    """The raw asyncpg baseline on its own table in the bench schema."""

    def __init__(self, location: Any) -> None:
        self.location = location
        self.table = f'"{location.schema}"."raw_events"'

    async def __aenter__(self) -> Self:
        import asyncpg

        self.conn = await asyncpg.connect(**self.location.asyncpg_dsn())
        await self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (originator_id uuid NOT NULL, "
            "originator_version bigint NOT NULL, topic text, state bytea, notification_id bigserial, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
        await self.conn.execute(
            f"CREATE UNIQUE INDEX IF NOT EXISTS raw_events_notification_id ON {self.table} (notification_id)"
        )
        self.insert = (
            f"INSERT INTO {self.table} (originator_id, originator_version, topic, state) "
            "VALUES ($1, $2, $3, $4)"
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.conn.close()

    async def write(self, rows: list[Any], batch: int | None) -> float:
        """Seconds to write the rows: one executemany, or one per `batch` rows (each its own transaction)."""
        t0 = time.perf_counter()
        if batch is None:
            await self.conn.executemany(self.insert, rows)
        else:
            for start in range(0, len(rows), batch):
                await self.conn.executemany(self.insert, rows[start : start + batch])
        return time.perf_counter() - t0


class SqliteRaw:
    """The raw sqlite3 baseline: the library's table shape, WAL, one transaction."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id TEXT, originator_version INTEGER, "
            "topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
        )

    def write(self, rows: list[Any], batch: int | None) -> float:
        data = [(str(r[0]), r[1], r[2], r[3]) for r in rows]
        t0 = time.perf_counter()
        size = batch or len(data)
        for start in range(0, len(data), size):
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT INTO raw_events VALUES (?, ?, ?, ?)", data[start : start + size]
            )
            self.conn.execute("COMMIT")
        return time.perf_counter() - t0

    def close(self) -> None:
        self.conn.close()


async def writer_round(services: Any, kind: str, chunks: int) -> dict[str, float]:
    """Chunks/s and events/s of one run's writer: stream `chunks` chunks, flush."""

    run_id, writer, visit = await open_run_visit(services)
    v0 = writer.run.version
    stream = writer.stream
    sleep = asyncio.sleep
    t0 = time.perf_counter()
    for i in range(chunks):
        await stream(
            visit_uuid=visit, node_id=NODE_ID, kind=kind, content=_content(kind, i)
        )
        await sleep(0)
    await writer.flush()
    elapsed = time.perf_counter() - t0
    events = writer.run.version - v0
    await services.runs.release(run_id)
    services.hub.evict_idle(now=time.monotonic() + 1e9)
    return {"elapsed": elapsed, "events": events}


async def bench_store(
    fleet: Fleet, kind: str, chunks: int, rounds: int
) -> list[dict[str, Any]]:
    from api.sse import encode_frame
    from engine.bootstrap import build_services, tune_collector
    from engine.settings import Settings, StoreSettings

    store = fleet.store(kind)
    settings = Settings(
        data_dir=fleet.workdir / "data",
        store=StoreSettings(database_url=store.url),
        load_demos=False,
    )
    services = build_services(settings, encode_frame=encode_frame)
    await services.start()
    tune_collector()  # as the server does at start-up
    mapper = services.store.mapper
    rows_out: list[dict[str, Any]] = []
    try:
        raw_pg = PgRaw(services.store.location) if kind == "postgres" else None
        raw_lite = SqliteRaw(fleet.workdir / "raw.db") if kind == "sqlite" else None
        if raw_pg is not None:
            await raw_pg.__aenter__()
        for chunk_kind in ("step", "thinking"):
            raw_one: list[float] = []
            raw_batched: list[float] = []
            writer_rates: list[float] = []
            writer_events: list[float] = []
            await writer_round(services, chunk_kind, min(chunks, 2000))  # warm-up
            for _ in range(rounds):
                rows = _rows(mapper, chunk_kind, chunks)
                if raw_pg is not None:
                    raw_one.append(chunks / await raw_pg.write(rows, None))
                    raw_batched.append(
                        chunks
                        / await raw_pg.write(_rows(mapper, chunk_kind, chunks), BATCH)
                    )
                else:
                    assert raw_lite is not None
                    raw_one.append(chunks / raw_lite.write(rows, None))
                    raw_batched.append(
                        chunks
                        / raw_lite.write(_rows(mapper, chunk_kind, chunks), BATCH)
                    )
                got = await writer_round(services, chunk_kind, chunks)
                writer_rates.append(chunks / got["elapsed"])
                writer_events.append(got["events"] / got["elapsed"])
            ratio = median(writer_rates) / median(raw_one)
            rows_out.append(
                {
                    "store": kind,
                    "chunks": chunk_kind,
                    "raw 1 txn rows/s": median(raw_one),
                    "raw 512/txn rows/s": median(raw_batched),
                    "writer chunks/s": median(writer_rates),
                    "writer events/s": median(writer_events),
                    "ratio": ratio,
                    "ratio vs 512/txn": median(writer_rates) / median(raw_batched),
                    "target 0.5": verdict(ratio, TARGET_RATIO, at_least=True)
                    if kind == "postgres"
                    else "(info)",
                }
            )
        if raw_pg is not None:
            await raw_pg.__aexit__()
        if raw_lite is not None:
            raw_lite.close()
    finally:
        await services.close()
    return rows_out


async def run(
    kinds: list[str], chunks: int = 20_000, rounds: int = 3
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    async with Fleet("append") as fleet:
        for kind in kinds:
            rows.extend(await bench_store(fleet, kind, chunks, rounds))
    print_table(
        f"Append: {chunks:,} chunks per round through RunWriter vs raw executemany (median of {rounds})",
        rows,
    )
    return rows


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
