"""The run writer: coalesced chunks, one transaction per flush, refusals append nothing."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from functools import partial

import pytest

from api.sse import encode_frame
from domain import events as ev
from domain import run as decide
from domain.errors import IllegalTransition, RunAlreadyStarted
from engine.bootstrap import build_services
from engine.execution.journal import Journal
from engine.runs.writer import MAX_BUFFERED_CHUNKS, RunTakenOver
from tests.support.api import log_end
from tests.support.runs import finish, new_run, open_visit, stream_steps
from tests.support.server import server_settings

pytestmark = pytest.mark.services(load_demos=False, coalesce_ms=30)


async def test_consecutive_thinking_chunks_within_the_window_become_one_event(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    pieces = [f"token{i} " for i in range(500)]
    for piece in pieces:
        await writer.stream(visit_uuid=visit, node_id="research", kind="thinking", content=piece)
    await writer.flush()
    thinking = [e for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)]
    assert len(thinking) < 10
    assert "".join(e.content for e in thinking) == "".join(pieces)


async def test_chunks_reach_the_log_within_the_window_without_a_flush(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    await writer.stream(visit_uuid=visit, node_id="research", kind="thinking", content="hello")
    await asyncio.sleep(0.2)
    assert isinstance((await services.runs.events(run_id))[-1], ev.NodeStreamed)


async def test_tool_calls_are_never_merged_but_share_a_transaction(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    for i in range(3):
        await writer.stream(visit_uuid=visit, node_id="research", kind="tool_call", content=f"{{\"q\":{i}}}", tool_name="search")
    await writer.flush()
    calls = [e for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)]
    assert [c.content for c in calls] == ['{"q":0}', '{"q":1}', '{"q":2}']


async def test_a_decision_flushes_buffered_chunks_first_so_order_is_kept(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    await writer.stream(visit_uuid=visit, node_id="research", kind="thinking", content="before")
    await writer.decide(lambda run, at: decide.complete_visit(run, at, visit_uuid=visit, node_id="research",
                                                              output={"status": 200, "message": "", "data": {}}))
    tail = (await services.runs.events(run_id))[-2:]
    assert [type(e) for e in tail] == [ev.NodeStreamed, ev.VisitCompleted]


async def test_an_illegal_transition_appends_nothing(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    before = await log_end(services)
    with pytest.raises(RunAlreadyStarted):
        await writer.decide(decide.start_run)
    with pytest.raises(IllegalTransition):
        await writer.decide(lambda run, at: decide.complete_run(run, at, output={}), decide.start_run)
    with pytest.raises(IllegalTransition):
        await writer.stream(visit_uuid="no-such-visit", node_id="x", kind="thinking", content="x")
    assert await log_end(services) == before


async def test_concurrent_writes_to_one_run_are_serialised(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visits = await asyncio.gather(*(open_visit(writer, node_id=f"n{i}") for i in range(10)))
    events = await services.runs.events(run_id)
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    assert len({e.visit_uuid for e in events if isinstance(e, ev.VisitStarted)}) == len(visits) == 10


async def test_thinking_of_parallel_visits_is_merged_per_visit_and_keeps_each_visits_order(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    left, right = await open_visit(writer, "left"), await open_visit(writer, "right")
    for i in range(100):
        await writer.stream(visit_uuid=left, node_id="left", kind="thinking", content=f"L{i} ")
        await writer.stream(visit_uuid=right, node_id="right", kind="thinking", content=f"R{i} ")
    await writer.flush()
    streamed = [e for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)]
    assert len(streamed) < 10
    for visit, prefix in ((left, "L"), (right, "R")):
        text = "".join(e.content for e in streamed if e.visit_uuid == visit)
        assert text == "".join(f"{prefix}{i} " for i in range(100))


async def test_full_buffers_are_stored_while_chunks_keep_coming_and_positions_never_skip(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    count = 3 * MAX_BUFFERED_CHUNKS + 10
    await stream_steps(writer, visit, count)
    await writer.flush()
    events = await services.runs.events(run_id)
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    steps = [e.content for e in events if isinstance(e, ev.NodeStreamed)]
    assert steps == [f'{{"iteration":{i}}}' for i in range(count)]
    assert writer.run.version == events[-1].originator_version


async def test_an_executing_writer_that_loses_a_race_to_another_executor_stops_and_stores_none_of_its_chunks(
        services, store, tmp_path):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    writer.executing = True
    visit = await open_visit(writer)
    other = build_services(server_settings(store, tmp_path / "other"), encode_frame=encode_frame)
    await other.start()
    try:
        await open_visit(await other.runs.writer(run_id), node_id="elsewhere")
    finally:
        await other.close()
    before = await services.runs.events(run_id)
    with pytest.raises(RunTakenOver):
        await stream_steps(writer, visit, MAX_BUFFERED_CHUNKS + 20)
        await writer.flush()
    assert await services.runs.events(run_id) == before


async def test_a_writer_that_loses_a_race_to_a_command_of_another_process_catches_up_and_stores_its_chunks(
        services, store, tmp_path):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    writer.executing = True
    visit = await open_visit(writer)
    other = build_services(server_settings(store, tmp_path / "other"), encode_frame=encode_frame)
    await other.store.start()  # only the store: another process's command, not its engine
    try:
        await (await other.runs.writer(run_id)).decide(decide.request_cancel)
    finally:
        await other.store.close()
    await stream_steps(writer, visit, 50)
    await writer.flush()
    events = await services.runs.events(run_id)
    assert [type(e).__name__ for e in events].count("RunCancelRequested") == 1
    assert writer.run.cancel_requested and writer.run.version == events[-1].originator_version
    assert sum(isinstance(e, ev.NodeStreamed) for e in events) >= 1


async def test_callers_cancelled_in_the_middle_of_appends_leave_the_writer_in_step_with_the_log(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)

    async def stream_and_flush(start: int) -> None:
        await stream_steps(writer, visit, MAX_BUFFERED_CHUNKS + 100, start=start)
        await writer.flush()

    for round_, delay in enumerate((0.0, 0.001, 0.003, 0.01, 0.03)):
        caller = asyncio.ensure_future(stream_and_flush(round_ * 10_000))
        await asyncio.sleep(delay)
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
    await writer.flush()
    await finish(writer, visit)
    events = await services.runs.events(run_id)
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    assert writer.run.version == events[-1].originator_version


async def test_an_executing_writer_whose_failed_append_was_stored_after_all_takes_it_as_its_own(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    writer.executing = True
    visit = await open_visit(writer)
    await stream_steps(writer, visit, 1)  # the visit's first chunk, stored alone
    store = services.store
    really_append = store.append_to_stream

    async def stored_but_lost(events):
        await really_append(events)
        raise ConnectionError("the connection dropped before the commit was acknowledged")

    store.append_to_stream = stored_but_lost
    await stream_steps(writer, visit, 2, start=1)
    with pytest.raises(ConnectionError):
        await writer.flush()
    store.append_to_stream = really_append
    await stream_steps(writer, visit, 3, start=3)
    await writer.flush()
    events = await services.runs.events(run_id)
    steps = [e.content for e in events if isinstance(e, ev.NodeStreamed)]
    assert steps == [f'{{"iteration":{i}}}' for i in range(6)]
    assert writer.taken_over is None and writer.run.version == events[-1].originator_version


async def test_a_decision_whose_waiting_task_is_cancelled_is_still_folded_once_it_is_stored(services):
    run_id = await new_run(services)
    inflight: set[asyncio.Future] = set()
    journal, folded = Journal(await services.runs.writer(run_id), inflight), []
    start_visit = partial(decide.start_visit, visit_uuid="v1", node_id="research", node_type="agent",
                          node_label="Research", iter_seq=0, sort_order=1)
    waiting = asyncio.create_task(journal.decide(start_visit, then=folded.extend))
    await asyncio.sleep(0)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await asyncio.gather(*inflight)
    assert [type(e) for e in folded] == [ev.VisitStarted]
    assert folded == (await services.runs.events(run_id))[-1:]


async def other_turns_while(work) -> int:
    """How many turns another task took on the event loop while `work` ran."""
    turns, done = 0, False

    async def other() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    other_task = asyncio.create_task(other())
    await asyncio.sleep(0)
    taken = turns
    await work
    done = True
    await other_task
    return turns - taken


@pytest.mark.parametrize(("turn_seconds", "yields"), [(0.0, True), (3600.0, False)])
async def test_chunks_handed_over_without_waiting_yield_the_loop_once_their_turn_is_over(services, turn_seconds, yields):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    writer.turn_seconds = turn_seconds
    await stream_steps(writer, visit, 1)  # the visit's first chunk waits for its commit; a turn begins
    turns = await other_turns_while(stream_steps(writer, visit, 100, start=1))
    assert (turns >= 100) is yields and (turns <= 1) is not yields
    await writer.flush()
    steps = [e.content for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)]
    assert steps == [f'{{"iteration":{i}}}' for i in range(101)]


async def test_a_visits_first_chunk_is_stored_when_stream_returns_and_the_burst_behind_it_goes_together(services):
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    for burst in range(2):
        visit = await open_visit(writer)
        await stream_steps(writer, visit, 1, start=burst * 1000)
        assert (await services.runs.events(run_id))[-1].content == f'{{"iteration":{burst * 1000}}}'
        groups = services.store.groups.written
        await stream_steps(writer, visit, 500, start=burst * 1000 + 1)
        await writer.flush()
        assert services.store.groups.written - groups < 10, "a burst is appended in a few transactions, not a chunk each"
    steps = [e.content for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)]
    assert steps == [f'{{"iteration":{b * 1000 + i}}}' for b in range(2) for i in range(501)]


async def test_a_visits_first_chunk_is_buffered_as_any_other_while_the_store_writes_for_another_run(services):
    run_id, other_id = await new_run(services), await new_run(services)
    writer, other = await services.runs.writer(run_id), await services.runs.writer(other_id)
    visit, other_visit = await open_visit(writer), await open_visit(other)
    gate = threading.Event()
    store_append = services.store.sync.append_to_stream

    def gated(events, **options):
        gate.wait(10)
        return store_append(events, **options)

    services.store.sync.append_to_stream = gated
    try:
        busy = asyncio.ensure_future(stream_steps(other, other_visit, 1))
        while not services.store.groups.writing:
            await asyncio.sleep(0.01)
        await asyncio.wait_for(stream_steps(writer, visit, 1), 1)  # returns at once: the chunk is only buffered
    finally:
        gate.set()
        services.store.sync.append_to_stream = store_append
    await busy
    await writer.flush()
    assert [e.content for e in await services.runs.events(run_id) if isinstance(e, ev.NodeStreamed)] == [
        '{"iteration":0}']
