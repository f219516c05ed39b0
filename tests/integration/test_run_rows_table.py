"""A run-row table made before a column was added gets the column (and its index) when the read model adds the
missing ones, its rows kept (the read model then rebuilds them from the log)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from domain import events as ev
from engine.readmodel import run_rows
from engine.readmodel.rows import ROWS_READ_AT_ONCE
from engine.readmodel.table import COLUMNS, ROWS_TABLE, row_of
from engine.store import EventStore

FIRST_TABLE = (
    "(run_id TEXT PRIMARY KEY, workflow_name TEXT NOT NULL, workflow_id BIGINT NOT NULL, "
    "workflow_version BIGINT NOT NULL, owner_key_id TEXT NOT NULL, status TEXT NOT NULL, "
    "cancel_requested BOOLEAN NOT NULL, cancelled BOOLEAN NOT NULL, created_us BIGINT NOT NULL, "
    "started_us BIGINT, completed_us BIGINT, error_code TEXT, prompt_tokens BIGINT NOT NULL, "
    "completion_tokens BIGINT NOT NULL, last_event_id BIGINT NOT NULL)"
)
"""The table as the read model first shipped it (decision 21)."""


def table_of(log: EventStore) -> str:
    return ROWS_TABLE if log.location.kind == "sqlite" else f'"{log.location.schema}".{ROWS_TABLE}'


def test_a_table_made_before_the_fork_columns_gets_them_and_keeps_its_rows(log):
    mark = "?" if log.location.kind == "sqlite" else "%s"
    datastore = log.app.recorder.datastore
    with datastore.transaction(commit=True) as curs:
        curs.execute(f"CREATE TABLE {table_of(log)} {FIRST_TABLE}")
        curs.execute(f"INSERT INTO {table_of(log)} VALUES ({', '.join([mark] * 15)})",
                     ("a" * 32, "flow", 1, 1, "key", "SUCCESS", False, False, 5, None, None, None, 3, 4, 9))
    rows = run_rows(log)
    assert rows.add_missing_columns() == ["waiting_us", "forked_from_run_id", "forked_from_visit_uuid",
                                          "forked_from_position", "erased_us"]
    assert run_rows(log).add_missing_columns() == []  # opening it again changes nothing
    fork_id, at = uuid4(), datetime.now(UTC)
    rows.apply([
        ev.RunCreated(originator_id=fork_id, originator_version=1, timestamp=at, workflow_id=1, workflow_name="flow",
                      workflow_version=1, display_name="Flow", mode="DAG"),
        ev.RunForked(originator_id=fork_id, originator_version=2, timestamp=at, source_run_id=uuid4(),
                     source_position=7, source_workflow_version=1, source_visit_uuid="v3", source_node_id="b"),
    ])
    with datastore.transaction(commit=False) as curs:
        curs.execute(f"SELECT {', '.join(COLUMNS)} FROM {table_of(log)} ORDER BY created_us")
        old, fork = (row_of([found[c] for c in COLUMNS]) for found in curs.fetchall())
    assert (old.prompt_tokens, old.last_event_id, old.forked_from_run_id) == (3, 9, None)
    assert (fork.forked_from_visit_uuid, fork.forked_from_position, fork.last_event_id) == ("v3", 7, 2)


def test_one_apply_for_more_runs_than_one_statement_reads_folds_every_runs_row(log):
    rows, at = run_rows(log), datetime.now(UTC)
    rows.add_missing_columns()
    created = [ev.RunCreated(originator_id=uuid4(), originator_version=1, timestamp=at, workflow_id=1,
                             workflow_name="flow", workflow_version=1, display_name="Flow", mode="DAG")
               for _ in range(ROWS_READ_AT_ONCE + 20)]
    rows.apply(created)
    rows.apply([ev.RunStarted(originator_id=e.originator_id, originator_version=2, timestamp=at) for e in created])
    with log.app.recorder.datastore.transaction(commit=False) as curs:
        curs.execute(f"SELECT status, last_event_id FROM {table_of(log)}")
        assert {(r["status"], r["last_event_id"]) for r in curs.fetchall()} == {("RUNNING", 2)}
        curs.execute(f"SELECT COUNT(*) AS n FROM {table_of(log)}")
        assert curs.fetchone()["n"] == len(created)
