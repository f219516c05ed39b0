"""The event log: the eventsourcing Application as the write side, on SQLite or PostgreSQL.

Everything here is synchronous (the library is); `engine.aio` offloads it to threads.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import parse_qs, unquote, urlparse
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError

from domain.catalogue import CATALOGUE_EVENT_TYPES
from domain.events import RUN_EVENT_TYPES
from domain.idempotency import IDEMPOTENCY_EVENT_TYPES
from engine.mapper import MsgspecMapper

APP_NAME = "flowtrail"


class StoreError(Exception):
    """The event store failed or refused a write."""


class ConcurrentAppend(StoreError):
    """Another writer appended to the same stream at the same position."""


@dataclass(frozen=True)
class StoreLocation:
    """Where the log lives, parsed from FLOWTRAIL_DATABASE_URL."""

    kind: str
    sqlite_path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = ""
    password: str = ""
    dbname: str = ""
    schema: str = "public"

    @property
    def events_table(self) -> str:
        """The events table the library creates."""
        return f"{APP_NAME}_events"

    @property
    def channel(self) -> str:
        """The NOTIFY channel the library signals on each insert."""
        return self.events_table

    def asyncpg_dsn(self) -> dict[str, Any]:
        """Connection arguments for asyncpg."""
        return {
            "host": self.host, "port": self.port, "user": self.user,
            "password": self.password or None, "database": self.dbname,
        }


def parse_database_url(url: str) -> StoreLocation:
    """sqlite:///path.db or postgresql://user[:pw]@host[:port]/db[?schema=name]."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
            path = path.lstrip("/")
        if not path:
            raise ValueError(f"FLOWTRAIL_DATABASE_URL {url!r} names no SQLite file")
        return StoreLocation(kind="sqlite", sqlite_path=Path(path))
    if parsed.scheme in {"postgresql", "postgres"}:
        schema = parse_qs(parsed.query).get("schema", ["public"])[0]
        return StoreLocation(
            kind="postgres",
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 5432,
            user=unquote(parsed.username or "") or getpass.getuser(),
            password=unquote(parsed.password or ""),
            dbname=(parsed.path or "/").lstrip("/") or "postgres",
            schema=schema,
        )
    raise ValueError(
        f"FLOWTRAIL_DATABASE_URL {url!r}: use sqlite:///path.db or postgresql://user@host:port/db"
    )


def library_env(location: StoreLocation) -> dict[str, str]:
    """The eventsourcing environment for a location."""
    if location.kind == "sqlite":
        assert location.sqlite_path is not None
        location.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(location.sqlite_path),
            "SQLITE_LOCK_TIMEOUT": "10",
        }
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": location.dbname,
        "POSTGRES_HOST": location.host,
        "POSTGRES_PORT": str(location.port),
        "POSTGRES_USER": location.user,
        "POSTGRES_PASSWORD": location.password,
        "POSTGRES_SCHEMA": location.schema,
        "POSTGRES_POOL_SIZE": "6",
        "POSTGRES_MAX_OVERFLOW": "4",
        "POSTGRES_LOCK_TIMEOUT": "10",
        "APPLICATION_RECORDER_TOPIC": "engine.postgres_recorder:ColumnArrayRecorder",
    }


class FlowtrailApplication(Application):  # type: ignore[type-arg]
    """The library's Application with the msgspec mapper for our events."""

    name = APP_NAME

    def construct_mapper(self) -> MsgspecMapper:
        """Our mapper: tags as topics, msgspec JSON as state."""
        return MsgspecMapper([*RUN_EVENT_TYPES, *CATALOGUE_EVENT_TYPES, *IDEMPOTENCY_EVENT_TYPES])


class EventLog:
    """Append to and read streams of the log (synchronous)."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        if location.kind == "postgres":
            _ensure_schema(location)
        self.app = FlowtrailApplication(env=library_env(location))
        self.mapper: MsgspecMapper = self.app.mapper  # type: ignore[assignment]
        self.events_table: str = self.app.recorder.events_table_name  # type: ignore[attr-defined]

    def append(self, events: Sequence[Any]) -> list[int]:
        """Append events (all or none); returns their notification ids.

        Maps the events and hands the rows to the library's recorder, which is what the
        library's `EventStore.put` does too; `Application.save` and `put` would add a
        runtime Protocol check and two record objects per event that we never use
        (together about a quarter of a stream chunk's cost).
        """
        if not events:
            return []
        rows = [self.mapper.to_stored_event(event) for event in events]
        try:
            ids = self.app.recorder.insert_events(rows)
        except IntegrityError as exc:
            raise ConcurrentAppend(
                f"stream {events[0].originator_id.hex} already has position {events[0].originator_version}"
            ) from exc
        return list(ids or ())

    def read(self, stream_id: UUID, *, after: int = 0, upto: int | None = None, limit: int | None = None) -> list[Any]:
        """A stream's events with after < position <= upto, in order (at most `limit`)."""
        rows = self.app.recorder.select_events(stream_id, gt=after or None, lte=upto, limit=limit)
        return [self.mapper.to_domain_event(row) for row in rows]

    def last_position(self, stream_id: UUID) -> int:
        """The position of a stream's last event (0: no such stream)."""
        rows = self.app.recorder.select_events(stream_id, desc=True, limit=1)
        return rows[0].originator_version if rows else 0

    def events_tagged(self, tag: str, *, after_notification: int = 0, limit: int = 1000) -> list[tuple[int, Any]]:
        """(notification id, event) of every event with one tag, across all streams, in log order."""
        notes = self.app.recorder.select_notifications(
            after_notification + 1, limit, topics=(tag,)
        )
        return [(n.id, self.mapper.to_domain_event(n)) for n in notes]

    def all_events_tagged(self, tag: str) -> list[Any]:
        """Every event with one tag, in log order."""
        found, after = [], 0
        while True:
            page = self.events_tagged(tag, after_notification=after)
            found.extend(event for _, event in page)
            if len(page) < 1000:
                return found
            after = page[-1][0]

    def max_notification_id(self) -> int:
        """The newest position in the whole log (0 when empty)."""
        return self.app.recorder.max_notification_id() or 0

    def close(self) -> None:
        """Release connections."""
        self.app.close()


def _ensure_schema(location: StoreLocation) -> None:
    if location.schema == "public":
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(
        host=location.host, port=location.port, user=location.user,
        password=location.password or None, dbname=location.dbname, autocommit=True,
    ) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(location.schema)))
