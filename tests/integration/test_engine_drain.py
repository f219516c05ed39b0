"""A stopping process drains its runs: no visit begins, the visits in flight end, and each run is handed over at
that visit boundary (recording nothing more) to go on from its log, here at the next start; a visit still running
when the drain window closes is stopped and runs again. Both stores, the services built as `flowtrail serve` builds
them, stopped the way the signal does (`stop_taking_work`, then `drain`)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import replace

from domain import events as ev
from domain.run import RunStatus
from engine.dispatch.settings import DispatchSettings
from engine.settings import Settings
from tests.support.engine_runs import (
    chunks,
    edge,
    engine_settings,
    events_of,
    node,
    of_type,
    positions_are_contiguous,
    running,
    start,
    text_turn,
    wait_for_event,
    wait_until,
    workflow,
)

INTERRUPTED = "this visit was interrupted before it ended; running it again from its start"


def scripted(node_id: str, seconds: float) -> dict:
    """A scripted llm visit that says it began, takes `seconds`, then answers."""
    return node(node_id, "llm", model_id="scripted", prompt="go",
                script=[[{"status": f"{node_id} began"}, {"sleep": seconds}, *text_turn(f"{node_id} done")]])


def fork_flow(seconds: float) -> dict:
    """input -> (left, right, at once) -> last -> out: two visits in flight together, one after them."""
    out = node("out", "output", outputs=[{"name": "result", "value": "{{last.text}}"}])
    nodes = [node("input", "userInput"), scripted("left", seconds), scripted("right", seconds),
             scripted("last", 0.05), out]
    edges = [edge("input", "left"), edge("input", "right"), edge("left", "last"), edge("right", "last"),
             edge("last", "out")]
    return workflow("fork-flow", nodes, edges)


def with_drain(settings: Settings, seconds: float) -> Settings:
    return replace(settings, dispatch=replace(DispatchSettings(), drain_seconds=seconds))


async def stop_during_the_fork(settings: Settings, seconds: float):
    """Start a run, then stop the process the way a signal does while `left` and `right` run; the run id."""
    async with running(settings) as services:
        await services.catalogue.publish(fork_flow(seconds))
        run_id = await start(services, "fork-flow")
        for branch in ("left", "right"):
            await wait_for_event(services, run_id, lambda e, b=branch: isinstance(e, ev.NodeStreamed)
                                 and e.content == f"{b} began")
        services.stop_taking_work()
        await services.drain()
        events = await events_of(services, run_id)
    return run_id, events


def visits(events: list[ev.RunEvent]) -> Counter[str]:
    return Counter(e.node_id for e in of_type(events, ev.VisitStarted))


async def test_a_draining_process_lets_the_visits_in_flight_end_and_hands_the_run_over_at_that_boundary(
        store, tmp_path, caplog):
    settings = with_drain(engine_settings(store, tmp_path / "data", load_demos=False), 30.0)
    with caplog.at_level(logging.INFO, logger="flowtrail.engine"):
        run_id, drained = await stop_during_the_fork(settings, 0.5)
    assert visits(drained) == {"input": 1, "left": 1, "right": 1}
    assert {e.node_id for e in of_type(drained, ev.VisitCompleted)} == {"input", "left", "right"}
    assert not of_type(drained, ev.VisitFailed) and not of_type(drained, ev.RunCompleted)
    assert f"run {run_id.hex}: handed over at a visit boundary" in caplog.text
    assert "drained in" in caplog.text and "still in a visit" not in caplog.text
    async with running(settings) as services:
        assert (await wait_until(services, run_id)).status is RunStatus.SUCCEEDED
        events = await events_of(services, run_id)
    assert events[:len(drained)] == drained
    assert visits(events) == {"input": 1, "left": 1, "right": 1, "last": 1, "out": 1}
    assert Counter(e.node_id for e in of_type(events, ev.ModelCalled)) == {"left": 1, "right": 1, "last": 1}
    assert INTERRUPTED not in [c.content for c in chunks(events, "status")]
    assert positions_are_contiguous(events)


async def test_a_visit_still_running_when_the_drain_window_closes_is_stopped_logged_and_run_again_at_the_next_start(
        store, tmp_path, caplog):
    settings = with_drain(engine_settings(store, tmp_path / "data", load_demos=False), 0.2)
    with caplog.at_level(logging.INFO, logger="flowtrail.engine"):
        run_id, drained = await stop_during_the_fork(settings, 2.0)
    assert visits(drained) == {"input": 1, "left": 1, "right": 1}
    assert {e.node_id for e in of_type(drained, ev.VisitCompleted)} == {"input"} and not of_type(drained, ev.ModelCalled)
    assert f"run {run_id.hex} was still in a visit when the drain window (0.2 s) closed" in caplog.text
    async with running(settings) as services:
        assert (await wait_until(services, run_id)).status is RunStatus.SUCCEEDED
        events = await events_of(services, run_id)
    assert visits(events) == {"input": 1, "left": 1, "right": 1, "last": 1, "out": 1}
    assert sorted(c.node_id for c in chunks(events, "status") if c.content == INTERRUPTED) == ["left", "right"]
    assert positions_are_contiguous(events)


def planned_flow() -> dict:
    """AGENTIC: the planner sends the run to `work` (a visit that takes a moment), then finishes."""
    planner = [[{"text": json.dumps({"nextNodeId": "work", "reason": "work first"})}],
               [{"text": json.dumps({"nextNodeId": None, "reason": "done"})}]]
    out = node("out", "output", outputs=[{"name": "result", "value": "{{work.text}}"}])
    return workflow("planned-flow", [node("input", "userInput"), scripted("work", 0.5), out], [], mode="AGENTIC",
                    planner={"model_id": "scripted", "script": planner})


async def test_an_agentic_run_drained_during_a_visit_asks_its_planner_next_only_where_it_goes_on(store, tmp_path):
    settings = with_drain(engine_settings(store, tmp_path / "data", load_demos=False), 30.0)
    async with running(settings) as services:
        await services.catalogue.publish(planned_flow())
        run_id = await start(services, "planned-flow")
        await wait_for_event(services, run_id, lambda e: isinstance(e, ev.NodeStreamed) and e.content == "work began")
        services.stop_taking_work()
        await services.drain()
        drained = await events_of(services, run_id)
    assert [d.next_node_id for d in of_type(drained, ev.PlannerDecided)] == ["work"]
    assert isinstance(drained[-1], ev.VisitRecorded) and drained[-1].node_id == "work"
    async with running(settings) as services:
        assert (await wait_until(services, run_id)).status is RunStatus.SUCCEEDED
        events = await events_of(services, run_id)
    assert [d.next_node_id for d in of_type(events, ev.PlannerDecided)] == ["work", None]
    assert Counter(e.purpose for e in of_type(events, ev.ModelCalled)) == {"planner": 2, "node": 1}
    assert visits(events) == {"input": 1, "work": 1, "out": 1}
