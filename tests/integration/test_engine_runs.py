"""The engine drives runs on both stores: DAG scheduling and branches, failures that stay clean, limits."""

from __future__ import annotations

import pytest

from domain import events as ev
from domain.errors import GraphInvalid, RunAlreadyStarted
from domain.run import RunStatus
from domain.workflow import InvalidVariables
from engine.runs.creation import NewRun
from tests.support.engine_runs import (
    chunks,
    edge,
    engine_settings,
    events_of,
    executor,
    node,
    of_type,
    positions_are_contiguous,
    running,
    start,
    text_turn,
    wait_until,
    workflow,
)

OUT = node("out", "output", outputs=[{"name": "result", "value": "{{work.text}}"}])


pytestmark = pytest.mark.services(load_demos=False, node_timeout_seconds=5)


async def run_one(services, work: dict, *, out: dict = OUT, variables: dict | None = None):
    """Publish input -> work -> out, run it to its end; (final run state, events)."""
    inputs = node("input", "userInput", inputs=[{"name": "topic"}])
    await services.catalogue.publish(workflow("one-node", [inputs, work, out],
                                              [edge("input", work["id"]), edge(work["id"], out["id"])]))
    run_id = await start(services, "one-node", variables or {"topic": "tides"})
    run = await wait_until(services, run_id)
    return run, await events_of(services, run_id)


async def test_independent_nodes_run_concurrently_and_the_join_waits_for_both(services):
    slow = [[{"sleep": 0.15}, {"text": "done"}]]
    await services.catalogue.publish(workflow("fan", [
        node("input", "userInput"),
        node("left", "llm", model_id="scripted", script=slow),
        node("right", "llm", model_id="scripted", script=slow),
        node("out", "output", outputs=[{"name": "both", "value": "{{left.text}} {{right.text}}"}]),
    ], [edge("input", "left"), edge("input", "right"), edge("left", "out"), edge("right", "out")]))
    run_id = await start(services, "fan")
    run = await wait_until(services, run_id)
    events = await events_of(services, run_id)
    order = [(type(e).__name__, getattr(e, "node_id", None)) for e in events
             if isinstance(e, (ev.VisitStarted, ev.VisitCompleted))]
    assert run.status is RunStatus.SUCCEEDED
    assert order.index(("VisitStarted", "right")) < order.index(("VisitCompleted", "left"))
    assert order.index(("VisitStarted", "left")) < order.index(("VisitCompleted", "right"))
    joined = next(e for e in of_type(events, ev.VisitStarted) if e.node_id == "out")
    assert set(joined.predecessor_visit_uuids) == {e.visit_uuid for e in of_type(events, ev.VisitStarted)
                                                   if e.node_id in ("left", "right")}
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"both": "done done"}


async def test_a_false_condition_skips_the_node_and_every_node_only_reachable_through_it(services):
    await services.catalogue.publish(workflow("branch", [
        node("input", "userInput"),
        node("gate", "smartAction", model_id="scripted", actions=["short", "long"],
             script=[text_turn('{"action": "short", "reason": "the topic is small"}')]),
        node("brief", "llm", model_id="scripted", script=[text_turn("brief text")]),
        node("essay", "llm", model_id="scripted", script=[text_turn("long text")]),
        node("polish", "llm", model_id="scripted", script=[text_turn("polished")]),
        node("out", "output", outputs=[{"name": "action", "value": "{{gate.action}}"}]),
    ], [
        edge("input", "gate"),
        edge("gate", "brief", '{{gate.action}} == "short"'),
        edge("gate", "essay", '{{gate.action}} == "long"'),
        edge("essay", "polish"),
        edge("brief", "out"), edge("polish", "out"),
    ]))
    run_id = await start(services, "branch")
    run = await wait_until(services, run_id)
    events = await events_of(services, run_id)
    skipped = {e.node_id: e.reason for e in of_type(events, ev.VisitSkipped)}
    assert run.status is RunStatus.SUCCEEDED
    assert skipped == {
        "essay": "condition '{{gate.action}} == \"long\"' on the edge from 'gate' is false",
        "polish": "predecessor 'essay' was skipped",
    }
    recorded = {e.visit_uuid for e in of_type(events, ev.VisitRecorded)}
    assert {e.visit_uuid for e in of_type(events, ev.VisitSkipped)} <= recorded
    assert {e.iter_seq for e in of_type(events, ev.VisitSkipped)} == {1}
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"action": "short"}


