"""Cancel, clarify and AGENTIC planning on both stores: requests recorded at once, runs stopped cleanly."""

from __future__ import annotations

import asyncio

import pytest

from domain import events as ev
from domain.errors import ClarifyAlreadyAnswered, ClarifyNotFound, RunAlreadyFinished
from domain.run import RunStatus
from tests.support.engine_runs import (
    chunks,
    create,
    edge,
    engine_settings,
    events_of,
    node,
    of_type,
    running,
    start,
    text_turn,
    wait_for_event,
    wait_until,
    workflow,
)

OUT = node("out", "output", outputs=[{"name": "result", "value": "{{work.text}}"}])


async def publish_hanging(services) -> None:
    work = node("work", "agent", model_id="scripted", script=[[{"thinking": "working on it"}, {"hang": None}]])
    await services.catalogue.publish(workflow("hangs", [work, OUT], [edge("work", "out")]))


def decision(next_node, reason="because"):
    import json

    return [{"text": json.dumps({"nextNodeId": next_node, "reason": reason})}]


async def test_cancel_is_recorded_at_once_and_the_run_stops_inside_the_model_stream(services):
    await publish_hanging(services)
    run_id = await start(services, "hangs")
    await wait_for_event(services, run_id, lambda e: isinstance(e, ev.NodeStreamed) and e.kind == "thinking")
    assert await services.engine.cancel(run_id) == "requested"
    run = await wait_until(services, run_id)
    events = await events_of(services, run_id)
    tags = [type(e).__name__ for e in events]
    assert run.status is RunStatus.CANCELLED
    assert tags.index("RunCancelRequested") < tags.index("VisitFailed") < tags.index("RunCancelled") == len(tags) - 1
    assert of_type(events, ev.VisitFailed)[0].error == "cancelled: the run was cancelled"
    assert await services.engine.cancel(run_id) == "already_finished"


async def test_a_second_cancel_before_the_run_stopped_is_already_requested(services):
    await publish_hanging(services)
    run_id = await start(services, "hangs")
    await wait_for_event(services, run_id, lambda e: isinstance(e, ev.VisitStarted))
    outcomes = await asyncio.gather(services.engine.cancel(run_id), services.engine.cancel(run_id))
    assert outcomes == ["requested", "already_requested"]
    assert (await wait_until(services, run_id)).status is RunStatus.CANCELLED


async def test_a_run_that_completed_before_the_cancel_stays_completed(services):
    run_id = await start(services, "demo-report", {"topic": "tides"})
    await wait_until(services, run_id)
    assert await services.engine.cancel(run_id) == "already_finished"
    events = await events_of(services, run_id)
    assert (await services.runs.state(run_id)).status is RunStatus.SUCCEEDED
    assert not of_type(events, ev.RunCancelRequested) and isinstance(events[-1], ev.RunCompleted)


async def test_a_created_run_that_is_cancelled_never_starts(services):
    run_id = await create(services, "demo-report", {"topic": "tides"})
    assert await services.engine.cancel(run_id) == "requested"
    assert (await wait_until(services, run_id)).status is RunStatus.CANCELLED
    assert not of_type(await events_of(services, run_id), ev.VisitStarted)


async def test_a_paused_run_that_is_cancelled_stops_at_once(services):
    run_id = await start(services, "demo-clarify", {"topic": "tides"})
    paused = await wait_until(services, run_id, RunStatus.PAUSED)
    assert await services.engine.cancel(run_id) == "requested"
    assert (await wait_until(services, run_id)).status is RunStatus.CANCELLED
    with pytest.raises(RunAlreadyFinished):
        await services.engine.answer(run_id, paused.pending_clarify.clarify_id, "too late")
    assert of_type(await events_of(services, run_id), ev.VisitFailed)[0].node_id == "ask"


async def test_answers_to_unknown_or_answered_questions_are_refused(services):
    run_id = await start(services, "demo-clarify", {"topic": "tides"})
    paused = await wait_until(services, run_id, RunStatus.PAUSED)
    with pytest.raises(ClarifyNotFound):
        await services.engine.answer(run_id, "no-such-question", "x")
    assert await services.engine.answer(run_id, paused.pending_clarify.clarify_id, "short paragraph") is True
    with pytest.raises(ClarifyAlreadyAnswered):
        await services.engine.answer(run_id, paused.pending_clarify.clarify_id, "bullet list")
    run = await wait_until(services, run_id)
    assert of_type(await events_of(services, run_id), ev.RunCompleted)[0].output["data"]["format"] == "short paragraph"
    assert run.status is RunStatus.SUCCEEDED


async def test_an_agent_can_ask_through_the_ask_user_tool_and_use_the_answer(services):
    work = node("work", "agent", model_id="scripted", askUser=True, script=[
        [{"tool_call": {"name": "ask_user", "arguments": {"question": "Metric or imperial?", "choices": ["metric", "imperial"]}}}],
        text_turn("converted"),
    ])
    out = node("out", "output", outputs=[{"name": "units", "value": "{{work.answer}}"}])
    await services.catalogue.publish(workflow("asks", [work, out], [edge("work", "out")]))
    run_id = await start(services, "asks")
    paused = await wait_until(services, run_id, RunStatus.PAUSED)
    assert paused.pending_clarify.question == "Metric or imperial?"
    assert paused.pending_clarify.choices == ("metric", "imperial")
    assert await services.engine.answer(run_id, paused.pending_clarify.clarify_id, "metric")
    await wait_until(services, run_id)
    assert of_type(await events_of(services, run_id), ev.RunCompleted)[0].output["data"] == {"units": "metric"}


