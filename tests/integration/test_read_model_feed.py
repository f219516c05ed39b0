"""The run read model's feed: a run's row is written in its append's own transaction (one commit), and a failure of
the row's part leaves the append stored."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

import pytest

from tests.support.runs import new_run, open_visit

pytestmark = pytest.mark.services(load_demos=False)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_a_runs_row_is_written_in_its_appends_transaction_with_the_position(services):
    services.store.sync.after_append = None  # nothing is fed after the commit: the row can only come with it
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    await open_visit(writer)
    row = await services.read_model.row(run_id)
    assert row is not None and row.last_event_id == writer.run.version
    assert services.read_model.rows.tracking_position() == services.store.sync.last_notification_id()


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
async def test_a_runs_row_is_written_in_its_appends_transaction_on_postgresql_too(services, monkeypatch):
    services.store.sync.after_append = None  # nothing is fed after the commit
    monkeypatch.setattr(services.read_model.rows, "apply", lambda *args, **kwargs: None)  # nor by the runner
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    await open_visit(writer)
    row = await services.read_model.row(run_id)
    assert row is not None and row.last_event_id == writer.run.version


async def test_a_failure_of_the_rows_part_leaves_the_append_stored_and_is_logged(services, monkeypatch, caplog):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    before = await services.read_model.row(run_id)

    def broken(curs, events, notification_id, **options):
        curs.execute("INSERT INTO no_such_table VALUES (1)")

    monkeypatch.setattr(services.read_model.rows, "apply_in", broken)
    with caplog.at_level(logging.ERROR, logger="flowtrail.readmodel"):
        await open_visit(writer)
    assert (await services.runs.events(run_id))[-1].originator_version == writer.run.version
    assert await services.read_model.row(run_id) == before
    assert "missed an append" in caplog.text


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_rows_that_missed_an_append_while_the_disk_was_full_catch_up_at_the_next_one(services, monkeypatch):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    rows = services.read_model.rows
    apply_in = rows.apply_in

    def full(curs, events, notification_id, **options):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(rows, "apply_in", full)
    await open_visit(writer)
    monkeypatch.setattr(rows, "apply_in", apply_in)
    await open_visit(writer)
    row = await services.read_model.row(run_id)
    assert row is not None and row.last_event_id == writer.run.version


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
async def test_the_postgresql_runner_skips_what_this_process_folded_in_the_appends_transaction(services, monkeypatch):
    runner = services.read_model.runner
    assert runner is not None
    folded_again: list[Any] = []
    apply = runner.projection.rows.apply

    def counted(events, notification_id, **options):
        folded_again.extend(events)
        return apply(events, notification_id, **options)

    monkeypatch.setattr(runner.projection.rows, "apply", counted)
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    await open_visit(writer)
    for _ in range(100):  # the runner reads the log every 50 ms
        if len(services.read_model.folded_here) == 0:
            break
        await asyncio.sleep(0.05)
    assert len(services.read_model.folded_here) == 0
    assert [e for e in folded_again if e.originator_id == run_id] == []
    row = await services.read_model.row(run_id)
    assert row is not None and row.last_event_id == writer.run.version
