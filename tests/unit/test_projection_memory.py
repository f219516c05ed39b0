"""Projections hold no reference cycles: a dropped one is freed at once, not by the cycle collector."""

from __future__ import annotations

import gc
import weakref

from projections.sse import SseProjection
from projections.summary import RunSummary
from tests.unit.builders import RunLog, fold


def finished_run() -> RunLog:
    run = RunLog().created(variables={"topic": "AI"}).started()
    a = run.visit("A")
    run.stream(a, "thinking", "想").stream(a, "tool_call", "{}").complete(a, {"r": 1})
    return run


def test_a_dropped_projection_is_freed_without_the_cycle_collector():
    events = finished_run().events
    gc.disable()
    try:
        for make in (SseProjection, RunSummary):
            gone = weakref.ref(fold(make(), events))
            assert gone() is None, make.__name__
    finally:
        gc.enable()
