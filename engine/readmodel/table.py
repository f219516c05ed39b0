"""The run-row table and its tracking position, in the log's own database (SQLite or PostgreSQL).

The recorders are the library's tracking recorders with one more table: a row per run, the
`projections.run_row.RunRow` of the run at its `last_event_id`. Rows and the tracking
position are written in one transaction. A row is only ever replaced by a row at a later
position of its run (`WHERE last_event_id < excluded.last_event_id`), so a replay, or two
writers folding the same run, can never move a row back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder
from psycopg.sql import SQL, Identifier

from projections.run_row import RunRow

ROWS_TABLE = "flowtrail_run_rows"
TRACKING_NAME = "flowtrail"
"""The name the read model's position in the log is tracked under (the upstream application's)."""

COLUMNS = (
    "run_id", "workflow_name", "workflow_id", "workflow_version", "owner_key_id", "status",
    "cancel_requested", "cancelled", "created_us", "started_us", "completed_us", "error_code",
    "prompt_tokens", "completion_tokens", "last_event_id", "waiting_us",
    "forked_from_run_id", "forked_from_visit_uuid", "forked_from_position", "erased_us",
)
ADDED_COLUMNS = {
    "waiting_us": "BIGINT",
    "forked_from_run_id": "TEXT", "forked_from_visit_uuid": "TEXT", "forked_from_position": "BIGINT",
    "erased_us": "BIGINT",
}
"""Columns added after the table was first shipped: a table without one gets it (and `ADDED_INDEXES`), and its rows
are rebuilt from the log (`engine.readmodel.model.ReadModel.start`)."""

_TABLE_BODY = (
    "(run_id TEXT PRIMARY KEY, workflow_name TEXT NOT NULL, workflow_id BIGINT NOT NULL, "
    "workflow_version BIGINT NOT NULL, owner_key_id TEXT NOT NULL, status TEXT NOT NULL, "
    "cancel_requested BOOLEAN NOT NULL, cancelled BOOLEAN NOT NULL, created_us BIGINT NOT NULL, "
    "started_us BIGINT, completed_us BIGINT, error_code TEXT, prompt_tokens BIGINT NOT NULL, "
    "completion_tokens BIGINT NOT NULL, last_event_id BIGINT NOT NULL, "
    + ", ".join(f"{column} {kind}" for column, kind in ADDED_COLUMNS.items()) + ")"
)
INDEXES = {
    "newest": "(created_us, run_id)",
    "owner": "(owner_key_id, created_us, run_id)",
    "workflow": "(workflow_id, created_us, run_id)",
    "workflow_name": "(workflow_name, created_us, run_id)",
    "owner_workflow": "(owner_key_id, workflow_id, created_us, run_id)",
    "status": "(status, created_us, run_id)",
}
"""Keyset pagination runs backwards along (created_us, run_id) after the equality filters."""
ADDED_INDEXES = {
    "forked_from": "(forked_from_run_id, created_us, run_id)",
    "retention": "(completed_us) WHERE erased_us IS NULL",
}
"""Indexes over added columns, made once the columns are there (`retention`: ended runs not erased yet, longest
ended first, what retention reads)."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(at: datetime | None) -> int | None:
    """Microseconds since the epoch (naive times are UTC)."""
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    delta = at - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int | None) -> datetime | None:
    """The UTC time of a microsecond count."""
    return None if value is None else datetime.fromtimestamp(value // 1_000_000, UTC).replace(microsecond=value % 1_000_000)


def row_values(row: RunRow) -> tuple[Any, ...]:
    """A row's column values, in COLUMNS order."""
    return (
        row.run_id, row.workflow_name, row.workflow_id, row.workflow_version, row.owner_key_id, row.status,
        row.cancel_requested, row.cancelled, micros(row.created_at), micros(row.started_at),
        micros(row.completed_at), row.error_code, row.prompt_tokens, row.completion_tokens, row.last_event_id,
        micros(row.waiting_since), row.forked_from_run_id, row.forked_from_visit_uuid, row.forked_from_position,
        micros(row.erased_at),
    )


def row_of(values: Sequence[Any]) -> RunRow:
    """The row of one selected record (COLUMNS order)."""
    created = from_micros(values[8])
    assert created is not None
    return RunRow(
        run_id=values[0], workflow_name=values[1], workflow_id=values[2], workflow_version=values[3],
        owner_key_id=values[4], status=values[5], cancel_requested=bool(values[6]), cancelled=bool(values[7]),
        created_at=created, started_at=from_micros(values[9]), completed_at=from_micros(values[10]),
        error_code=values[11], prompt_tokens=values[12], completion_tokens=values[13], last_event_id=values[14],
        waiting_since=from_micros(values[15]), forked_from_run_id=values[16], forked_from_visit_uuid=values[17],
        forked_from_position=values[18], erased_at=from_micros(values[19]),
    )


def upsert_sql(table: str, mark: str) -> str:
    """Insert a row, or replace the stored one when the new row is at a later position of its run."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
    return (
        f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({', '.join([mark] * len(COLUMNS))}) "
        f"ON CONFLICT (run_id) DO UPDATE SET {updates} WHERE {table}.last_event_id < excluded.last_event_id"
    )


class SqliteRunRows(SQLiteTrackingRecorder):
    """The library's SQLite tracking recorder, plus the run-row table and its indexes."""

    def construct_create_table_statements(self) -> list[str]:
        """The tracking table, the row table, its indexes."""
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {ROWS_TABLE} {_TABLE_BODY}",
            *(f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_{name} ON {ROWS_TABLE} {cols}" for name, cols in INDEXES.items()),
        ]


class PostgresRunRows(PostgresTrackingRecorder):
    """The library's PostgreSQL tracking recorder, plus the run-row table and its indexes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        schema = Identifier(self.datastore.schema)
        self.sql_create_statements.append(
            SQL("CREATE TABLE IF NOT EXISTS {}.{} " + _TABLE_BODY).format(schema, Identifier(ROWS_TABLE))
        )
        for name, cols in INDEXES.items():
            self.sql_create_statements.append(SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} " + cols).format(
                Identifier(f"{ROWS_TABLE}_{name}"), schema, Identifier(ROWS_TABLE),
            ))


def tracking_of(notification_id: int | None) -> Tracking | None:
    """The tracking record of a position in the log (None: nothing to track)."""
    return None if notification_id is None else Tracking(TRACKING_NAME, notification_id)
