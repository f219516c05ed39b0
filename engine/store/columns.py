"""Columns added to a table that an earlier version created: added where missing, at start-up, never changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.sql import SQL, Identifier


def add_missing_columns(cursor: Any, kind: str, schema: str, table: str, columns: Mapping[str, str]) -> None:
    """Add each named column (name -> SQL type, nullable) the table lacks, inside the caller's transaction.

    Nothing is altered (and no lock taken) when every column is there already.
    """
    if kind == "sqlite":
        cursor.execute(f'PRAGMA table_info("{table}")')
        present = {row["name"] for row in cursor.fetchall()}
    else:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
            (schema, table),
        )
        present = {row["column_name"] for row in cursor.fetchall()}
    for name, sql_type in columns.items():
        if name in present:
            continue
        if kind == "sqlite":
            cursor.execute(f'ALTER TABLE "{table}" ADD COLUMN {name} {sql_type}')
        else:
            cursor.execute(SQL("ALTER TABLE {}.{} ADD COLUMN IF NOT EXISTS {} " + sql_type).format(
                Identifier(schema), Identifier(table), Identifier(name),
            ))
