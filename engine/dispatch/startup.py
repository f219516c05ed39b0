"""Replicas on one PostgreSQL start one at a time: creating tables concurrently is not safe in PostgreSQL.

`CREATE TABLE IF NOT EXISTS` run by two sessions at once can fail ("tuple concurrently updated",
duplicate types); a session-level advisory lock, keyed on the schema, is held from before the
store is opened until the application has started.
"""

from __future__ import annotations

import logging

import psycopg

from engine.dispatch.schema import conninfo
from engine.store.url import StoreLocation

logger = logging.getLogger("flowtrail.dispatch")
STARTUP_LOCK = "flowtrail: start-up"
WAIT_SECONDS = 120


class StartupLock:
    """The schema's start-up lock, held on its own connection until `release`."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self._conn: psycopg.Connection | None = None

    def acquire(self) -> None:
        """Wait (at most WAIT_SECONDS) for other replicas' start-ups; an unreachable store is left to the store to report."""
        try:
            conn = psycopg.connect(conninfo(self.location), autocommit=True)
        except psycopg.OperationalError:
            return
        try:
            conn.execute(f"SET lock_timeout = '{WAIT_SECONDS}s'")
            conn.execute("SELECT pg_advisory_lock(hashtext(%s || %s))", (STARTUP_LOCK, self.location.schema))
        except psycopg.Error as error:
            logger.warning("starting without waiting for other replicas' start-ups: %s", " ".join(str(error).split()))
            conn.close()
            return
        self._conn = conn

    def release(self) -> None:
        """Let the next replica start (closing the connection releases the lock)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error as error:
                logger.debug("start-up lock connection closed with an error: %s", error)
