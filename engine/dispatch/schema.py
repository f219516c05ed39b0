"""procrastinate's tables in the store's PostgreSQL schema, created once even when replicas start together."""

from __future__ import annotations

import psycopg
from procrastinate.schema import SchemaManager
from psycopg.conninfo import make_conninfo

from engine.store.url import CONNECT_TIMEOUT_SECONDS, StoreLocation

SCHEMA_LOCK = "flowtrail: apply the procrastinate schema"


def conninfo(location: StoreLocation) -> str:
    """libpq connection string for the location, its schema first on the search path."""
    schema = location.schema.replace("\\", "\\\\").replace(" ", "\\ ")
    return make_conninfo(
        host=location.host, port=location.port, user=location.user, password=location.password or None,
        dbname=location.dbname, connect_timeout=CONNECT_TIMEOUT_SECONDS, application_name="flowtrail-jobs",
        options=f"-c search_path={schema}",
    )


async def ensure_job_schema(location: StoreLocation) -> bool:
    """Apply procrastinate's schema when its jobs table is missing; True when this call applied it.

    A transaction-scoped advisory lock (keyed on the schema) makes concurrent replicas take turns.
    """
    async with await psycopg.AsyncConnection.connect(conninfo(location)) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s || current_schema()))", (SCHEMA_LOCK,))
        row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
        if row is not None and row[0] is not None:
            return False
        await conn.execute(SchemaManager.get_schema())
        return True
