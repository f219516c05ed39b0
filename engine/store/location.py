"""Where the log lives: FLOWTRAIL_DATABASE_URL parsed, and the library's settings for it."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

APP_NAME = "flowtrail"
CONNECT_TIMEOUT_SECONDS = 5
"""How long any connection attempt to PostgreSQL may take (an unreachable server fails fast)."""
POOL_WAIT_SECONDS = 0.2
"""How long one write attempt waits for a pooled connection before it counts as failed (and is retried)."""
POOL_RECONNECT_SECONDS = 2.0
"""How long the library's pool keeps retrying one lost connection before the next request asks afresh."""


def qualified_table(schema: str, table: str) -> str:
    """A safely quoted schema.table name."""
    return '"{}"."{}"'.format(schema.replace('"', '""'), table.replace('"', '""'))


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
            "password": self.password or None, "database": self.dbname, "timeout": CONNECT_TIMEOUT_SECONDS,
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
        "POSTGRES_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT_SECONDS),
        "POSTGRES_PRE_PING": "y",  # a connection the server dropped is found and replaced before it is used
        "POSTGRES_CONN_MAX_AGE": "600",
        "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": "30",
        "APPLICATION_RECORDER_TOPIC": "engine.store.postgres_recorder:ColumnArrayRecorder",
    }


def check_reachable(location: StoreLocation) -> str | None:
    """None when PostgreSQL at the location accepts a connection within the timeout, else the driver's reason."""
    import psycopg

    try:
        psycopg.connect(
            host=location.host, port=location.port, user=location.user, password=location.password or None,
            dbname=location.dbname, connect_timeout=CONNECT_TIMEOUT_SECONDS,
        ).close()
    except psycopg.OperationalError as error:
        return " ".join(str(error).split())
    return None


def ensure_schema(location: StoreLocation) -> None:
    """Create the location's PostgreSQL schema when it is not `public` and is missing."""
    if location.schema == "public":
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(
        host=location.host, port=location.port, user=location.user,
        password=location.password or None, dbname=location.dbname, autocommit=True,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
    ) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(location.schema)))