async def test_a_reference_to_a_node_that_does_not_exist_is_refused_at_publish(services):
    with pytest.raises(GraphInvalid, match=r"\{\{research.summary\}\} refers to 'research': no node has that id"):
        await run_one(services, node("work", "llm", model_id="scripted", prompt="Use {{research.summary}}"))


async def test_a_missing_reference_fails_the_visit_naming_it(services):
    run, events = await run_one(services, node("work", "llm", model_id="scripted", prompt="Use {{input.summary}}"))
    failed = of_type(events, ev.VisitFailed)[0]
    assert run.status is RunStatus.FAILED
    assert "{{input.summary}}" in failed.error and "'input' has no field 'summary'" in failed.error
    assert of_type(events, ev.RunFailed)[0].error.startswith("node 'work' failed: prompt: missing reference")


async def test_an_answer_that_never_validates_fails_the_visit_listing_what_is_wrong(services):
    work = node("work", "llm", model_id="scripted", runtimeMaxRetries=1, formatMaxRetries=1,
                outputs=[{"name": "title", "type": "string", "required": True},
                         {"name": "count", "type": "number", "required": True}],
                script={"turns": [text_turn("just prose, no JSON")], "reformat": [text_turn('{"count": "many"}')]})
    run, events = await run_one(services, work)
    statuses = [c.content for c in chunks(events, "status", "work")]
    failed = of_type(events, ev.VisitFailed)[0]
    assert run.status is RunStatus.FAILED
    assert [s.split("; ")[-1] for s in statuses[:3]] == ["re-formatting (1/1)", "re-running the node (1/1)", "re-formatting (1/1)"]
    assert statuses[1].startswith("re-format 1/1 answer: output invalid (missing required field(s): title")
    assert "; node answer: output not valid JSON (answer is not JSON: no JSON object found in 'just prose" in statuses[1]
    assert failed.error.startswith("node answer: output not valid JSON: answer is not JSON")
    assert "missing required field(s): title" in failed.error and "count (expected number)" in failed.error
    assert failed.output == {"status": 400, "message": failed.error, "data": None}
    assert positions_are_contiguous(events)


async def test_an_answer_repaired_by_a_rerun_is_accepted(services):
    work = node("work", "llm", model_id="scripted", formatMaxRetries=0,
                outputs=[{"name": "title", "type": "string", "required": True}],
                script=[text_turn("not json"), text_turn('{"title": "Tides"}')])
    run, events = await run_one(services, work, out=node("out", "output", outputs=[{"name": "t", "value": "{{work.title}}"}]))
    assert run.status is RunStatus.SUCCEEDED
    assert [c.content for c in chunks(events, "status", "work")][-1] == "re-run output is valid (1/2)"
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"t": "Tides"}


EXHAUSTED = "model retries exhausted after 11 attempt(s), the retry budget of 10 is spent: "


