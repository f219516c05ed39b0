"""A hot run hands out its frames in order, a big one in a batch of its own; a finished one leaves memory and replays from the store."""

from __future__ import annotations

import asyncio
from typing import get_args

import pytest

from api.sse import encode_frame
from domain.events import RUN_EVENT_TYPES
from domain.vocabulary import StreamKind
from engine.runs.heap import HeapTrim
from engine.runs.hot import BIG_MESSAGE_BYTES, KEPT_EVENTS, HotRun
from engine.runs.hot_runs import HotRuns
from engine.runs.raw_frames import STREAM_TAG, stream_message
from engine.store.mapper import MsgspecMapper
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


class StoredLog:
    """A run's log as a store keeps it: each event's JSON as msgspec encodes it, read back as rows."""

    def __init__(self, events: list) -> None:
        self.events = events
        self._mapper = MsgspecMapper(RUN_EVENT_TYPES)
        self.rows = [(e.originator_version, self._mapper.tags[type(e)], self._mapper.encoder.encode(e)) for e in events]

    async def read(self, run_id, after, limit):
        found = [e for e in self.events if e.originator_version > after]
        return found if limit is None else found[:limit]

    async def read_rows(self, stream_id, *, after=0, limit=None):
        found = [row for row in self.rows if row[0] > after]
        return found if limit is None else found[:limit]

    def decode_row(self, state, topic, position):
        return self._mapper.decode_state(state, topic, position)

    async def last_position(self, run_id):
        return self.events[-1].originator_version


def pieces_of_every_kind() -> RunLog:
    run = RunLog().created().started()
    a = run.visit("A")
    for kind in get_args(StreamKind):
        run.stream(a, kind, f'{kind}: "quoted", a\\backslash, a\nnewline, \u00e9\u20ac\U0001f600 ' + "x" * 600,
                   tool_name="search" if kind.startswith("tool") else None)
    b = run.visit("B")
    run.stream(a, "thinking", "after B started").stream(b, "status", "\x00\x1f control characters")
    return run.complete(a, {"ok": 1}).complete(b).finish()


@pytest.mark.parametrize("wants", [None, lambda event, node: event == "node_stream", lambda event, node: node == "A"])
async def test_a_replay_framing_stream_pieces_from_their_stored_json_sends_the_same_bytes_as_decoding_them(wants):
    log = StoredLog(pieces_of_every_kind().events)
    decoding = HotRuns(log.read, log.last_position, max_frames=10_000, retention_seconds=60, encode_frame=encode_frame)
    copying = HotRuns(log.read, log.last_position, max_frames=10_000, retention_seconds=60, encode_frame=encode_frame,
                      rows=log)
    replays = []
    for hot_runs in (decoding, copying):
        hot = hot_runs.open(RUN_ID)
        hot_runs.writer_joined(RUN_ID)
        hot.offer(log.events)
        hot_runs.writer_left(RUN_ID)
        with hot.watch():
            replays.append(await hot_runs.replay(hot, 0, wants=wants))
    assert replays[0] == replays[1] and replays[0][0]


def test_only_the_pieces_a_message_cuts_are_left_to_the_decoding_path():
    log = StoredLog(pieces_of_every_kind().events)
    copied = {event.kind: stream_message(row[0], row[2], RUN_ID.hex.encode()) is not None
              for event, row in zip(log.events, log.rows) if row[1] == STREAM_TAG}
    assert copied == {kind: kind not in ("tool_call", "tool_result") for kind in get_args(StreamKind)}


def test_every_message_a_run_keeps_is_of_a_kept_event_type():
    hot = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    hot.offer(pieces_of_every_kind().events)
    assert hot.kept and {topic[0] for topic, _ in hot.kept.values()} <= set(KEPT_EVENTS)


def wants(event, node):
    return event == "node_stream"


async def test_a_replay_that_refuses_the_kept_messages_reads_no_fold_of_them_and_sends_what_a_held_run_sends():
    log = StoredLog(pieces_of_every_kind().events)
    held = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    held.offer(log.events)
    everything, _ = held.frames_after(0, wants=wants)
    hot_runs = HotRuns(log.read, log.last_position, max_frames=10_000, retention_seconds=60, encode_frame=encode_frame,
                       rows=log)
    hot = hot_runs.open(RUN_ID)
    hot_runs.writer_joined(RUN_ID)
    hot.offer(log.events)
    hot_runs.writer_left(RUN_ID)
    with hot.watch():
        replayed, cursor = await hot_runs.replay(hot, 0, wants=wants)
        rest, _ = hot.frames_after(cursor, wants=wants)
    assert replayed + rest == everything and hot.kept_missing_upto > 0


async def test_a_finished_run_leaves_memory_when_its_last_reader_goes_and_its_next_reader_loads_it_whole():
    log = StoredLog(finished_run().events)
    hot_runs = HotRuns(log.read, log.last_position, max_frames=10_000, retention_seconds=60, encode_frame=encode_frame,
                       rows=log)
    held = HotRun(RUN_ID, max_frames=10_000, encode_frame=encode_frame)
    held.offer(log.events)
    everything, _ = held.frames_after(0)
    hot = hot_runs.open(RUN_ID)
    hot_runs.writer_joined(RUN_ID)
    with hot.watch():
        hot.offer(log.events)
        hot_runs.writer_left(RUN_ID)
        assert hot_runs.is_hot(RUN_ID)
    assert not hot_runs.is_hot(RUN_ID)
    again = await hot_runs.get(RUN_ID)
    assert again is not None and again is not hot and again.ids == [again.terminal_id] and hot_runs.is_hot(RUN_ID)
    with again.watch():
        replayed, cursor = await hot_runs.replay(again, 0)
        rest, _ = again.frames_after(cursor)
    assert replayed + rest == everything and again.summary.run == held.summary.run
    assert not hot_runs.is_hot(RUN_ID)


async def test_a_heap_trim_asked_for_many_times_runs_once_after_its_delay():
    trims = []
    heap = HeapTrim(delay=0.01, trim=trims.append)
    for _ in range(5):
        heap.soon()
    await asyncio.sleep(0.05)
    heap.soon()
    await asyncio.sleep(0.05)
    assert trims == [0, 0]


def test_a_heap_trim_due_when_the_loop_has_shut_its_executor_down_is_let_go():
    trims: list[int] = []
    heap = HeapTrim(delay=0.0, trim=trims.append)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(loop.shutdown_default_executor())

        async def ask() -> None:
            heap.soon()
            await asyncio.sleep(0.01)

        loop.run_until_complete(ask())
    finally:
        loop.close()
    assert trims == []
    heap.soon()  # without a running loop: nothing to do, nothing raised
