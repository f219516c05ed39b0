"""The event store: the eventsourcing Application as the write side, on SQLite or PostgreSQL.

Everything here is synchronous (the library is); `engine.store.async_store` offloads it to
threads and reads around the library where that is faster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from domain.catalogue import CATALOGUE_EVENT_TYPES
from domain.chain import ChainCells
from domain.errors import FlowtrailError
from domain.events import RUN_EVENT_TYPES
from domain.idempotency import IDEMPOTENCY_EVENT_TYPES
from engine.store.chain_links import ChainLinks
from engine.store.erasure import ErasureSql, Redaction, checkpoint_sqlite, redactions, rewrite, stream_key
from engine.store.faults import is_passing
from engine.store.location import (
    POOL_RECONNECT_SECONDS,
    POOL_WAIT_SECONDS,
    check_reachable,
    ensure_schema,
    library_env,
)
from engine.store.mapper import MsgspecMapper
from engine.store.url import APP_NAME, StoreLocation, qualified_table

log = logging.getLogger("flowtrail.store")
STORED_EVENT_TYPES = (*RUN_EVENT_TYPES, *CATALOGUE_EVENT_TYPES, *IDEMPOTENCY_EVENT_TYPES)
PAGE = 1000


class StoreError(Exception):
    """The event store failed or refused a write."""


class StoreUnreachable(StoreError):
    """The configured store cannot be opened; the message is one line naming where it is and why."""


class ConcurrentAppend(StoreError):
    """Another writer appended to the same stream at the same position."""


class StoreUnavailable(StoreError, FlowtrailError):
    """The store cannot be reached or cannot write now; try again later."""

    code = "STORE_UNAVAILABLE"


class FlowtrailApplication(Application):
    """The library's Application with the msgspec mapper for our events."""

    name = APP_NAME

    def construct_mapper(self) -> MsgspecMapper:
        """Our mapper: tags as topics, msgspec JSON as state."""
        return MsgspecMapper(STORED_EVENT_TYPES)


