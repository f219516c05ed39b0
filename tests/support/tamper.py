"""The events table of a test's store, reached around the service (to change what the log holds)."""

from __future__ import annotations

import sqlite3
from typing import Any
from uuid import UUID

import psycopg

from engine.store.url import qualified_table
from tests.support.stores import PG_BASE


class Table:
    """The events table of the test's store, reached around the service."""

    def __init__(self, services: Any) -> None:
        self.location = services.store.location
        self.name = services.store.sync.events_table

    def run(self, sql: str, *params: Any) -> list[Any]:
        """Run one statement (`{t}`: the table, `%s`: a parameter); its rows."""
        if self.location.kind == "sqlite":
            with sqlite3.connect(self.location.sqlite_path) as conn:
                return conn.execute(sql.replace("%s", "?").replace("{t}", self.name), params).fetchall()
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            cursor = conn.execute(sql.replace("{t}", qualified_table(self.location.schema, self.name)), params)
            return cursor.fetchall() if cursor.description else []

    def key(self, run_id: UUID) -> Any:
        """The run id as the table stores it."""
        return run_id.hex if self.location.kind == "sqlite" else run_id

    def state(self, run_id: UUID, position: int) -> bytes:
        """The stored JSON at a position."""
        return bytes(self.run("SELECT state FROM {t} WHERE originator_id = %s AND originator_version = %s",
                              self.key(run_id), position)[0][0])

    def set_state(self, run_id: UUID, position: int, state: bytes, topic: str | None = None) -> None:
        """Overwrite the stored JSON (and the topic) at a position."""
        self.run("UPDATE {t} SET state = %s, topic = COALESCE(%s, topic) WHERE originator_id = %s "
                 "AND originator_version = %s", state, topic, self.key(run_id), position)

    def move(self, run_id: UUID, position: int, to: int) -> None:
        """Give the row at a position another position."""
        self.run("UPDATE {t} SET originator_version = %s WHERE originator_id = %s AND originator_version = %s",
                 to, self.key(run_id), position)
