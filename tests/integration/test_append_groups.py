"""Group commit on each store: appends made together are written together, and each keeps its own outcome."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from domain.chain import event_line
from domain.chain_check import check_lines
from engine.store import ConcurrentAppend
from tests.support.event_log import step_chunks

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


async def test_fifty_runs_appending_at_once_are_written_in_fewer_transactions_than_appends(async_log):
    runs = [uuid4() for _ in range(50)]
    groups_before = async_log.groups.written
    ids = await asyncio.gather(*(async_log.append_to_stream(step_chunks(run, 1, ["a", "b"], AT)) for run in runs))
    assert async_log.groups.written - groups_before < len(runs)
    assert sorted(i for pair in ids for i in pair) == sorted(set(i for pair in ids for i in pair))
    for run, pair in zip(runs, ids, strict=True):
        assert [e.content for e in await async_log.read_stream(run)] == ["a", "b"]
        assert pair[1] == pair[0] + 1


async def test_a_lost_race_in_a_group_fails_only_its_own_append(async_log):
    taken, others = uuid4(), [uuid4() for _ in range(5)]
    await async_log.append_to_stream(step_chunks(taken, 1, ["first"], AT))
    outcomes = await asyncio.gather(
        *(async_log.append_to_stream(step_chunks(run, 1, ["x"], AT)) for run in others[:3]),
        async_log.append_to_stream(step_chunks(taken, 1, ["late"], AT)),
        *(async_log.append_to_stream(step_chunks(run, 1, ["y"], AT)) for run in others[3:]),
        return_exceptions=True,
    )
    assert [type(o) for o in outcomes] == [list, list, list, ConcurrentAppend, list, list]
    assert [e.content for e in await async_log.read_stream(taken)] == ["first"]
    for run in others:
        assert len(await async_log.read_stream(run)) == 1


async def test_two_appends_of_one_run_in_a_group_are_chained_in_order(async_log):
    run = uuid4()
    await asyncio.gather(
        async_log.append_to_stream(step_chunks(run, 1, ["a"], AT)),
        async_log.append_to_stream(step_chunks(run, 2, ["b", "c"], AT)),
    )
    lines = await async_log.read_lines(run)
    assert [position for position, _, _ in lines] == [1, 2, 3]
    report = check_lines([event_line(state, cells) for _, state, cells in lines])
    assert report.verified and report.events == 3 and report.unchained_upto == 0


async def test_an_append_left_while_queued_is_not_made(async_log):
    groups = async_log.groups
    writing = asyncio.ensure_future(groups.append(step_chunks(uuid4(), 1, ["a"], AT), retried=False, deadline=None))
    while not groups.writing or groups.queued:
        await asyncio.sleep(0)
    left = uuid4()
    queued = asyncio.ensure_future(groups.append(step_chunks(left, 1, ["b"], AT), retried=False, deadline=None))
    await asyncio.sleep(0)
    assert groups.queued == 1
    queued.cancel()
    await writing
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert groups.queued == 0
    assert await async_log.read_stream(left) == []
