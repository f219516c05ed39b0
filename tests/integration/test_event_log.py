"""The event log on each store: what goes in comes back, and a taken position is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from domain import events as ev
from engine.store import ConcurrentAppend
from tests.support.event_log import step_chunks

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def chunks(run_id, first: int, contents: list[str]) -> list[ev.NodeStreamed]:
    return step_chunks(run_id, first, contents, AT)


def test_a_batch_reads_back_exactly_with_consecutive_notification_ids(log):
    run_id = uuid4()
    contents = ["plain", "ünïcödé ✓", 'quotes " and \\ backslash', "{\"nested\":[1,2]}", "x" * 100_000, ""]
    ids = log.append_to_stream(chunks(run_id, 1, contents))
    assert ids == list(range(ids[0], ids[0] + len(contents)))
    assert log.read_stream(run_id) == chunks(run_id, 1, contents)
    assert log.last_position(run_id) == len(contents)


def test_a_taken_position_is_refused_and_the_whole_batch_appends_nothing(log):
    run_id = uuid4()
    log.append_to_stream(chunks(run_id, 1, ["a", "b"]))
    before = log.last_notification_id()
    with pytest.raises(ConcurrentAppend):
        log.append_to_stream(chunks(run_id, 2, ["late", "later"]))
    assert log.last_notification_id() == before
    assert [e.content for e in log.read_stream(run_id)] == ["a", "b"]


def test_batches_of_several_runs_keep_their_own_positions(log):
    first, second = uuid4(), uuid4()
    log.append_to_stream(chunks(first, 1, ["a1", "a2"]) + chunks(second, 1, ["b1"]))
    log.append_to_stream(chunks(second, 2, ["b2"]))
    assert [e.content for e in log.read_stream(first)] == ["a1", "a2"]
    assert [e.content for e in log.read_stream(second, after=1)] == ["b2"]


async def test_the_async_read_path_returns_what_the_library_reads(async_log):
    run_id = uuid4()
    await async_log.append_to_stream(chunks(run_id, 1, [f"c{i}" for i in range(30)]))
    library = async_log.sync.read_stream(run_id)
    assert await async_log.read_stream(run_id) == library
    assert await async_log.read_stream(run_id, after=10, limit=5) == library[10:15]
    assert await async_log.read_stream(run_id, after=30) == []
    assert await async_log.last_position(run_id) == 30


async def test_an_unknown_stream_reads_as_empty(async_log):
    assert await async_log.read_stream(uuid4()) == []
    assert await async_log.last_position(uuid4()) == 0
