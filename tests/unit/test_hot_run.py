"""A hot run hands out its frames in order, a big one in a batch of its own."""

from __future__ import annotations

from api.sse import encode_frame
from engine.runs.hot import BIG_MESSAGE_BYTES, HotRun
from engine.runs.hot_runs import HotRuns
from tests.unit.builders import RUN_ID, RunLog


def long_visit() -> RunLog:
    run = RunLog().created().started()
    visit = run.visit("A")
    for i in range(BIG_MESSAGE_BYTES // 100):
        run.stream(visit, "step", f"{i:04d}" + "x" * 200)
    return run.complete(visit, {"done": True})


def test_a_big_closing_message_waits_for_a_batch_of_its_own_and_nothing_is_skipped():
    run = long_visit()
    hot = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    hot.offer(run.events)
    first, cursor = hot.frames_after(0)
    second, end = hot.frames_after(cursor)
    assert b"event: node_status" in first[0] and all(b"event: node_stream" in f for f in first[1:])
    assert len(second) == 1 and b'"status":"SUCCESS"' in second[0]
    assert end == run.events[-1].originator_version
    assert hot.frames_after(end) == ([], end)


def finished_run() -> RunLog:
    run = RunLog().created().started()
    visit = run.visit("A")
    for i in range(50):
        run.stream(visit, "status", f"note {i}")
    return run.complete(visit, {"done": True}).record(visit).finish({"done": True})


def test_a_finished_run_whose_writer_left_keeps_only_its_terminal_message_and_sends_the_rest_from_the_store():
    run = finished_run()
    hot = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    hot.complete = True
    hot.writer_joined()
    hot.offer(run.events)
    assert len(hot.ids) > 50
    hot.writer_left()
    assert hot.ids == [hot.terminal_id] and hot.terminal_id == run.events[-1].originator_version
    assert not hot.covers(0) and hot.covers(hot.terminal_id - 1)
    terminal, _ = hot.frames_after(hot.terminal_id - 1)
    assert len(terminal) == 1 and b"event: workflow_complete" in terminal[0]


def test_a_finished_run_keeps_its_frames_while_a_stream_reads_it():
    hot = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    hot.complete = True
    with hot.watch():
        hot.offer(finished_run().events)
        kept = list(hot.ids)
        hot.writer_left()
        assert hot.ids == kept and hot.covers(0)
    assert hot.ids == [hot.terminal_id]


async def test_a_replay_of_a_finished_run_nobody_held_folds_its_visit_messages_back_from_the_store():
    events = finished_run().events

    async def read(run_id, after, limit):
        found = [e for e in events if e.originator_version > after]
        return found if limit is None else found[:limit]

    async def last_position(run_id):
        return events[-1].originator_version

    hot_runs = HotRuns(read, last_position, max_frames=10_000, retention_seconds=60, encode_frame=encode_frame)
    held = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    held.offer(events)
    everything, _ = held.frames_after(0)
    hot = hot_runs.open(RUN_ID)
    hot_runs.writer_joined(RUN_ID)
    hot.offer(events)
    hot_runs.writer_left(RUN_ID)
    assert hot.kept_missing_upto == hot.dropped_upto and not any(p <= hot.dropped_upto for p in hot.kept)
    with hot.watch():
        replayed, cursor = await hot_runs.replay(hot, 0)
        rest, _ = hot.frames_after(cursor)
    assert replayed + rest == everything