@pytest.mark.parametrize(("step", "timeout", "expected", "attempts"), [
    ({"break": None}, 30, EXHAUSTED + "model stream broke: scripted stream broke mid-turn", 11),
    ({"fail": "upstream exploded"}, 30, EXHAUSTED + "model endpoint answered 500: server error - upstream exploded", 11),
    ({"hang": None}, 0.2, "the node timed out after 0.2 s (its time limit)", 0),
])
async def test_a_model_that_breaks_fails_or_hangs_fails_the_visit_cleanly(services, step, timeout, expected, attempts):
    work = node("work", "agent", model_id="scripted", timeoutSeconds=timeout,
                script=[[{"thinking": "let me think about this"}, step]])
    run, events = await run_one(services, work)
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error == expected
    assert statuses[-1] == f"error: {expected}"
    assert [line for line in statuses if line.startswith("model call failed")] == statuses[:-1]
    assert len(statuses) == max(attempts, 1) and len(of_type(events, ev.ModelCalled)) == attempts
    assert "".join(c.content for c in chunks(events, "thinking", "work")).startswith("let me think about this")
    assert of_type(events, ev.RunFailed)[0].error == f"node 'work' failed: {expected}"
    assert positions_are_contiguous(events)


async def test_a_run_past_its_time_limit_fails_and_closes_its_open_visit(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data", load_demos=False, run_timeout_seconds=1.0)
    async with running(settings) as services:
        run, events = await run_one(services, node("work", "llm", model_id="scripted", script=[[{"hang": None}]]))
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.RunFailed)[0].error == "the run timed out after 1 s (its time limit)"
    assert of_type(events, ev.VisitFailed)[0].error.startswith("stopped: the run timed out")


async def test_an_agent_calls_its_tools_and_every_refusal_reaches_the_model_as_a_json_error(services):
    work = node("work", "agent", model_id="scripted", tools=["web_search", "write_file"], script=[
        [{"tool_call": {"name": "web_search", "arguments": {"query": "{{topic}}"}}}],
        [{"tool_call": {"name": "write_file", "arguments": {"path": "notes/../../escape.md", "content": "x"}}},
         {"tool_call": {"name": "write_file", "arguments": {"path": "notes/{{topic}}.md", "content": "about {{topic}}"}}}],
        [{"tool_call": {"name": "launch_rockets", "arguments": {}}}],
        [{"tool_call": {"name": "write_file", "arguments": "{path: oops"}},
         {"tool_call": {"name": "write_file", "arguments": "[1, 2]"}}],
        text_turn("finished"),
    ])
    run, events = await run_one(services, work)
    results = [(c.tool_name, c.content) for c in chunks(events, "tool_result", "work")]
    steps = [c.content for c in chunks(events, "step", "work")]
    assert run.status is RunStatus.SUCCEEDED
    assert results[0][0] == "web_search" and '"query":"tides"' in results[0][1]
    assert results[1] == ("write_file", '{"error":"path \'notes/../../escape.md\' escapes the workspace"}')
    assert results[2] == ("write_file", "wrote 11 bytes to notes/tides.md")
    assert results[3] == ("launch_rockets", '{"error":"no tool named \'launch_rockets\' is available to this node"}')
    assert results[4][0] == "write_file" and results[4][1].startswith('{"error":"arguments are not valid JSON: ')
    assert results[5] == ("write_file", '{"error":"arguments must be a JSON object"}')
    assert steps[1] == '{"iteration":2,"prev_tools":["web_search"]}'
    assert of_type(events, ev.RunCompleted)[0].working_dir_files == ("notes/tides.md",)


async def test_a_required_input_that_is_missing_is_refused_at_creation_and_fails_the_first_visit_of_an_older_run(services):
    inputs = node("input", "userInput", inputs=[{"name": "topic", "required": True}])
    entry = await services.catalogue.publish(workflow("needs-topic", [inputs, OUT | {"data": {"outputs": []}}],
                                                      [edge("input", "out")]))
    with pytest.raises(InvalidVariables, match=r"missing required input\(s\): topic"):
        await start(services, "needs-topic", {"other": 1})
    older = NewRun(workflow_id=entry.workflow_id, workflow_name=entry.name, workflow_version=entry.version,
                   display_name=entry.definition.display_name, mode="DAG", variables={"other": 1}, caller_key_id="all")
    run_id = (await services.runs.create(older)).run_id
    await executor(services).start(run_id)
    run = await wait_until(services, run_id)
    events = await events_of(services, run_id)
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error == "required input(s) not given: topic"


