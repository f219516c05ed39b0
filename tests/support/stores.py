"""Store locations for tests: a fresh SQLite file or a fresh PostgreSQL schema per test."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

PG_BASE = os.environ.get("FLOWTRAIL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_reachable() -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        with psycopg.connect(PG_BASE.replace("postgresql://", "postgresql://", 1), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def require_postgres() -> None:
    """Skip without PostgreSQL, except under CI, where its absence is a failure."""
    problem = postgres_reachable()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL at {PG_BASE} is unreachable under CI: {problem}")
    pytest.skip(f"PostgreSQL unreachable: {problem}")


def new_schema() -> str:
    """Create an empty schema and return its name."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return name


def drop_schema(name: str) -> None:
    """Drop a test schema and everything in it."""
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def store_url(kind: str, tmp_path: Path) -> tuple[str, str | None]:
    """(database URL, schema to drop afterwards) for a store kind."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'flowtrail.db'}", None
    require_postgres()
    schema = new_schema()
    return f"{PG_BASE}?schema={schema}", schema
