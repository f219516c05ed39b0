"""Pages of the run listing: one indexed keyset query, newest first, over asyncpg or read-only SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from engine.readmodel.table import COLUMNS, row_of
from engine.store.sqlite_reads import ReadOnlyConnections
from projections.run_row import RunRow

WAITING = "WAITING"
"""The listing's status filter for runs that wait for a person's answer (their status is RUNNING)."""


@dataclass(frozen=True)
class RunQuery:
    """Which runs one page lists: the caller's visibility, the filters and the keyset position."""

    limit: int
    owner_key_id: str | None = None
    """Only this key's runs (None: the key sees all runs)."""
    scope_names: tuple[str, ...] = ()
    scope_ids: tuple[int, ...] = ()
    """The key's workflow scope (both empty: every workflow)."""
    workflow_id: int | None = None
    workflow_name: str | None = None
    statuses: tuple[str, ...] = ()
    """Only rows in these statuses; `WAITING` stands for the runs that wait for an answer."""
    error_codes: tuple[str, ...] = ()
    created_after_us: int | None = None
    created_before_us: int | None = None
    before: tuple[int, str] | None = None
    """The keyset position: rows strictly older than (created_us, run_id)."""
    forked_from: str | None = None
    """Only the forks of this run (its id, hex)."""


@dataclass
class _Sql:
    """A WHERE clause under construction, with placeholders of one dialect."""

    mark: Callable[[int], str]
    where: list[str] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)

    def arg(self, value: Any) -> str:
        self.args.append(value)
        return self.mark(len(self.args))

    def equal(self, column: str, value: Any) -> None:
        if value is not None:
            self.where.append(f"{column} = {self.arg(value)}")

    def among(self, column: str, values: tuple[Any, ...]) -> str:
        return f"{column} IN ({', '.join(self.arg(v) for v in values)})"


def page_sql(query: RunQuery, table: str, mark: Callable[[int], str]) -> tuple[str, list[Any]]:
    """The SELECT of one page (one row more than `limit`, to know whether another page follows)."""
    sql = _Sql(mark)
    sql.equal("owner_key_id", query.owner_key_id)
    sql.equal("workflow_id", query.workflow_id)
    sql.equal("workflow_name", query.workflow_name)
    sql.equal("forked_from_run_id", query.forked_from)
    scope = [sql.among(c, v) for c, v in (("workflow_name", query.scope_names), ("workflow_id", query.scope_ids)) if v]
    if scope:
        sql.where.append(f"({' OR '.join(scope)})")
    if query.statuses:
        sql.where.append(_status_clause(sql, query.statuses))
    if query.error_codes:
        sql.where.append(sql.among("error_code", query.error_codes))
    if query.created_after_us is not None:
        sql.where.append(f"created_us > {sql.arg(query.created_after_us)}")
    if query.created_before_us is not None:
        sql.where.append(f"created_us < {sql.arg(query.created_before_us)}")
    if query.before is not None:
        sql.where.append(f"(created_us, run_id) < ({sql.arg(query.before[0])}, {sql.arg(query.before[1])})")
    where = f" WHERE {' AND '.join(sql.where)}" if sql.where else ""
    limit = sql.arg(query.limit + 1)
    text = f"SELECT {', '.join(COLUMNS)} FROM {table}{where} ORDER BY created_us DESC, run_id DESC LIMIT {limit}"
    return text, sql.args


def _status_clause(sql: _Sql, statuses: tuple[str, ...]) -> str:
    """Rows in one of the statuses, or waiting for an answer when `WAITING` is among them."""
    stored = tuple(status for status in statuses if status != WAITING)
    either = [sql.among("status", stored)] if stored else []
    if WAITING in statuses:
        either.append("waiting_us IS NOT NULL")
    return either[0] if len(either) == 1 else f"({' OR '.join(either)})"


def ended_before_sql(table: str, cutoff: str, limit: str) -> str:
    """Run ids of ended, unerased runs whose end is before `cutoff`, longest ended first (the retention index)."""
    return (
        f"SELECT run_id FROM {table} WHERE completed_us < {cutoff} AND erased_us IS NULL "
        f"ORDER BY completed_us LIMIT {limit}"
    )


class PostgresRowReader:
    """Reads pages and rows with the store's asyncpg pool."""

    def __init__(self, pool: Callable[[], asyncpg.Pool | None], table: str) -> None:
        self._pool = pool
        self.table = table

    async def page(self, query: RunQuery) -> list[RunRow]:
        """One page of rows, newest first (up to limit + 1)."""
        text, args = page_sql(query, self.table, lambda n: f"${n}")
        return [row_of(tuple(r)) for r in await self._fetch(text, *args)]

    async def row(self, run_id: str) -> RunRow | None:
        """One run's stored row."""
        found = await self._fetch(f"SELECT {', '.join(COLUMNS)} FROM {self.table} WHERE run_id = $1", run_id)
        return row_of(tuple(found[0])) if found else None

    async def ended_before(self, cutoff_us: int, limit: int) -> list[str]:
        """Runs that ended before a time and are not erased, the longest ended first (at most `limit`)."""
        return [r[0] for r in await self._fetch(ended_before_sql(self.table, "$1", "$2"), cutoff_us, limit)]

    async def _fetch(self, text: str, *args: Any) -> list[asyncpg.Record]:
        pool = self._pool()
        assert pool is not None, "the store is not started"
        rows: list[asyncpg.Record] = await pool.fetch(text, *args)
        return rows

    def close(self) -> None:
        """Nothing of its own to close (the pool is the store's)."""


class SqliteRowReader:
    """Reads pages and rows on a read-only connection per reader thread."""

    def __init__(self, path: Path, table: str, *, threads: int = 2) -> None:
        self.table = table
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="flowtrail-rows")
        self._connections = ReadOnlyConnections(path)

    def _fetch(self, text: str, args: list[Any]) -> list[RunRow]:
        return [row_of(r) for r in self._connections.get().execute(text, args).fetchall()]

    def _ids(self, text: str, args: list[Any]) -> list[str]:
        return [r[0] for r in self._connections.get().execute(text, args).fetchall()]

    async def ended_before(self, cutoff_us: int, limit: int) -> list[str]:
        """Runs that ended before a time and are not erased, the longest ended first (at most `limit`)."""
        text = ended_before_sql(self.table, "?", "?")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._ids, text, [cutoff_us, limit])

    async def page(self, query: RunQuery) -> list[RunRow]:
        """One page of rows, newest first (up to limit + 1)."""
        text, args = page_sql(query, self.table, lambda n: "?")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._fetch, text, args)

    async def row(self, run_id: str) -> RunRow | None:
        """One run's stored row."""
        text = f"SELECT {', '.join(COLUMNS)} FROM {self.table} WHERE run_id = ?"
        found = await asyncio.get_running_loop().run_in_executor(self._executor, self._fetch, text, [run_id])
        return found[0] if found else None

    def close(self) -> None:
        """Stop the reader threads and close their connections."""
        self._executor.shutdown(wait=True)
        self._connections.close()