async def test_a_run_cannot_be_started_twice_and_is_still_already_started_after_it_finished(services):
    await services.catalogue.publish(workflow("slow", [node("work", "llm", model_id="scripted", script=[
        [{"sleep": 0.2}, {"text": "ok"}]]), OUT], [edge("work", "out")]))
    run_id = await start(services, "slow")
    with pytest.raises(RunAlreadyStarted):
        await services.engine.start(run_id)
    await wait_until(services, run_id)
    with pytest.raises(RunAlreadyStarted):
        await services.engine.start(run_id)
    assert len(of_type(await events_of(services, run_id), ev.RunStarted)) == 1


async def test_an_invalid_graph_is_refused_with_every_problem_listed(services):
    bad = workflow("bad-graph", [node("a", "llm"), node("b", "mystery"), node("a", "llm")],
                   [edge("a", "ghost"), edge("b", "b")])
    with pytest.raises(GraphInvalid) as refused:
        await services.catalogue.publish(bad)
    problems = refused.value.problems
    assert refused.value.code == "GRAPH_INVALID"
    assert "$.nodes[2].id: node id 'a' is used by 2 nodes" in problems
    assert any("unknown type 'mystery'" in p for p in problems)
    assert any("unknown target 'ghost'" in p for p in problems)
    assert any("self-loop" in p for p in problems)
    assert "$.nodes: workflow has no output node" in problems


async def test_a_failed_node_stops_its_running_siblings_and_the_run_fails_naming_it(services):
    await services.catalogue.publish(workflow("one-fails", [
        node("input", "userInput"),
        node("bad", "llm", model_id="scripted", script=[[{"fail": "quota exceeded"}]]),
        node("slow", "agent", model_id="scripted", script=[[{"thinking": "taking my time"}, {"hang": None}]]),
        OUT | {"data": {"outputs": []}},
    ], [edge("input", "bad"), edge("input", "slow"), edge("bad", "out"), edge("slow", "out")]))
    run_id = await start(services, "one-fails")
    run = await wait_until(services, run_id)
    events = await events_of(services, run_id)
    failed = {e.node_id: e.error for e in of_type(events, ev.VisitFailed)}
    assert run.status is RunStatus.FAILED
    assert failed["bad"] == EXHAUSTED + "model endpoint answered 500: server error - quota exceeded"
    assert failed["slow"] == f"stopped: node 'bad' failed: {failed['bad']}"
    assert not [e for e in of_type(events, ev.VisitStarted) if e.node_id == "out"]


async def test_a_question_in_one_branch_waits_for_the_running_branches_before_the_run_pauses(services):
    await services.catalogue.publish(workflow("ask-while-busy", [
        node("input", "userInput"),
        node("asker", "agent", model_id="scripted", script=[
            [{"clarify": {"question": "Go on?", "choices": ["yes", "no"]}}], text_turn("asked")]),
        node("busy", "llm", model_id="scripted", script=[[{"sleep": 0.2}, {"text": "busy done"}]]),
        node("out", "output", outputs=[{"name": "answer", "value": "{{asker.answer}}"},
                                       {"name": "busy", "value": "{{busy.text}}"}]),
    ], [edge("input", "asker"), edge("input", "busy"), edge("asker", "out"), edge("busy", "out")]))
    run_id = await start(services, "ask-while-busy")
    paused = await wait_until(services, run_id, RunStatus.PAUSED)
    events = await events_of(services, run_id)
    tags = [(type(e).__name__, getattr(e, "node_id", None)) for e in events]
    assert tags.index(("VisitCompleted", "busy")) < tags.index(("ClarifyRequested", "asker"))
    await services.engine.answer(run_id, paused.pending_clarify.clarify_id, "yes")
    await wait_until(services, run_id)
    events = await events_of(services, run_id)
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "yes", "busy": "busy done"}