async def agentic(services, name: str, planner_script: list, *, limits: dict | None = None) -> list:
    nodes = [node("input", "userInput"), node("loop", "llm", model_id="scripted", script=[text_turn("again")]),
             node("out", "output", outputs=[{"name": "last", "value": "{{loop.text}}"}])]
    extra = {"planner": {"model_id": "scripted", "script": planner_script}}
    if limits:
        extra["limits"] = limits
    await services.catalogue.publish(workflow(name, nodes, [], mode="AGENTIC", **extra))
    run_id = await start(services, name)
    await wait_until(services, run_id)
    return await events_of(services, run_id)


async def test_an_agentic_run_that_keeps_visiting_a_node_fails_at_the_node_limit(services):
    events = await agentic(services, "loops", [decision("loop")], limits={"maxVisitsPerNode": 3})
    assert [e.iter_seq for e in of_type(events, ev.VisitStarted) if e.node_id == "loop"] == [1, 2, 3]
    assert of_type(events, ev.RunFailed)[0].error == "node 'loop' reached its limit of 3 visits"


async def test_an_agentic_run_fails_at_the_run_limit(services):
    events = await agentic(services, "loops-run", [decision("loop")], limits={"maxVisitsPerRun": 4})
    assert len(of_type(events, ev.VisitStarted)) == 4
    assert of_type(events, ev.RunFailed)[0].error == "the run reached its limit of 4 visits"


async def test_an_invalid_planner_answer_is_retried_once(services):
    events = await agentic(services, "retry-plan", [decision("nowhere"), decision("loop"), decision(None, "done")])
    decided = of_type(events, ev.PlannerDecided)
    assert [(d.next_node_id, d.from_node_id) for d in decided] == [("loop", "input"), (None, "loop")]
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"last": "again"}


async def test_a_planner_that_answers_badly_twice_fails_the_run_saying_why(services):
    events = await agentic(services, "bad-plan", [[{"text": "I think we should go on"}], decision("nowhere")])
    assert not of_type(events, ev.PlannerDecided)
    assert of_type(events, ev.RunFailed)[0].error == (
        "the planner gave no valid decision in 2 attempts: nextNodeId 'nowhere' is not a node of the workflow "
        "(input, loop, out)"
    )


class FakeTokens:
    """Records what the engine asks of the context token store."""

    def __init__(self) -> None:
        self.issued: list[tuple] = []
        self.invalidated: list[tuple] = []

    def issue(self, run_id, visit_uuid):
        self.issued.append((run_id, visit_uuid))
        return "f" * 48

    def invalidate_visit(self, run_id, visit_uuid):
        self.invalidated.append((run_id, visit_uuid))

    async def close(self):
        """Nothing to stop."""


class FakeContextTools:
    """Hands each visit a FakeToolbox with a token from FakeTokens, and revokes it when the visit ends."""

    def __init__(self, tokens: FakeTokens, boxes: list) -> None:
        self.tokens, self.boxes = tokens, boxes

    def open(self, run_id, visit_uuid):
        self.boxes.append(FakeToolbox(self.tokens.issue(run_id, visit_uuid)))
        return self.boxes[-1]

    async def close(self, run_id, visit_uuid, toolbox):
        self.tokens.invalidate_visit(run_id, visit_uuid)


class FakeToolbox:
    """A context toolbox that answers get_node_output from memory."""

    names = frozenset({"get_node_output"})

    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[tuple] = []

    def specs(self):
        from engine.llm import ToolSpec

        return [ToolSpec("get_node_output", "Read an earlier node's output.", {"type": "object", "properties": {}})]

    async def call(self, name, arguments):
        self.calls.append((name, arguments))
        return '{"data": {"text": "earlier"}}'


async def test_model_visits_get_context_tools_with_a_token_that_ends_with_the_visit(store, tmp_path):
    tokens, boxes = FakeTokens(), []
    work = node("work", "llm", model_id="scripted", script=[
        [{"tool_call": {"name": "get_node_output", "arguments": {"nodeId": "input"}}}], text_turn("used it"),
    ])
    async with running(engine_settings(store, tmp_path / "data"),
                       context_tools=FakeContextTools(tokens, boxes)) as services:
        await services.catalogue.publish(workflow("ctx", [node("input", "userInput"), work, OUT],
                                                  [edge("input", "work"), edge("work", "out")]))
        run_id = await start(services, "ctx")
        await wait_until(services, run_id)
        events = await events_of(services, run_id)
    visit = next(e for e in of_type(events, ev.VisitStarted) if e.node_id == "work")
    assert tokens.issued == [(run_id, visit.visit_uuid)] and tokens.invalidated == tokens.issued
    assert boxes[0].calls == [("get_node_output", {"nodeId": "input"})]
    assert [c.content for c in chunks(events, "tool_result", "work")] == ['{"data": {"text": "earlier"}}']
    assert not any("f" * 48 in str(event) for event in events)


async def test_a_paused_run_that_nobody_answers_fails_at_its_time_limit(store, tmp_path):
    async with running(engine_settings(store, tmp_path / "data", run_timeout_seconds=0.4)) as services:
        run_id = await start(services, "demo-clarify", {"topic": "tides"})
        await wait_until(services, run_id, RunStatus.PAUSED)
        run = await wait_until(services, run_id)
        events = await events_of(services, run_id)
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.RunFailed)[0].error == (
        "the run timed out after 0.4 s (its time limit) while waiting for an answer")
    assert of_type(events, ev.VisitFailed)[0].node_id == "ask"
