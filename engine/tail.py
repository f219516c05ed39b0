"""Live tail of the PostgreSQL log: LISTEN on the library's channel, read new rows by position.

It lets a server process see events that another process appended.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable
from uuid import UUID

import asyncpg

from engine.aio import qualified_table
from engine.mapper import MsgspecMapper
from engine.store import StoreLocation

log = logging.getLogger("flowtrail.tail")


class PostgresTail:
    """Delivers newly committed events that `wanted(stream, position)` says yes to."""

    def __init__(
        self,
        location: StoreLocation,
        mapper: MsgspecMapper,
        *,
        wanted: Callable[[UUID, int], bool],
        deliver: Callable[[list[Any]], None],
        batch: int = 2000,
    ) -> None:
        self.location = location
        self.mapper = mapper
        self.wanted = wanted
        self.deliver = deliver
        self.batch = batch
        self.cursor = 0
        table = qualified_table(location.schema, location.events_table)
        self._select_new = (
            f"SELECT notification_id, originator_id, originator_version, topic, state FROM {table} "
            "WHERE notification_id > $1 ORDER BY notification_id LIMIT $2"
        )
        self._select_max = f"SELECT COALESCE(MAX(notification_id), 0) FROM {table}"
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: asyncpg.Connection | None = None

    async def start(self) -> None:
        """Start listening from the log's current end."""
        self._conn = await asyncpg.connect(**self.location.asyncpg_dsn())
        self.cursor = await self._conn.fetchval(self._select_max)
        await self._conn.add_listener(self.location.channel, self._notified)
        self._task = asyncio.create_task(self._run(), name="flowtrail-pg-tail")

    def _notified(self, *_: Any) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._drain()
            except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
                log.warning("live tail read failed, reconnecting: %s", exc)
                await self._reconnect()

    async def _drain(self) -> None:
        assert self._conn is not None
        while True:
            rows = await self._conn.fetch(self._select_new, self.cursor, self.batch)
            if not rows:
                return
            self.cursor = rows[-1]["notification_id"]
            decode = self.mapper.decode_state
            events = [
                decode(r["state"], r["topic"], r["originator_version"])
                for r in rows
                if self.wanted(r["originator_id"], r["originator_version"])
            ]
            if events:
                self.deliver(events)
            if len(rows) < self.batch:
                return

    async def _reconnect(self) -> None:
        await asyncio.sleep(0.5)
        try:
            if self._conn is not None:
                await self._conn.close(timeout=1)
        except Exception:  # noqa: BLE001 - the old connection is gone either way
            pass
        try:
            self._conn = await asyncpg.connect(**self.location.asyncpg_dsn())
            await self._conn.add_listener(self.location.channel, self._notified)
            self._wake.set()
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("live tail reconnect failed: %s", exc)

    async def close(self) -> None:
        """Stop listening."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._conn is not None:
            await self._conn.close(timeout=2)
