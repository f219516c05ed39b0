"""A hot run hands out its frames in order, a big one in a batch of its own."""

from __future__ import annotations

from api.sse import encode_frame
from engine.streams.hot import BIG_MESSAGE_BYTES, HotRun
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
