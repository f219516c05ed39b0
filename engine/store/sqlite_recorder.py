"""The library's SQLite application recorder, with the hash chain's cells stored beside each event.

The events table gets three nullable columns (`engine.store.chain_links.CHAIN_COLUMNS`): the event's link, its
skeleton digest when it differs from its content's, and its content digest once erased
(`domain.chain.ChainCells`). A table made before the chain existed gets them added at start-up;
its old rows keep NULLs (their stream's chain starts after them). The library keeps the
connections, the transaction and the rest; only the insert names its columns and takes the cells.
Plugged in through the library's `APPLICATION_RECORDER_TOPIC` setting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from domain.chain import ChainCells
from engine.store.chain_links import CHAIN_COLUMNS
from engine.store.columns import add_missing_columns

Within = Callable[[Any, list[int]], None]
"""Writes more in an append's transaction, given its cursor and the append's notification ids."""


class ChainedSqliteRecorder(SQLiteApplicationRecorder):
    """Inserts each event with its chain cells (`chains=`, one per event, in order)."""

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name)
        self.insert_events_statement = (
            f"INSERT INTO {self.events_table_name} (originator_id, originator_version, topic, state, "
            "chain_link, chain_skeleton) VALUES (?,?,?,?,?,?)"
        )

    def create_table(self) -> None:
        """The library's table, then the chain's columns where they are missing."""
        super().create_table()
        with self.datastore.transaction(commit=True) as c:
            add_missing_columns(c, "sqlite", "", self.events_table_name, dict.fromkeys(CHAIN_COLUMNS, "BLOB"))

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], *, chains: Sequence[ChainCells] = (),
        within: Within | None = None, **_: Any,
    ) -> Sequence[int] | None:
        """Insert the rows with their cells; their rowids are their notification ids. `within` then writes what
        else belongs to the append in its transaction (the run read model's rows)."""
        returning = []
        for row, cells in zip(stored_events, chains, strict=True):
            stream = row.originator_id.hex if isinstance(row.originator_id, UUID) else row.originator_id
            c.execute(self.insert_events_statement, (
                stream, row.originator_version, row.topic, row.state, cells.link, cells.skeleton,
            ))
            returning.append(c.lastrowid)
        if within is not None:
            within(c, returning)
        return returning
