"""Where the log lives: FLOWTRAIL_DATABASE_URL parsed into a StoreLocation (no I/O)."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

APP_NAME = "flowtrail"
CONNECT_TIMEOUT_SECONDS = 5
"""How long any connection attempt to PostgreSQL may take (an unreachable server fails fast)."""


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
