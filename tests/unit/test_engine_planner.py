"""AGENTIC planning: strict decisions, and the next step read from the log alone."""

from __future__ import annotations

import pytest

from domain.workflow import workflow_from_dict
from engine.execution.agentic import (
    PlannerAnswerInvalid,
    next_step,
    parse_decision,
    planner_messages,
)
from engine.execution.progress import fold_progress
from tests.unit.builders import RunLog

NODES = ["input", "draft", "review", "answer"]
FLOW = workflow_from_dict({
    "name": "flow", "displayName": "Flow", "mode": "AGENTIC", "startNodeId": "input",
    "nodes": [{"id": "input", "type": "userInput"}, {"id": "draft", "type": "agent", "data": {"prompt": "Write it"}},
              {"id": "review", "type": "llm"}, {"id": "answer", "type": "output"}],
})


def test_a_decision_names_the_next_node_and_why():
    assert parse_decision('{"nextNodeId": "draft", "reason": "start"}', NODES) == ("draft", "start")


@pytest.mark.parametrize("answer", ['{"nextNodeId": null, "reason": "done"}', '{"finish": true, "reason": "done"}'])
def test_a_finish_decision_has_no_next_node(answer):
    assert parse_decision(answer, NODES) == (None, "done")


def test_a_decision_in_a_fenced_block_is_accepted():
    assert parse_decision('Sure:\n```json\n{"nextNodeId": "review", "reason": "check"}\n```', NODES)[0] == "review"


@pytest.mark.parametrize(("answer", "problem"), [
    ("go to the draft", "answer is not JSON"),
    ('{"nextNodeId": "publish", "reason": "x"}', "nextNodeId 'publish' is not a node of the workflow"),
    ('{"nextNodeId": 3, "reason": "x"}', 'the answer needs "nextNodeId"'),
    ('{"nextNodeId": "draft"}', 'the answer needs a "reason" string'),
])
def test_an_invalid_decision_says_what_is_wrong(answer, problem):
    with pytest.raises(PlannerAnswerInvalid, match=problem):
        parse_decision(answer, NODES)


def test_a_new_run_visits_its_start_node():
    assert next_step(FLOW, fold_progress(RunLog().created().started().events)).node_id == "input"


def test_after_a_finished_visit_the_planner_is_asked():
    log = RunLog().created().started()
    log.complete(log.visit("input", node_type="userInput"), {"q": "?"})
    step = next_step(FLOW, fold_progress(log.events))
    assert (step.kind, step.node_id) == ("plan", "input")


def test_a_decision_leads_to_a_visit_of_the_chosen_node_coming_from_the_last_visit():
    log = RunLog().created().started()
    first = log.visit("input", node_type="userInput")
    log.complete(first, {}).decide("draft", "start", "input")
    step = next_step(FLOW, fold_progress(log.events))
    assert (step.kind, step.node_id, step.visit.visit_uuid) == ("visit", "draft", first)


def test_a_finish_decision_leads_to_the_output_node():
    log = RunLog().created().started()
    log.complete(log.visit("input", node_type="userInput"), {}).decide(None, "done", "input")
    assert next_step(FLOW, fold_progress(log.events)).node_id == "answer"


def test_an_open_visit_is_resumed_and_a_finished_output_completes_the_run():
    log = RunLog().created().started()
    open_visit = log.visit("draft")
    assert next_step(FLOW, fold_progress(log.events)).kind == "resume"
    log.complete(open_visit, {}).decide(None, "done", "draft")
    log.complete(log.visit("answer", node_type="output"), {"x": 1})
    assert next_step(FLOW, fold_progress(log.events)).kind == "complete"


def test_a_failed_last_visit_fails_the_run():
    log = RunLog().created().started()
    log.fail(log.visit("draft"), "model down")
    assert next_step(FLOW, fold_progress(log.events)).error == "node 'draft' failed: model down"


def test_the_planner_prompt_lists_the_nodes_the_visits_and_the_answer_format():
    log = RunLog().created(variables={"q": "why?"}).started()
    log.complete(log.visit("input", node_type="userInput"), {"q": "why?"})
    text = planner_messages(FLOW, fold_progress(log.events), "Be brief.")[0].content
    assert "- draft (agent): Write it\n- review (llm)\n" in text and "Be brief." in text
    assert '1. input (visit 1): SUCCESS {"q":"why?"}' in text
    assert '{"nextNodeId": null' in text
