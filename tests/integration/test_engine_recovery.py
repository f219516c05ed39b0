"""Runs survive the process: paused runs wait for their answer, executing runs are resumed or failed clearly."""

from __future__ import annotations

from domain import events as ev
from domain.run import RunStatus
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


def slow_flow(name: str, **data) -> dict:
    """input -> work (searches, then takes a moment to answer) -> out."""
    work = node("work", "agent", model_id="scripted", tools=["web_search"], script=[
        [{"thinking": "searching first"}, {"tool_call": {"name": "web_search", "arguments": {"query": "tides"}}}],
        [{"sleep": 0.4}, {"text": "answered"}],
    ], **data)
    out = node("out", "output", outputs=[{"name": "result", "value": "{{work.text}}"}])
    return workflow(name, [node("input", "userInput"), work, out], [edge("input", "work"), edge("work", "out")])


async def interrupt_mid_visit(settings, definition: dict):
    """Start a run, stop the process while its `work` visit runs; the run id."""
    async with running(settings) as services:
        await services.catalogue.publish(definition)
        run_id = await start(services, definition["name"])
        await wait_for_event(services, run_id, lambda e: isinstance(e, ev.NodeStreamed) and e.kind == "tool_result")
    return run_id


async def test_a_run_executing_when_the_process_stopped_is_resumed_on_start_up(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data", load_demos=False)
    run_id = await interrupt_mid_visit(settings, slow_flow("resumable"))
    async with running(settings) as services:
        run = await wait_until(services, run_id)
        events = await events_of(services, run_id)
    work_visits = [e for e in of_type(events, ev.VisitStarted) if e.node_id == "work"]
    assert run.status is RunStatus.SUCCEEDED
    assert len(work_visits) == 1
    assert "this visit was interrupted before it ended; running it again from its start" in [
        c.content for c in chunks(events, "status", "work")]
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"result": "answered"}
    assert positions_are_contiguous(events)


async def test_a_run_that_cannot_be_resumed_safely_fails_with_an_error_that_says_so(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data", load_demos=False)
    run_id = await interrupt_mid_visit(settings, slow_flow("unsafe", recoverable=False))
    async with running(settings) as services:
        run = await wait_until(services, run_id)
        events = await events_of(services, run_id)
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error == (
        "the engine stopped while this visit was running, and it cannot be re-run safely: "
        "the node is marked recoverable=false"
    )
    assert of_type(events, ev.RunFailed)[0].error.startswith("node 'work' failed: the engine stopped")


async def test_recovery_leaves_finished_and_paused_runs_alone(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data")
    async with running(settings) as services:
        done = await start(services, "demo-report", {"topic": "tides"})
        paused = await start(services, "demo-clarify", {"topic": "tides"})
        await wait_until(services, done)
        await wait_until(services, paused, RunStatus.PAUSED)
        counts = {run_id: len(await events_of(services, run_id)) for run_id in (done, paused)}
    async with running(settings) as services:
        await services.engine.recover()
        assert {run_id: len(await events_of(services, run_id)) for run_id in counts} == counts
        assert not services.engine.executing(done) and not services.engine.executing(paused)


async def test_an_answer_after_a_restart_continues_the_visit_after_its_question(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data", load_demos=False)
    asks = node("work", "agent", model_id="scripted", script=[
        [{"thinking": "need to ask"}, {"clarify": {"question": "Which one?", "choices": ["a", "b"]}}],
        text_turn("used the answer", "got it"),
    ])
    flow = workflow("asks-once", [asks, node("out", "output", outputs=[{"name": "pick", "value": "{{work.answer}}"}])],
                    [edge("work", "out")])
    async with running(settings) as services:
        await services.catalogue.publish(flow)
        run_id = await start(services, "asks-once")
        paused = await wait_until(services, run_id, RunStatus.PAUSED)
    async with running(settings) as services:
        await services.engine.answer(run_id, paused.pending_clarify.clarify_id, "b")
        await wait_until(services, run_id)
        events = await events_of(services, run_id)
    thinking = [c.content for c in chunks(events, "thinking", "work")]
    assert thinking == ["need to ask", "got it"]
    assert len(of_type(events, ev.ClarifyRequested)) == 1
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"pick": "b"}


async def test_a_paused_run_keeps_its_time_limit_across_a_restart(store, tmp_path):
    async with running(engine_settings(store, tmp_path / "data")) as services:
        run_id = await start(services, "demo-clarify", {"topic": "tides"})
        await wait_until(services, run_id, RunStatus.PAUSED)
    async with running(engine_settings(store, tmp_path / "data", run_timeout_seconds=0.5)) as services:
        run = await wait_until(services, run_id)
    assert run.status is RunStatus.FAILED
