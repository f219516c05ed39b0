"""The event store for async code: writes on worker threads, reads through asyncpg or read-only SQLite.

Every read and write is retried while the store is away (connection lost or refused, server
restarting, disk full or read-only, file locked) for as long as the caller may wait
(engine.store.retries).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from uuid import UUID

import asyncpg

from domain.chain import ChainCells
from engine.observability.metrics import APPEND_SECONDS, EVENTS_APPENDED, STORE_ERRORS
from engine.store.append_groups import AppendGroups, unheard
from engine.store.deadline import REQUEST_DEADLINE
from engine.store.event_store import ConcurrentAppend, EventStore, StoreUnavailable
from engine.store.faults import outage_of
from engine.store.retries import LEAST_ATTEMPT_SECONDS, RETRY_SECONDS, StoreRetries
from engine.store.sqlite_reads import LINE_COLUMNS, LineRow, Row, SqliteStreamReader
from engine.store.url import qualified_table

logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)  # its reconnect tracebacks; the outage is logged once
T = TypeVar("T")
StoredLine = tuple[int, bytes, ChainCells | None]
"""(position, the event's JSON as stored, its chain cells or None when it was stored before the chain)."""


def chain_cells(link: bytes | None, skeleton: bytes | None, content: bytes | None) -> ChainCells | None:
    """The chain cells of a stored row (None: stored before the chain existed)."""
    if link is None:
        return None
    return ChainCells(bytes(link), None if skeleton is None else bytes(skeleton), None if content is None else bytes(content))


class _Abandoned(Exception):
    """The caller stopped waiting before a queued attempt began; it is not made."""


class AsyncEventStore:
    """The event store for async code: never blocks the event loop."""

    def __init__(self, store: EventStore, *, write_threads: int = 4, retry_seconds: float = RETRY_SECONDS) -> None:
        self.sync = store
        self.outage = outage_of(store.location)
        self.retries = StoreRetries(self.outage, retry_seconds)
        self.location = store.location
        self.mapper = store.mapper
        self._executor = ThreadPoolExecutor(write_threads, thread_name_prefix="flowtrail-store")
        self.groups = AppendGroups(store.append_together, self._executor)
        self.pool: asyncpg.Pool | None = None
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
        self._select_lines = (
            f"SELECT {LINE_COLUMNS} FROM {table} "
            "WHERE originator_id = $1 AND originator_version > $2 ORDER BY originator_version LIMIT $3"
        )
        self._select_head = (
            f"SELECT originator_version, chain_link FROM {table} WHERE originator_id = $1 "
            "ORDER BY originator_version DESC LIMIT 1"
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

    # ---- retries and threads -------------------------------------------------------------

    async def bounded(self, attempt: Callable[[], Awaitable[T]], what: str, *, write: bool = False) -> T:
        """`attempt()` retried while the store is away, within the caller's time (engine.store.retries)."""
        return await self.retries.bounded(attempt, what, write=write)

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await self._attempt_on(self._executor, fn, *args)

    async def _on_reader(self, fn: Any, *args: Any) -> Any:
        assert self.sqlite is not None
        return await self._attempt_on(self.sqlite.executor, fn, *args)

    async def _attempt_on(self, executor: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
        """One attempt on a worker thread; if the caller stops waiting before it began, it is not made."""
        abandoned = threading.Event()

        def attempt() -> Any:
            if abandoned.is_set():
                raise _Abandoned()
            return fn(*args)

        running = asyncio.get_running_loop().run_in_executor(executor, attempt)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            abandoned.set()
            running.add_done_callback(unheard)
            raise

    async def _write_on_thread(self, fn: Callable[[], T]) -> T:
        """One write attempt on a writer thread. In a request, an attempt still queued at the deadline is
        dropped (TimeoutError); one that has begun is waited for, so its outcome is always known."""
        deadline = REQUEST_DEADLINE.get()
        gate = threading.Lock()
        began, dropped = threading.Event(), threading.Event()

        def attempt() -> T:
            with gate:
                if dropped.is_set():
                    raise _Abandoned()
                began.set()
            return fn()

        running = asyncio.get_running_loop().run_in_executor(self._executor, attempt)
        if deadline is not None:
            done, _ = await asyncio.wait({running}, timeout=max(deadline - time.monotonic(), LEAST_ATTEMPT_SECONDS))
            if not done:
                with gate:
                    if not began.is_set():
                        dropped.set()
                if dropped.is_set():
                    running.add_done_callback(unheard)
                    raise TimeoutError("the write waited past the request's deadline for a writer thread")
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            running.add_done_callback(unheard)
            raise

    # ---- writes --------------------------------------------------------------------------

    async def append_to_stream(self, events: Sequence[Any]) -> list[int]:
        """Append events durably at their streams' positions (all or none); returns their notification ids.

        Appends made while the store writes go to it together (engine.store.append_groups).

        A caller that is cancelled does not cut the append short: it goes on (retries included)
        and this process learns its ids.
        """
        saving = asyncio.ensure_future(self._append_with_retries(list(events)))
        self._appending.add(saving)
        saving.add_done_callback(self._settled)
        began = time.perf_counter()
        try:
            ids: list[int] = await asyncio.shield(saving)
        except Exception as error:
            if not isinstance(error, (ConcurrentAppend, StoreUnavailable)):  # a lost race is an answer, and an
                STORE_ERRORS.labels("append").inc()  # outage's attempts were counted as they failed
            raise
        APPEND_SECONDS.observe(time.perf_counter() - began)
        EVENTS_APPENDED.inc(len(events))
        return ids

    def _settled(self, saving: asyncio.Future[list[int]]) -> None:
        self._appending.discard(saving)
        unheard(saving)  # its caller may have been cancelled; the failure is the caller's or the outage's

    async def _append_with_retries(self, events: list[Any]) -> list[int]:
        tries = 0

        async def attempt() -> list[int]:
            nonlocal tries
            tries += 1
            retried = tries > 1
            return await self.groups.append(events, retried=retried, deadline=REQUEST_DEADLINE.get())

        return await self.bounded(attempt, "append", write=True)

    async def erase_stream(self, stream_id: UUID, closing: Callable[[int], Any]) -> Any:
        """Erase a stream's content and append the event `closing(count)` makes, in one transaction
        (`EventStore.erase_stream`); returns that event. Retried while the store is away: an attempt that
        committed unheard makes the retry find its position taken (ConcurrentAppend), so the caller reads the log."""
        event, _ = await self.bounded(
            lambda: self._write_on_thread(lambda: self.sync.erase_stream(stream_id, closing)), "erase", write=True,
        )
        return event

    async def forget_erased_bytes(self) -> None:
        """Make sure bytes erased earlier are in no log file (SQLite: empty the write-ahead log; PostgreSQL: nothing)."""
        if self.sqlite is not None:
            await self.bounded(lambda: self._write_on_thread(self.sync.forget_erased_bytes), "erase", write=True)

    @asynccontextmanager
    async def exclusively(self, lock: int) -> AsyncIterator[bool]:
        """Hold a lock of the whole store while the block runs, if no other process holds it: yields whether this
        one does (PostgreSQL: a session advisory lock, released with its connection if the process dies; SQLite:
        one process owns the store, always True)."""
        if self.pool is None:
            yield True
            return
        async with self.pool.acquire() as connection:
            held = bool(await connection.fetchval("SELECT pg_try_advisory_lock($1)", lock))
            try:
                yield held
            finally:
                if held:
                    await connection.execute("SELECT pg_advisory_unlock($1)", lock)

    async def appends_done(self, timeout: float) -> None:
        """Wait until the appends this process has in flight now are stored (or failed), at most `timeout` seconds."""
        if self._appending:
            await asyncio.wait(set(self._appending), timeout=timeout)

    # ---- reads ---------------------------------------------------------------------------

    async def read_stream(self, stream_id: UUID, *, after: int = 0, limit: int | None = None) -> list[Any]:
        """A stream's events after a position, in order (at most `limit`)."""
        return await self.bounded(lambda: self._read_stream(stream_id, after, limit), "read")

    async def _read_stream(self, stream_id: UUID, after: int, limit: int | None) -> list[Any]:
        if self.sqlite is None and self.pool is None:
            return await self._in_thread(lambda: self.sync.read_stream(stream_id, after=after, limit=limit))
        decode = self.mapper.decode_state
        return [decode(state, topic, position) for position, topic, state in await self._read_rows(stream_id, after, limit)]

    async def read_rows(self, stream_id: UUID, *, after: int = 0, limit: int | None = None) -> list[Row]:
        """A stream's rows after a position as stored, (position, tag, JSON), in order (at most `limit`)."""
        return await self.bounded(lambda: self._read_rows(stream_id, after, limit), "read")

    async def _read_rows(self, stream_id: UUID, after: int, limit: int | None) -> list[Row]:
        if self.sqlite is not None:
            rows: list[Row] = await self._on_reader(self.sqlite.rows, stream_id, after, limit)
            return rows
        assert self.pool is not None, "the store is started"
        return [(position, topic, state)
                for position, topic, state in await self.pool.fetch(self._select_stream, stream_id, after, limit)]

    def decode_row(self, state: bytes, topic: str, position: int) -> Any:
        """The event a stored row holds."""
        return self.mapper.decode_state(state, topic, position)

    async def read_lines(self, stream_id: UUID, *, after: int = 0, limit: int | None = None) -> list[StoredLine]:
        """A stream's events after a position as stored: (position, JSON, chain cells or None), in order."""
        return await self.bounded(lambda: self._read_lines(stream_id, after, limit), "read")

    async def _read_lines(self, stream_id: UUID, after: int, limit: int | None) -> list[StoredLine]:
        rows: list[LineRow]
        if self.sqlite is not None:
            rows = await self._on_reader(self.sqlite.lines, stream_id, after, limit)
        else:
            assert self.pool is not None, "the store is started"
            rows = [tuple(r) for r in await self.pool.fetch(self._select_lines, stream_id, after, limit)]
        return [(position, bytes(state), chain_cells(link, skeleton, content))
                for position, state, link, skeleton, content in rows]

    async def chain_head(self, stream_id: UUID) -> tuple[int, bytes | None] | None:
        """(position, chain link or None) of a stream's last event; None when there is no such stream."""
        return await self.bounded(lambda: self._chain_head(stream_id), "read")

    async def _chain_head(self, stream_id: UUID) -> tuple[int, bytes | None] | None:
        if self.sqlite is not None:
            found: tuple[int, bytes | None] | None = await self._on_reader(self.sqlite.head, stream_id)
            return found
        assert self.pool is not None, "the store is started"
        row = await self.pool.fetchrow(self._select_head, stream_id)
        return None if row is None else (row[0], None if row[1] is None else bytes(row[1]))

    async def last_position(self, stream_id: UUID) -> int:
        """The position of a stream's last event (0: no such stream)."""
        return await self.bounded(lambda: self._last_position(stream_id), "read")

    async def _last_position(self, stream_id: UUID) -> int:
        if self.sqlite is not None:
            return int(await self._on_reader(self.sqlite.last_position, stream_id))
        if self.pool is None:
            return int(await self._in_thread(self.sync.last_position, stream_id))
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
        found: list[Any] = await self.bounded(lambda: self._in_thread(self.sync.read_all, tag), "read")
        return found

    async def last_notification_id(self) -> int:
        """The newest position in the whole log (0 when empty)."""
        return int(await self.bounded(lambda: self._in_thread(self.sync.last_notification_id), "read"))

    async def close(self) -> None:
        """Close the pool, the threads and the library's connections."""
        if self.pool is not None:
            await self.pool.close()
        if self.sqlite is not None:
            self.sqlite.close()
        self._executor.shutdown(wait=True)
        self.sync.close()
