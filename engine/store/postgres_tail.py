"""Live tail of the PostgreSQL log: LISTEN on the library's channel, read new rows by position.

It lets a server process see events that another process appended. Rows this process
appended itself are skipped: the library inserts under an exclusive table lock, so
notification ids are handed out in commit order and each append's ids are one contiguous
range; once such a range is committed, every smaller id is committed or will never exist.
The store's writer thread notes each append's range in the append's own transaction, as soon as
the library has its ids (`EventStore.ids_taken`), so the range is known before the commit makes
its rows visible: the tail never reads them back, however busy the event loop is. (A range
whose transaction then fails is skipped harmlessly: those ids never appear.) On a wake-up the
tail also lets this process's appends in flight finish, but waits at most
OWN_APPENDS_WAIT_SECONDS: what other processes appended is never held back longer by this
process's own writes. An own row that is read all the same (written some other way) is
delivered like another process's (a hot run drops it by position).

When the connection is lost (the server restarted, our backend was terminated) the tail
reconnects with capped backoff and reads on from its cursor, so nothing committed in
between is missed; the outage is logged once, with the store's (`engine.store.faults`).
Any other failure of a read is logged and handled the same way, and a row it cannot decode
is logged and skipped: the tail never stops while the process serves.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import asyncpg

from engine.store.faults import first_line, is_passing, outage_of
from engine.store.mapper import MsgspecMapper
from engine.store.url import StoreLocation, qualified_table
from engine.waiting import wait_event

log = logging.getLogger("flowtrail.tail")
NO_LIMIT = 2**63 - 1
OWN_APPENDS_WAIT_SECONDS = 0.02
"""Longest wait for this process's appends in flight before the tail reads (docstring above)."""
FIRST_RECONNECT_SECONDS = 0.1
MAX_RECONNECT_SECONDS = 1.0


class PostgresTail:
    """Delivers newly committed events that `wanted(stream, position)` says yes to."""

    def __init__(
        self,
        location: StoreLocation,
        mapper: MsgspecMapper,
        *,
        wanted: Callable[[UUID, int], bool],
        deliver: Callable[[list[Any]], None],
        local_appends_done: Callable[[float], Awaitable[None]] | None = None,
        batch: int = 2000,
    ) -> None:
        self.location = location
        self.mapper = mapper
        self.wanted = wanted
        self.deliver = deliver
        self.local_appends_done = local_appends_done
        self.batch = batch
        self.cursor = 0
        table = qualified_table(location.schema, location.events_table)
        self._select_new = (
            f"SELECT notification_id, originator_id, originator_version, topic, state FROM {table} "
            "WHERE notification_id > $1 AND notification_id < $3 ORDER BY notification_id LIMIT $2"
        )
        self._own: list[tuple[int, int]] = []
        self._own_lock = threading.Lock()
        """`_own` is noted on the store's writer thread and read on the event loop."""
        self._select_max = f"SELECT COALESCE(MAX(notification_id), 0) FROM {table}"
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: asyncpg.Connection | None = None
        self.outage = outage_of(location)
        self.reconnects = 0

    async def start(self) -> None:
        """Start listening from the log's current end."""
        self._conn = await asyncpg.connect(**self.location.asyncpg_dsn())
        self.cursor = await self._conn.fetchval(self._select_max)
        await self._conn.add_listener(self.location.channel, self._notified)
        self._task = asyncio.create_task(self._run(), name="flowtrail-pg-tail")

    def _notified(self, *_: Any) -> None:
        self._wake.set()

    def appended_here(self, notification_ids: list[int]) -> None:
        """Note the ids of an append this process made, so the tail need not read them back (any thread)."""
        if notification_ids and notification_ids[-1] > self.cursor:
            with self._own_lock:
                bisect.insort(self._own, (notification_ids[0], notification_ids[-1]))

    def _skip_own(self) -> int | None:
        """Move the cursor past our own appends that follow it; the first id of the next one."""
        with self._own_lock:
            while self._own and self._own[0][0] <= self.cursor + 1:
                first, last = self._own.pop(0)
                self.cursor = max(self.cursor, last)
            return self._own[0][0] if self._own else None

    async def _run(self) -> None:
        while True:
            await wait_event(self._wake, 1.0)
            self._wake.clear()
            try:
                if self.local_appends_done is not None:
                    await self.local_appends_done(OWN_APPENDS_WAIT_SECONDS)
                await self._drain()
            except Exception as exc:  # a tail that stopped would silently stop every live stream
                if is_passing(exc):
                    self.outage.failed(exc, "live tail")
                else:
                    log.exception("the live tail's read failed; it reconnects and reads on from its cursor")
                await self._reconnect()

    async def _drain(self) -> None:
        assert self._conn is not None
        while True:
            own_next = self._skip_own()
            below = own_next if own_next is not None else NO_LIMIT
            rows = await self._conn.fetch(self._select_new, self.cursor, self.batch, below)
            if rows:
                self.cursor = rows[-1]["notification_id"]
                self._deliver(rows)
            if len(rows) == self.batch:
                continue
            if own_next is None:
                return
            self.cursor = max(self.cursor, own_next - 1)

    def _own_row(self, notification_id: int) -> bool:
        """True when the row is in a range this process appended (known by now)."""
        with self._own_lock:
            at = bisect.bisect_right(self._own, (notification_id, NO_LIMIT)) - 1
            return at >= 0 and self._own[at][0] <= notification_id <= self._own[at][1]

    def _deliver(self, rows: list[asyncpg.Record]) -> None:
        events = [
            event
            for r in rows
            if not self._own_row(r["notification_id"]) and self.wanted(r["originator_id"], r["originator_version"])
            and (event := self._decoded(r)) is not None
        ]
        if events:
            self.deliver(events)

    def _decoded(self, row: asyncpg.Record) -> Any:
        """The row's event; None (logged) for a row this process cannot read (a newer version's event kind)."""
        try:
            return self.mapper.decode_state(row["state"], row["topic"], row["originator_version"])
        except Exception:  # one unreadable row must not stop the tail for every other run
            log.exception("the live tail skips notification %d: its event cannot be decoded", row["notification_id"])
            return None

    async def _reconnect(self) -> None:
        """Replace the connection, trying until it works (capped backoff); then read on from the cursor."""
        if self._conn is not None:
            self._conn.terminate()  # the old connection is gone either way
            self._conn = None
        wait = FIRST_RECONNECT_SECONDS
        while True:
            await asyncio.sleep(wait)
            try:
                self._conn = await asyncpg.connect(**self.location.asyncpg_dsn())
                await self._conn.add_listener(self.location.channel, self._notified)
            except Exception as exc:
                if not is_passing(exc):
                    raise
                self.outage.failed(exc, "live tail")
                log.debug("live tail reconnect failed: %s", first_line(exc))
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None
                wait = min(wait * 2, MAX_RECONNECT_SECONDS)
                continue
            self.reconnects += 1
            self._wake.set()
            return

    async def close(self) -> None:
        """Stop listening (a read cut short by the stop may end in a driver error: the connection is dropped anyway)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except Exception as error:  # noqa: BLE001 - stopping; nothing is lost, the cursor is not kept
                log.debug("live tail stopped on %s", first_line(error))
        if self._conn is not None:
            try:
                await self._conn.close(timeout=2)
            except Exception:  # noqa: BLE001 - a connection in a bad state is dropped instead
                self._conn.terminate()
