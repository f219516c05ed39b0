"""The event store for async code: writes on worker threads, reads through asyncpg or read-only SQLite."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

import asyncpg

from engine.observability.metrics import APPEND_SECONDS, EVENTS_APPENDED, STORE_ERRORS
from engine.store.event_store import ConcurrentAppend, EventStore
from engine.store.location import qualified_table
from engine.store.sqlite_reads import SqliteStreamReader


class AsyncEventStore:
    """The event store for async code: never blocks the event loop."""

    def __init__(self, store: EventStore, *, write_threads: int = 4) -> None:
        self.sync = store
        self.location = store.location
        self.mapper = store.mapper
        self._executor = ThreadPoolExecutor(write_threads, thread_name_prefix="flowtrail-store")
        self.pool: asyncpg.Pool | None = None
        self.on_appended: Callable[[list[int]], None] | None = None
        self._appending: set[asyncio.Future[list[int]]] = set()
        self.sqlite: SqliteStreamReader | None = None
        if self.location.kind == "sqlite":
            assert self.location.sqlite_path is not None
            self.sqlite = SqliteStreamReader(self.location.sqlite_path, store.events_table)
        table = qualified_table(self.location.schema, store.events_table)
        self._select_stream = (
            f"SELECT originator_version, topic, state FROM {table} "
            "WHERE originator_id = $1 AND originator_version > $2 ORDER BY originator_version LIMIT $3"
        )
        self._select_last = f"SELECT COALESCE(MAX(originator_version), 0) FROM {table} WHERE originator_id = $1"
        self._select_any = f"SELECT 1 FROM {table} LIMIT 1"

    async def start(self) -> None:
        """Open the asyncpg pool on PostgreSQL, then warm the read path."""
        if self.location.kind == "postgres":
            self.pool = await asyncpg.create_pool(min_size=1, max_size=4, **self.location.asyncpg_dsn())
        await self._warm_reads()

    async def _warm_reads(self) -> None:
        """Start the reader threads, open their connections and prepare the statements now,
        so the first reconnect after a start does not pay for them."""
        nobody = UUID(int=0)
        await asyncio.gather(
            self.read_stream(nobody, limit=1), self.read_stream(nobody, limit=1), self.last_position(nobody)
        )

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _on_reader(self, fn: Any, *args: Any) -> Any:
        assert self.sqlite is not None
        return await asyncio.get_running_loop().run_in_executor(self.sqlite.executor, fn, *args)

    async def append_to_stream(self, events: Sequence[Any]) -> list[int]:
        """Append events durably at their streams' positions (all or none); returns their notification ids."""
        saving = asyncio.get_running_loop().run_in_executor(self._executor, self.sync.append_to_stream, list(events))
        self._appending.add(saving)
        saving.add_done_callback(self._appended)
        began = time.perf_counter()
        try:
            ids: list[int] = await saving
        except Exception as error:
            if not isinstance(error, ConcurrentAppend):  # a lost race is an answer, not a store failure
                STORE_ERRORS.labels("append").inc()
            raise
        APPEND_SECONDS.observe(time.perf_counter() - began)
        EVENTS_APPENDED.inc(len(events))
        return ids

    def _appended(self, saving: asyncio.Future[list[int]]) -> None:
        self._appending.discard(saving)
        if self.on_appended is not None and not saving.cancelled() and saving.exception() is None:
            self.on_appended(saving.result())

    async def appends_done(self) -> None:
        """Wait until the appends this process has in flight now are stored (or failed)."""
        if self._appending:
            await asyncio.wait(set(self._appending))

    async def read_stream(self, stream_id: UUID, *, after: int = 0, limit: int | None = None) -> list[Any]:
        """A stream's events after a position, in order (at most `limit`)."""
        if self.sqlite is not None:
            rows = await self._on_reader(self.sqlite.rows, stream_id, after, limit)
        elif self.pool is not None:
            rows = await self.pool.fetch(self._select_stream, stream_id, after, limit)
        else:
            return await self._in_thread(lambda: self.sync.read_stream(stream_id, after=after, limit=limit))
        decode = self.mapper.decode_state
        return [decode(state, topic, position) for position, topic, state in rows]

    async def last_position(self, stream_id: UUID) -> int:
        """The position of a stream's last event (0: no such stream)."""
        if self.sqlite is not None:
            return int(await self._on_reader(self.sqlite.last_position, stream_id))
        if self.pool is None:
            return await self._in_thread(self.sync.last_position, stream_id)
        return int(await self.pool.fetchval(self._select_last, stream_id))

    async def check_reachable(self, timeout: float) -> None:
        """Run a real query on the events table within `timeout` seconds; raises what the store raised (or TimeoutError)."""
        try:
            await asyncio.wait_for(self._query_the_events_table(), timeout)
        except Exception:
            STORE_ERRORS.labels("readiness").inc()
            raise

    async def _query_the_events_table(self) -> None:
        if self.pool is not None:
            await self.pool.fetchval(self._select_any)
        elif self.sqlite is not None:
            await self._on_reader(self.sqlite.check_readable)
        else:
            await self._in_thread(self.sync.last_notification_id)

    async def read_all(self, tag: str) -> list[Any]:
        """Every event with one tag across all streams, in log order."""
        found: list[Any] = await self._in_thread(self.sync.read_all, tag)
        return found

    async def last_notification_id(self) -> int:
        """The newest position in the whole log (0 when empty)."""
        return int(await self._in_thread(self.sync.last_notification_id))

    async def close(self) -> None:
        """Close the pool, the threads and the library's connections."""
        if self.pool is not None:
            await self.pool.close()
        if self.sqlite is not None:
            self.sqlite.close()
        self._executor.shutdown(wait=True)
        self.sync.close()
