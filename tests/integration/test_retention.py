"""Retention erases the runs that ended longest ago, a batch per sweep, never a run that has not ended, and only on
one replica at a time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine.clock import utcnow
from engine.readmodel import run_rows
from engine.readmodel.table import ROWS_TABLE
from engine.runs.creation import NewRun
from engine.runs.retention import SWEEP_LOCK, Retention
from engine.settings import RetentionSettings
from engine.store import AsyncEventStore, EventStore, parse_database_url
from tests.support.runs import FLOW, new_run, run_with_steps


def retention(services, batch: int = 2) -> Retention:
    return Retention(RetentionSettings(days=1, batch=batch), services.store, services.read_model, services.eraser)


async def erased(services, run_id) -> bool:
    return (await services.runs.state(run_id)).erased


async def test_a_sweep_erases_the_longest_ended_runs_a_batch_at_a_time_and_never_one_that_has_not_ended(services):
    ended = [await run_with_steps(services, 2) for _ in range(3)]
    running = await new_run(services)
    created = (await services.runs.create(NewRun(caller_key_id="all", **FLOW))).run_id
    sweeper, later = retention(services), utcnow() + timedelta(days=2)
    assert await sweeper.sweep(utcnow()) == 0
    assert await sweeper.sweep(later) == 2
    assert [await erased(services, run_id) for run_id in ended] == [True, True, False]
    assert await sweeper.sweep(later) == 1
    assert await sweeper.sweep(later) == 0
    assert not await erased(services, running) and not await erased(services, created)
    last = (await services.runs.events(ended[0]))[-1]
    assert (type(last).__name__, last.erased_by) == ("RunErased", "retention")


@pytest.mark.parametrize("store", ["postgres"], indirect=True)  # on SQLite one process owns the store and sweeps
async def test_while_another_replica_sweeps_this_one_erases_nothing(services, store):
    run_id = await run_with_steps(services, 2)
    other = AsyncEventStore(EventStore(parse_database_url(store)))
    await other.start()
    try:
        async with other.exclusively(SWEEP_LOCK) as held:
            assert held
            assert await retention(services).sweep(utcnow() + timedelta(days=2)) == 0
            assert not await erased(services, run_id)
    finally:
        await other.close()
    assert await retention(services).sweep(utcnow() + timedelta(days=2)) == 1


def test_a_run_row_table_made_before_erasure_gets_its_column_and_index_at_start_up(log):
    rows = run_rows(log)
    with rows.recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {ROWS_TABLE}_retention")
        cursor.execute(f"ALTER TABLE {rows.table} DROP COLUMN erased_us")
    upgraded = run_rows(log)
    assert upgraded.add_missing_columns() == ["erased_us"]
    with upgraded.recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute(f"SELECT erased_us FROM {upgraded.table}")
        assert cursor.fetchall() == []
