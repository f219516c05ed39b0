"""Async access to the log: writes on worker threads, reads through asyncpg on PostgreSQL."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence
from uuid import UUID

import asyncpg

from engine.sqlite_reads import SqliteStreamReader
from engine.store import EventLog


def qualified_table(schema: str, table: str) -> str:
    """A safely quoted schema.table name."""
    return '"{}"."{}"'.format(schema.replace('"', '""'), table.replace('"', '""'))


class AsyncLog:
    """The event log for async code: never blocks the event loop."""

    def __init__(self, log: EventLog, *, write_threads: int = 4) -> None:
        self.log = log
        self.location = log.location
        self.mapper = log.mapper
        self._executor = ThreadPoolExecutor(write_threads, thread_name_prefix="flowtrail-store")
        self.pool: asyncpg.Pool | None = None
        self.on_appended: Callable[[list[int]], None] | None = None
        self._appending: set[asyncio.Future[list[int]]] = set()
        self.sqlite: SqliteStreamReader | None = None
        if self.location.kind == "sqlite":
            assert self.location.sqlite_path is not None
            self.sqlite = SqliteStreamReader(self.location.sqlite_path, log.events_table)
        table = qualified_table(self.location.schema, log.events_table)
        self._select_stream = (
            f"SELECT originator_version, topic, state FROM {table} "
            "WHERE originator_id = $1 AND originator_version > $2 ORDER BY originator_version LIMIT $3"
        )
        self._select_last = f"SELECT COALESCE(MAX(originator_version), 0) FROM {table} WHERE originator_id = $1"

    async def start(self) -> None:
        """Open the asyncpg pool on PostgreSQL, then warm the read path."""
        if self.location.kind == "postgres":
            self.pool = await asyncpg.create_pool(min_size=1, max_size=4, **self.location.asyncpg_dsn())
        await self._warm_reads()

    async def _warm_reads(self) -> None:
        """Start the reader threads, open their connections and prepare the statements now,
        so the first reconnect after a start does not pay for them."""
        nobody = UUID(int=0)
        await asyncio.gather(self.read(nobody, limit=1), self.read(nobody, limit=1), self.last_position(nobody))

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _on_reader(self, fn: Any, *args: Any) -> Any:
        assert self.sqlite is not None
        return await asyncio.get_running_loop().run_in_executor(self.sqlite.executor, fn, *args)

    async def append(self, events: Sequence[Any]) -> list[int]:
        """Append events durably (all or none); returns their notification ids."""
        saving = asyncio.get_running_loop().run_in_executor(self._executor, self.log.append, list(events))
        self._appending.add(saving)
        saving.add_done_callback(self._appended)
        ids: list[int] = await saving
        return ids

    def _appended(self, saving: asyncio.Future[list[int]]) -> None:
        self._appending.discard(saving)
        if self.on_appended is not None and not saving.cancelled() and saving.exception() is None:
            self.on_appended(saving.result())

    async def appends_done(self) -> None:
        """Wait until the appends this process has in flight now are stored (or failed)."""
        if self._appending:
            await asyncio.wait(set(self._appending))

    async def read(self, stream_id: UUID, *, after: int = 0, limit: int | None = None) -> list[Any]:
        """A stream's events after a position, in order (at most `limit`)."""
        if self.sqlite is not None:
            rows = await self._on_reader(self.sqlite.rows, stream_id, after, limit)
        elif self.pool is not None:
            rows = await self.pool.fetch(self._select_stream, stream_id, after, limit)
        else:
            return await self._in_thread(lambda: self.log.read(stream_id, after=after, limit=limit))
        decode = self.mapper.decode_state
        return [decode(state, topic, position) for position, topic, state in rows]

    async def last_position(self, stream_id: UUID) -> int:
        """The position of a stream's last event (0: no such stream)."""
        if self.sqlite is not None:
            return int(await self._on_reader(self.sqlite.last_position, stream_id))
        if self.pool is None:
            return await self._in_thread(self.log.last_position, stream_id)
        return int(await self.pool.fetchval(self._select_last, stream_id))

    async def call(self, fn: Any, *args: Any) -> Any:
        """Run any synchronous store call on a worker thread."""
        return await self._in_thread(fn, *args)

    async def close(self) -> None:
        """Close the pool, the threads and the library's connections."""
        if self.pool is not None:
            await self.pool.close()
        if self.sqlite is not None:
            self.sqlite.close()
        self._executor.shutdown(wait=True)
        self.log.close()
