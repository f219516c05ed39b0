"""Keeps the run-row table current: folds appended events into the stored rows (synchronous).

One `apply` is one transaction: the stored rows of the runs concerned are read, the new events
folded in (`projections.run_row.fold_rows`), the rows written back, and, when tracking, the
log position recorded. A row behind the first new event of its run (events another process
appended, or a write this process lost) is first caught up from the run's stream, in the same
transaction, so a row is always the fold of its run's events 1..last_event_id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from uuid import UUID

from domain import events as ev
from engine.readmodel.table import (
    ADDED_COLUMNS,
    ADDED_INDEXES,
    COLUMNS,
    ROWS_TABLE,
    TRACKING_NAME,
    PostgresRunRows,
    SqliteRunRows,
    row_of,
    row_values,
    tracking_of,
    upsert_sql,
)
from engine.store.mapper import MsgspecMapper
from projections.run_row import RunRow, fold_rows

RUN_EVENT_SET = frozenset(ev.RUN_EVENT_TYPES)
ROWS_READ_AT_ONCE = 500
"""The most runs whose rows one statement reads (well under SQLite's and PostgreSQL's parameter limits)."""


def run_events(events: Iterable[Any]) -> list[ev.RunEvent]:
    """The run events among stored events (the catalogue's and idempotency records are not runs)."""
    return [e for e in events if type(e) in RUN_EVENT_SET]


class RunRows:
    """The run-row table of one store, written through the library's tracking recorder."""

    def __init__(self, recorder: SqliteRunRows | PostgresRunRows, *, events_table: str, mapper: MsgspecMapper) -> None:
        self.recorder = recorder
        self.mapper = mapper
        if isinstance(recorder, SqliteRunRows):
            self._mark, self.table = "?", ROWS_TABLE
            self._run_key: Callable[[UUID], str | UUID] = _hex
        else:
            schema = recorder.datastore.schema.replace('"', '""')
            self._mark, self.table, self._run_key = "%s", f'"{schema}".{ROWS_TABLE}', _uuid
            events_table = f'"{schema}".{events_table}'
        self._schema = None if isinstance(recorder, SqliteRunRows) else recorder.datastore.schema
        self._upsert = upsert_sql(self.table, self._mark)
        self._select_rows = f"SELECT {', '.join(COLUMNS)} FROM {self.table} WHERE run_id IN "
        self._select_gap = (
            f"SELECT state FROM {events_table} WHERE originator_id = {self._mark} "
            f"AND originator_version > {self._mark} AND originator_version < {self._mark} ORDER BY originator_version"
        )

    def apply(self, events: Sequence[Any], notification_id: int | None = None, *, track: bool = False) -> None:
        """Fold stored events into their runs' rows (one transaction); with `track`, record `notification_id` too."""
        by_run = _by_run(events)
        if not by_run and not track:
            return
        with self.recorder.datastore.transaction(commit=True) as curs:
            self._apply_in(curs, by_run, notification_id, track=track)

    def apply_in(self, curs: Any, events: Sequence[Any], notification_id: int | None, *, track: bool = False) -> None:
        """Fold stored events into their runs' rows, in the caller's transaction (the append's own); with `track`,
        record `notification_id` too (SQLite; on PostgreSQL the projection runner tracks)."""
        self._apply_in(curs, _by_run(events), notification_id, track=track)

    def _apply_in(self, curs: Any, by_run: dict[UUID, list[ev.RunEvent]], notification_id: int | None, *,
                  track: bool) -> None:
        stored = self._stored(curs, list(by_run))
        changed = [row for run_id, news in by_run.items()
                   if (row := self._folded(curs, run_id, stored.get(run_id.hex), news)) is not None]
        if changed:
            curs.executemany(self._upsert, [row_values(r) for r in changed])
        if track:
            self._track(curs, notification_id)

    def _stored(self, curs: Any, run_ids: list[UUID]) -> dict[str, RunRow]:
        """The stored rows of these runs, by run id (hex), read together (in an append's transaction on PostgreSQL,
        one read is one round trip while the events table is locked), ROWS_READ_AT_ONCE runs a statement."""
        stored: dict[str, RunRow] = {}
        for start in range(0, len(run_ids), ROWS_READ_AT_ONCE):
            some = [r.hex for r in run_ids[start:start + ROWS_READ_AT_ONCE]]
            curs.execute(self._select_rows + f"({', '.join([self._mark] * len(some))})", some)
            stored.update((found["run_id"], row_of([found[c] for c in COLUMNS])) for found in curs.fetchall())
        return stored

    def _folded(self, curs: Any, run_id: UUID, row: RunRow | None, news: list[ev.RunEvent]) -> RunRow | None:
        """The run's row (`row` as stored) after `news`, None when the stored row already has them all."""
        last = row.last_event_id if row is not None else 0
        if news[-1].originator_version <= last:
            return None
        first = news[0].originator_version
        if first > last + 1:
            curs.execute(self._select_gap, (self._run_key(run_id), last, first))
            row = fold_rows(row, [self.mapper.decode_state(r["state"]) for r in curs.fetchall()])
        return fold_rows(row, news)

    def _track(self, curs: Any, notification_id: int | None) -> None:
        """Record the position when it moves forward (feeds on several threads may finish out of order)."""
        tracking = tracking_of(notification_id)
        if tracking is None:
            return
        current = self.recorder._max_tracking_id(TRACKING_NAME, curs)  # the library's in-transaction read
        if current is None or tracking.notification_id > current:
            self.recorder._insert_tracking(curs, tracking)  # the library's in-transaction write

    def replace_all(self, rows: Sequence[RunRow], notification_id: int | None) -> None:
        """Replace every row and the tracking position in one transaction (a rebuild from the log)."""
        with self.recorder.datastore.transaction(commit=True) as curs:
            curs.execute(f"DELETE FROM {self.table}")
            if rows:
                curs.executemany(self._upsert, [row_values(r) for r in rows])
            self._track(curs, notification_id)

    def put(self, rows: Sequence[RunRow]) -> None:
        """Write rows as they are, in one transaction, tracking nothing (benches fill the table this way)."""
        with self.recorder.datastore.transaction(commit=True) as curs:
            curs.executemany(self._upsert, [row_values(r) for r in rows])

    def add_missing_columns(self) -> list[str]:
        """Add the columns a table made by an earlier version lacks (`ADDED_COLUMNS`) and the indexes over them; the
        columns it added."""
        with self.recorder.datastore.transaction(commit=True) as curs:
            if self._schema is None:
                curs.execute(f"PRAGMA table_info({ROWS_TABLE})")
            else:
                curs.execute("SELECT column_name AS name FROM information_schema.columns "
                             "WHERE table_schema = %s AND table_name = %s", (self._schema, ROWS_TABLE))
            present = {row["name"] for row in curs.fetchall()}
            added = [column for column in ADDED_COLUMNS if column not in present]
            exists = "" if self._schema is None else "IF NOT EXISTS "
            for column in added:
                curs.execute(f"ALTER TABLE {self.table} ADD COLUMN {exists}{column} {ADDED_COLUMNS[column]}")
            for name, cols in ADDED_INDEXES.items():
                curs.execute(f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_{name} ON {self.table} {cols}")
        return added

    def tracking_position(self) -> int:
        """The log position the rows are tracked at (0: none)."""
        return self.recorder.max_tracking_id(TRACKING_NAME) or 0


def _by_run(events: Iterable[Any]) -> dict[UUID, list[ev.RunEvent]]:
    """The run events among `events`, by run, in order."""
    by_run: dict[UUID, list[ev.RunEvent]] = defaultdict(list)
    for event in run_events(events):
        by_run[event.originator_id].append(event)
    return by_run


def _hex(run_id: UUID) -> str | UUID:
    return run_id.hex


def _uuid(run_id: UUID) -> str | UUID:
    return run_id
