"""Fresh, empty event stores for one bench: an SQLite file, or a new PostgreSQL schema."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

PG_BASE = os.environ.get(
    "FLOWTRAIL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test"
)


class Store:
    """A fresh, empty event store: an SQLite file in a temp dir, or a new PostgreSQL schema."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.workdir = workdir
        self.schema: str | None = None
        if kind == "sqlite":
            self.url = f"sqlite:///{workdir / 'flowtrail.db'}"
        elif kind == "postgres":
            self.schema = "bench_" + uuid.uuid4().hex[:12]
            self._pg_execute(f'CREATE SCHEMA "{self.schema}"')
            self.url = f"{PG_BASE}?schema={self.schema}"
        else:
            raise ValueError(f"unknown store kind {kind!r}")

    @staticmethod
    def _pg_execute(statement: str) -> None:
        import psycopg

        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(statement)

    def drop(self) -> None:
        """Drop the schema (PostgreSQL); the SQLite file goes with the temp dir."""
        if self.schema is not None:
            self._pg_execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            self.schema = None