class EventStore:
    """Appends to and reads the streams of the log (synchronous)."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        if location.kind == "postgres":
            reason = check_reachable(location)
            if reason is not None:
                raise StoreUnreachable(
                    f"FLOWTRAIL_DATABASE_URL: cannot reach PostgreSQL at {location.host}:{location.port} "
                    f"(database {location.dbname!r}, user {location.user!r}): {reason}"
                )
            ensure_schema(location)
        try:
            self.app = FlowtrailApplication(env=library_env(location))
        except (OSError, PersistenceError) as error:
            if location.kind != "sqlite":
                raise
            raise StoreUnreachable(
                f"FLOWTRAIL_DATABASE_URL: cannot open the SQLite file {location.sqlite_path}: {error}"
            ) from None
        recorder: Any = self.app.recorder  # SQLite's or PostgreSQL's: both have a datastore and an events table
        if location.kind == "postgres":
            tune_pool(recorder.datastore.pool)
        mapper = self.app.mapper
        assert isinstance(mapper, MsgspecMapper), "construct_mapper makes ours"
        self.mapper = mapper
        self.events_table: str = recorder.events_table_name
        self._datastore: Any = recorder.datastore
        self.chain = ChainLinks(self._stored_link)
        self._erasure_sql = ErasureSql.of(location.kind, location.schema, self.events_table)
        self.after_append: Callable[[Sequence[Any], list[int]], None] | None = None
        """Called with each append's events and notification ids once they are stored (the run read model's feed)."""
        self.within_append: Callable[[Any, Sequence[Any], list[int]], bool] | None = None
        """Called in each append's transaction with its cursor, events and notification ids (the run read
        model's feed, one commit with the append); False when it leaves the append to `after_append`."""
        self.ids_taken: Callable[[list[int]], None] | None = None
        """Called in each append's (and erasure's) transaction with its notification ids, before the commit makes
        its rows visible (the live tail's ranges of this process's own appends, so it never reads them back)."""

    def append_to_stream(self, events: Sequence[Any], *, retried: bool = False) -> list[int]:
        """Append events at their streams' positions (all or none); returns their notification ids.

        `retried` says an earlier attempt of this very append failed with its outcome unknown
        (the connection was lost, perhaps during the commit): a conflict then means the
        earlier attempt was stored if the rows at those positions are these events, and that
        counts as success instead of a duplicate or a false conflict.

        Maps the events and hands the rows to the library's recorder, which is what the
        library's `EventStore.put` does too; `Application.save` and `put` would add a
        runtime Protocol check and two record objects per event that we never use
        (together about a quarter of a stream chunk's cost).
        """
        if not events:
            return []
        rows = [self.mapper.to_stored_event(event) for event in events]
        cells = self.chain.cells(rows)
        fed: list[bool] = []
        extra: dict[str, Any] = {}
        within, taken = self.within_append, self.ids_taken
        if within is not None or taken is not None:
            def in_transaction(cursor: Any, ids: list[int]) -> None:
                if taken is not None:
                    taken(ids)
                if within is not None:
                    fed.append(within(cursor, events, ids))

            extra["within"] = in_transaction
        try:
            stored = list(self.app.recorder.insert_events(rows, chains=cells, **extra) or ())
        except IntegrityError as exc:
            stored_before = self.stored_ids_if_same(rows) if retried else None
            if stored_before is None:
                raise ConcurrentAppend(
                    f"stream {events[0].originator_id.hex} already has position {events[0].originator_version}"
                ) from exc
            stored = stored_before
        self.chain.stored(rows, cells)
        if self.after_append is not None and not any(fed):
            self.after_append(events, stored)
        return stored

    def append_together(self, appends: Sequence[Sequence[Any]], retried: Sequence[bool]) -> list[list[int] | Exception]:
        """Several appends in one transaction (group commit); the outcome of each: its notification ids or its error.

        When the group cannot be stored for a reason other than the store being away (a position
        taken, an event that cannot be stored), each append is made again alone, so a lost race fails
        only its own append. The store being away is every append's outcome (each caller retries).
        """
        if len(appends) == 1:
            return self._each_alone(appends, retried)
        try:
            stored = self.append_to_stream([event for append in appends for event in append])
        except Exception as error:  # noqa: BLE001 - an outage is every append's outcome; anything else, one append's
            if is_passing(error):
                return [error] * len(appends)
            return self._each_alone(appends, retried)
        outcomes: list[list[int] | Exception] = []
        for append in appends:
            outcomes.append(stored[:len(append)])
            stored = stored[len(append):]
        return outcomes

    def _each_alone(self, appends: Sequence[Sequence[Any]], retried: Sequence[bool]) -> list[list[int] | Exception]:
        outcomes: list[list[int] | Exception] = []
        for append, again in zip(appends, retried, strict=True):
            try:
                outcomes.append(self.append_to_stream(append, retried=again))
            except Exception as error:  # noqa: BLE001 - the append's outcome, raised to its caller
                outcomes.append(error)
        return outcomes

    def erase_stream(self, stream_id: UUID, closing: Callable[[int], Any]) -> tuple[Any, list[int]]:
        """Replace the stored JSON of every event of the stream that holds content by its skeleton, and append
        the event `closing(how many were rewritten)` returns, in one transaction (all or nothing).

        Returns that event and its notification ids; ConcurrentAppend when its position is taken, and
        `engine.store.erasure.SkeletonMismatch` (nothing changed) when a skeleton would break the chain.
        """
        key = stream_key(self.location.kind, stream_id)
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(self._erasure_sql.select_rows, (key,))
            rows = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cursor.fetchall()]
        found = redactions(rows)
        event = closing(len(found))
        appended = [self.mapper.to_stored_event(event)]
        cells = self.chain.cells(appended)
        log.info("stream %s: erasing the content of %d events", stream_id.hex, len(found))
        try:
            ids = self._erase_in_one_transaction(key, appended, cells, found)
        except IntegrityError as exc:
            raise ConcurrentAppend(f"stream {stream_id.hex} already has position {event.originator_version}") from exc
        self.chain.stored(appended, cells)
        self.forget_erased_bytes()
        if self.after_append is not None:
            self.after_append([event], ids)
        return event, ids

    def forget_erased_bytes(self) -> None:
        """On SQLite, move the write-ahead log into the file and empty it: erased bytes stay in no log file."""
        if self.location.kind == "sqlite":
            checkpoint_sqlite(self._datastore)

    def _erase_in_one_transaction(
        self, key: Any, appended: Sequence[StoredEvent], cells: Sequence[ChainCells], found: Sequence[Redaction],
    ) -> list[int]:
        """Insert the closing event (the library's insert, its lock and NOTIFY) and rewrite the rows, in one transaction."""
        recorder: Any = self.app.recorder
        if self.location.kind == "sqlite":
            with self._datastore.get_connection(commit=True) as conn:
                conn.cursor().execute("PRAGMA secure_delete = ON")  # freed bytes are overwritten, not left on the page
                with conn.transaction(commit=True) as curs:
                    ids = list(recorder._insert_events(curs, appended, chains=cells))
                    rewrite(curs, self._erasure_sql, key, found)
            return ids
        with self._datastore.transaction(commit=True) as curs:
            recorder._insert_stored_events(curs, appended, chains=cells)
            ids = list(recorder._fetch_ids_after_insert_events(curs, appended))
            if self.ids_taken is not None:
                self.ids_taken(ids)
            rewrite(curs, self._erasure_sql, key, found)
        return ids

    def stored_ids_if_same(self, rows: Sequence[StoredEvent]) -> list[int] | None:
        """The notification ids of rows already stored with exactly this content at their positions, else None."""
        found: list[int] = []
        for row in rows:
            stored = self._stored_row(UUID(str(row.originator_id)), row.originator_version)
            if stored is None or (stored[1], bytes(stored[2])) != (row.topic, bytes(row.state)):
                return None
            found.append(int(stored[0]))
        return found

    def _stored_row(self, stream_id: UUID, position: int) -> tuple[int, str, bytes] | None:
        """(notification id, topic, state) of the row at a stream position."""
        found = self._row_at(stream_id, position, "notification_id, topic, state")
        return None if found is None else (found[0], found[1], found[2])

    def _stored_link(self, stream_id: UUID, position: int) -> bytes | None:
        """The chain link stored at a stream position (None: none); LookupError when the position is not stored."""
        found = self._row_at(stream_id, position, "chain_link")
        if found is None:
            raise LookupError(f"stream {stream_id.hex} has no position {position}")
        return None if found[0] is None else bytes(found[0])

    def _row_at(self, stream_id: UUID, position: int, columns: str) -> tuple[Any, ...] | None:
        """Some columns of the row at a stream position (`notification_id` is SQLite's rowid), or None."""
        if self.location.kind == "sqlite":
            columns = columns.replace("notification_id", "rowid")
            select = f'SELECT {columns} FROM "{self.events_table}" WHERE originator_id = ? AND originator_version = ?'
            key: Any = stream_id.hex
        else:
            table = qualified_table(self.location.schema, self.events_table)
            select = f"SELECT {columns} FROM {table} WHERE originator_id = %s AND originator_version = %s"
            key = stream_id
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(select, (key, position))
            found = cursor.fetchone()
        if found is None:
            return None
        return tuple(found.values()) if isinstance(found, dict) else tuple(found)  # psycopg's dict rows, sqlite3.Row

    def read_stream(self, stream_id: UUID, *, after: int = 0, upto: int | None = None,
                    limit: int | None = None) -> list[Any]:
        """A stream's events with after < position <= upto, in order (at most `limit`)."""
        rows = self.app.recorder.select_events(stream_id, gt=after or None, lte=upto, limit=limit)
        return [self.mapper.to_domain_event(row) for row in rows]

    def last_position(self, stream_id: UUID) -> int:
        """The position of a stream's last event (0: no such stream)."""
        rows = self.app.recorder.select_events(stream_id, desc=True, limit=1)
        return rows[0].originator_version if rows else 0

    def read_all_page(self, tag: str, *, after: int = 0, limit: int = PAGE) -> list[tuple[int, Any]]:
        """(notification id, event) of events with one tag across all streams, after a notification id."""
        notes = self.app.recorder.select_notifications(after + 1, limit, topics=(tag,))
        return [(n.id, self.mapper.to_domain_event(n)) for n in notes]

    def read_all(self, tag: str) -> list[Any]:
        """Every event with one tag across all streams, in log order."""
        found: list[Any] = []
        after = 0
        while True:
            page = self.read_all_page(tag, after=after)
            found.extend(event for _, event in page)
            if len(page) < PAGE:
                return found
            after = page[-1][0]

    def last_notification_id(self) -> int:
        """The newest position in the whole log (0 when empty)."""
        return self.app.recorder.max_notification_id() or 0

    def close(self) -> None:
        """Release connections."""
        self.app.close()


def tune_pool(pool: Any) -> None:
    """Make the library's psycopg pool give up waiting for a connection quickly and retry a lost server soon.

    By default a request for a connection waits 5 s, and an unreachable server is retried
    with doubling delays for 5 minutes (so a long outage ends seconds late); our own
    retries (`engine.store.async_store`) decide how long to keep trying.
    """
    pool.timeout = POOL_WAIT_SECONDS
    pool.reconnect_timeout = POOL_RECONNECT_SECONDS
