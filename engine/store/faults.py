"""Which store failures are passing (retry them) and one log line per outage episode.

A passing failure is one the same request can succeed after without any change on our side:
the connection was lost or refused, the server is starting, restarting or shutting down,
the disk is full or read-only, the file is locked, or no answer came in time. Anything else
(a conflict, a bad statement, a decoding error) is an answer, not an outage.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator

import asyncpg
import psycopg

from engine.observability.metrics import STORE_ERRORS

log = logging.getLogger("flowtrail.store")

SQLITE_PASSING = ("database or disk is full", "readonly", "read-only", "locked", "disk i/o error", "unable to open")
"""Words of SQLite's messages for failures that pass when space, permissions or the other writer return."""
ASYNCPG_PASSING: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,  # the connection was lost or could not be made
    asyncpg.OperatorInterventionError,  # the server is shutting down, starting up or cancelled the query
    asyncpg.InsufficientResourcesError,  # too many connections, disk full, out of memory
    asyncpg.ReadOnlySQLTransactionError,
    asyncpg.InterfaceError,  # "connection is closed", "pool is closing"
    asyncpg.InternalClientError,  # the driver's protocol state broke with its connection (a cluster restart)
)
PSYCOPG_PASSING: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,  # lost, refused, shutting down, disk full, lock timeout; PoolTimeout too
    psycopg.InterfaceError,
    psycopg.errors.ReadOnlySqlTransaction,
)


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_passing(error: BaseException) -> bool:
    """True when the failure is one of the store being away or unable to write for now (worth a retry)."""
    for link in _chain(error):
        if isinstance(link, sqlite3.OperationalError):
            return any(words in str(link).lower() for words in SQLITE_PASSING)
        if isinstance(link, PSYCOPG_PASSING + ASYNCPG_PASSING):
            return True
        if isinstance(link, (TimeoutError, ConnectionError)):
            return True
        if isinstance(link, OSError) and not isinstance(link, FileNotFoundError):
            return True
    return False


def first_line(error: BaseException) -> str:
    """The error's kind and the first line of its message."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}" if text else type(error).__name__


SETTLE_SECONDS = 1.0
"""The store is back once it has answered for this long without a failure (a restart often flaps: the server
answers, then a pooled connection that died with the old server fails once more)."""


class Outage:
    """Whether the store is away now; says so once when an episode begins and once when it has ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        self._answering_since: float | None = None

    @property
    def ongoing(self) -> bool:
        """True from the first failure of an episode until the store has answered for SETTLE_SECONDS."""
        return self._since is not None

    def failed(self, error: BaseException, what: str) -> None:
        """A passing failure of `what`; the first one of an episode is logged (one line, no traceback)."""
        STORE_ERRORS.labels(what).inc()
        with self._lock:
            self._answering_since = None
            if self._since is not None:
                return
            self._since = time.monotonic()
        log.warning(
            "the event store is unavailable (%s during %s); retrying, and requests answer 503 STORE_UNAVAILABLE "
            "until it is back", first_line(error), what,
        )

    def succeeded(self) -> None:
        """The store answered; once it has answered for SETTLE_SECONDS the episode ends (logged once)."""
        if self._since is None:
            return
        now = time.monotonic()
        with self._lock:
            since, answering = self._since, self._answering_since
            if since is None:
                return
            if answering is None:
                self._answering_since = now
                return
            if now - answering < SETTLE_SECONDS:
                return
            self._since = self._answering_since = None
        log.warning("the event store answers again after %.1f s unavailable", answering - since)


_OUTAGES: dict[object, Outage] = {}
_OUTAGES_LOCK = threading.Lock()


def outage_of(location: object) -> Outage:
    """The one outage record of a store location in this process (the store, its tail and the read model share it)."""
    with _OUTAGES_LOCK:
        return _OUTAGES.setdefault(location, Outage())
