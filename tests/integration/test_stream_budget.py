"""What a run buffers ahead of the store: steps go at once, thinking waits for its window, a full share waits."""

from __future__ import annotations

import asyncio
import threading

import pytest

from domain import events as ev
from engine.runs.budget import StreamBudget
from tests.support.runs import new_run, open_visit, stream_steps

pytestmark = pytest.mark.services(load_demos=False, coalesce_ms=10_000)


async def streamed(services, run_id) -> list[ev.NodeStreamed]:
    return [e for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)]


async def test_a_step_reaches_the_log_without_waiting_for_the_coalescing_window(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    await stream_steps(writer, visit, 1)
    for _ in range(100):
        if await streamed(services, run_id):
            break
        await asyncio.sleep(0.02)
    assert [e.content for e in await streamed(services, run_id)] == ['{"iteration":0}']


async def test_thinking_waits_for_its_window_to_be_merged(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    for token in ("one ", "two "):
        await writer.stream(visit_uuid=visit, node_id="research", kind="thinking", content=token)
    await asyncio.sleep(0.2)
    assert await streamed(services, run_id) == []
    await writer.flush()
    assert [e.content for e in await streamed(services, run_id)] == ["one two "]


async def test_a_run_never_appends_more_than_its_share_of_the_budget_at_once(services):
    services.runs.budget.chunks = 64
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    batches: list[int] = []
    writer.on_appended = lambda run, events: batches.append(len(events))
    await stream_steps(writer, visit, 1000)
    await writer.flush()
    assert len(await streamed(services, run_id)) == 1000
    assert max(batches) <= 64


async def test_a_run_at_its_share_goes_on_as_soon_as_its_buffer_is_handed_over(services):
    services.runs.budget.chunks = 64
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    turns = threading.Semaphore(0)
    store_append = services.store.sync.append_to_stream

    def gated(events, **options):
        turns.acquire(timeout=10)
        return store_append(events, **options)

    services.store.sync.append_to_stream = gated
    try:
        first = asyncio.ensure_future(stream_steps(writer, visit, 1))  # alone: it waits until it is stored
        await asyncio.sleep(0.05)  # the first step's append has begun and waits for its turn
        await stream_steps(writer, visit, 63, start=1)
        await asyncio.sleep(0.05)  # a hand-over of the 63 waits for the first append
        at_share = asyncio.ensure_future(stream_steps(writer, visit, 1, start=64))
        await asyncio.sleep(0.05)
        assert not at_share.done()
        turns.release()  # the first append is stored; the 64 buffered go, and wait for their turn
        await asyncio.wait_for(at_share, 5)
        await asyncio.wait_for(first, 5)
    finally:
        turns.release(10)
        await writer.flush()
        services.store.sync.append_to_stream = store_append
    assert len(await streamed(services, run_id)) == 65


def test_runs_streaming_together_share_the_budget_and_none_gets_less_than_the_least():
    budget = StreamBudget(1024, least=32)
    alone, other, many = object(), object(), [object() for _ in range(98)]
    budget.holds(alone)
    assert budget.share() == 1024
    budget.holds(other)
    assert budget.share() == 512
    for writer in many:
        budget.holds(writer)
    assert budget.share() == 32
    for writer in (other, *many):
        budget.released(writer)
    assert budget.share() == 1024


def test_a_smaller_budget_lowers_the_least_share_to_a_32nd_of_it():
    budget = StreamBudget(256)
    for writer in [object() for _ in range(50)]:
        budget.holds(writer)
    assert budget.share() == 8


def test_a_run_streaming_alone_buffers_no_more_than_one_runs_most():
    budget = StreamBudget(1024, per_run=384)
    alone, other, many = object(), object(), [object() for _ in range(48)]
    budget.holds(alone)
    assert budget.share() == 384
    budget.holds(other)
    assert budget.share() == 384
    for writer in many:
        budget.holds(writer)
    assert budget.share() == 32
