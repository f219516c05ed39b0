"""The library's PostgreSQL application recorder, sending new rows as binary column arrays, chain cells included.

The library inserts a batch as one text array of a composite type, which psycopg builds
and escapes in Python row by row. This subclass changes only that encoding, and stores the
hash chain's cells beside each event (three nullable columns, added to a table made before
the chain existed; see `engine.store.sqlite_recorder`); the library
keeps the connection pool, the transaction, the table lock, the NOTIFY, the returned
notification ids and the error mapping. Plugged in through the library's
`APPLICATION_RECORDER_TOPIC` setting (docs/decisions/0008-postgres-column-arrays.md).

An insert is tried once here: the library would retry a lost connection itself, and a retry
after a commit whose answer was lost reads as a conflict. `engine.store.async_store` retries
instead and tells such a conflict from a real one (docs/decisions/0029-store-outages.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresSubscription
from psycopg import Cursor
from psycopg.sql import SQL, Identifier

from domain.chain import ChainCells
from engine.store.chain_links import CHAIN_COLUMNS
from engine.store.columns import add_missing_columns
from engine.store.sqlite_recorder import Within

GATHER_SECONDS = 0.05
"""How long a subscription (the run read model's projection runner) gathers notifications before it reads."""


class GatheringSubscription(PostgresSubscription):
    """The library's subscription, reading at most once per GATHER_SECONDS: woken by every insert's NOTIFY, it
    would read (and take the interpreter from the writers) right when each append returns; gathered, a burst of
    appends is one read."""

    def _pull(self) -> None:
        if not self._has_been_stopped:
            time.sleep(GATHER_SECONDS)  # its own thread: the notifications of the while are read together
        super()._pull()


class ColumnArrayRecorder(PostgresApplicationRecorder):
    """Inserts events with unnest() over uuid[], int8[], text[] and bytea[] sent in binary (`chains=`: their cells).

    The statement is rendered once and prepared on each connection, as the library
    prepares its lock statement.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.insert_columns_statement = SQL(
            "INSERT INTO {schema}.{table} AS t (originator_id, originator_version, topic, state, chain_link, chain_skeleton)"
            " SELECT * FROM unnest(%b::uuid[], %b::int8[], %b::text[], %b::bytea[], %b::bytea[], %b::bytea[])"
            " RETURNING notification_id"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name)).as_bytes(None)

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> GatheringSubscription:
        """The library's subscription, gathering notifications for GATHER_SECONDS before each read."""
        return GatheringSubscription(recorder=self, gt=gt, topics=topics)

    def create_table(self) -> None:
        """The library's table, then the chain's columns where they are missing (no lock when none is)."""
        super().create_table()
        with self.datastore.transaction(commit=True) as curs:
            add_missing_columns(
                curs, "postgres", self.datastore.schema, self.events_table_name, dict.fromkeys(CHAIN_COLUMNS, "bytea"),
            )

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The library's insert, one attempt (its retry decorator left out)."""
        once = PostgresApplicationRecorder.insert_events.__wrapped__  # functools.wraps keeps the undecorated one
        found: Sequence[int] | None = once(self, stored_events, **kwargs)
        return found

    def _fetch_ids_after_insert_events(
        self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], *, within: Within | None = None, **kwargs: Any,
    ) -> Sequence[int] | None:
        """The library's notification ids of the rows just inserted; `within` then writes what else belongs to the
        append in its transaction (the run read model's rows), before the library commits."""
        ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        if within is not None and ids:
            within(curs, list(ids))
        return ids

    def _insert_stored_events(
        self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], *, chains: Sequence[ChainCells] = (), **_: Any,
    ) -> None:
        """Lock and notify as the library does, then insert the rows and their chain cells as column arrays."""
        self._lock_table(curs)
        self._notify_channel(curs)
        columns = (
            [e.originator_id for e in stored_events],
            [e.originator_version for e in stored_events],
            [e.topic for e in stored_events],
            [e.state for e in stored_events],
            [cells.link for cells in chains],
            [cells.skeleton for cells in chains],
        )
        curs.execute(self.insert_columns_statement, columns, prepare=True)
