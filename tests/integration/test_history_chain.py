"""The hash chain on each store: computed at every append, across processes, and from where an older log stops."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from eventsourcing.application import Application

from domain.chain import event_line, genesis
from domain.chain_check import check_lines
from engine.store import AsyncEventStore, ConcurrentAppend, EventStore, parse_database_url
from engine.store.event_store import STORED_EVENT_TYPES
from engine.store.location import library_env
from engine.store.mapper import MsgspecMapper
from engine.store.url import APP_NAME
from tests.support.event_log import step_chunks

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


async def exported(url: str, run_id) -> list[bytes]:
    """The run's lines as GET .../events serves them."""
    store = AsyncEventStore(EventStore(parse_database_url(url)))
    await store.start()
    try:
        return [event_line(state, cells) for _, state, cells in await store.read_lines(run_id)]
    finally:
        await store.close()


async def test_every_append_chains_its_events_from_the_run_id_on(log, store):
    run_id = uuid4()
    log.append_to_stream(step_chunks(run_id, 1, ["a", "b"], AT))
    log.append_to_stream(step_chunks(run_id, 3, ["c"], AT))
    report = check_lines(await exported(store, run_id))
    assert report.verified and report.events == 3 and report.unchained_upto == 0
    assert report.head == log._stored_link(run_id, 3).hex()


async def test_an_append_that_lost_a_race_to_another_process_is_chained_after_what_that_process_stored(log, store):
    run_id = uuid4()
    other = EventStore(parse_database_url(store))
    try:
        log.append_to_stream(step_chunks(run_id, 1, ["a"], AT))
        other.append_to_stream(step_chunks(run_id, 2, ["theirs"], AT))
        with pytest.raises(ConcurrentAppend):
            log.append_to_stream(step_chunks(run_id, 2, ["mine"], AT))
        log.append_to_stream(step_chunks(run_id, 3, ["mine, decided again"], AT))
        other.append_to_stream(step_chunks(run_id, 4, ["theirs again"], AT))
    finally:
        other.close()
    report = check_lines(await exported(store, run_id))
    assert report.verified and report.events == 4


class _LibraryDefaults(Application):
    """The eventsourcing Application as the code before the chain stored events (no chain columns)."""

    name = APP_NAME


async def test_a_log_stored_before_the_chain_keeps_its_rows_and_its_runs_chain_from_the_next_append(store):
    location = parse_database_url(store)
    env = {k: v for k, v in library_env(location).items() if k != "APPLICATION_RECORDER_TOPIC"}
    old = _LibraryDefaults(env=env)
    run_id = uuid4()
    mapper = MsgspecMapper(STORED_EVENT_TYPES)
    old.recorder.insert_events([mapper.to_stored_event(e) for e in step_chunks(run_id, 1, ["old 1", "old 2"], AT)])
    old.close()
    upgraded = EventStore(location)
    try:
        upgraded.append_to_stream(step_chunks(run_id, 3, ["new 3"], AT))
        assert upgraded._stored_link(run_id, 2) is None
    finally:
        upgraded.close()
    report = check_lines(await exported(store, run_id))
    assert report.verified and report.unchained_upto == 2 and report.events == 3
    assert report.head is not None and report.head != genesis(run_id).hex()
