"""The library's settings for a store location, whether PostgreSQL answers, and the schema it needs."""

from __future__ import annotations

from engine.store.url import CONNECT_TIMEOUT_SECONDS, StoreLocation

POOL_WAIT_SECONDS = 0.2
"""How long one write attempt waits for a pooled connection before it counts as failed (and is retried)."""
POOL_RECONNECT_SECONDS = 2.0
"""How long the library's pool keeps retrying one lost connection before the next request asks afresh."""


def library_env(location: StoreLocation) -> dict[str, str]:
    """The eventsourcing environment for a location."""
    if location.kind == "sqlite":
        assert location.sqlite_path is not None
        location.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(location.sqlite_path),
            "SQLITE_LOCK_TIMEOUT": "10",
            "APPLICATION_RECORDER_TOPIC": "engine.store.sqlite_recorder:ChainedSqliteRecorder",
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
