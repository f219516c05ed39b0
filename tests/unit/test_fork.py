"""Where a fork is cut, what it copies of its source, and the state it starts in, decided from the source's events alone."""

from __future__ import annotations

from uuid import UUID

import msgspec
import pytest

from domain import events as ev
from domain.fork import (
    ForkModeChanged,
    ForkPoint,
    ForkVisitNotFound,
    RunNotRerunnable,
    VisitNotFinished,
    check_fork_version,
    copied_history,
    fork_events,
    fork_point,
    reexecuted_nodes,
    rerun_point,
)
from domain.run import RunStatus, fold
from domain.workflow import workflow_from_dict
from tests.unit.builders import RunLog

FORK_ID = UUID("0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f")
GRAPH = {
    "name": "report", "displayName": "Report", "mode": "DAG",
    "nodes": [{"id": node, "type": "llm", "data": {}} for node in ("input", "research", "summary", "points", "report")],
    "edges": [{"source": s, "target": t} for s, t in (("input", "research"), ("research", "summary"),
                                                     ("research", "points"), ("summary", "report"), ("points", "report"))],
}


def dag_source() -> tuple[RunLog, dict[str, str]]:
    """input, research, then summary and points in parallel (points ends before summary), then report."""
    log = RunLog().created(mode="DAG")
    log.started()
    visits = {"input": log.visit("input", node_type="userInput")}
    log.complete(visits["input"], {"topic": "tides"}).record(visits["input"])
    visits["research"] = log.visit("research", after=visits["input"])
    log.model_called(visits["research"]).stream(visits["research"], "thinking", "hm")
    log.complete(visits["research"], {"notes": "n"}).record(visits["research"])
    visits["summary"] = log.visit("summary", after=visits["research"])
    visits["points"] = log.visit("points", after=visits["research"])
    log.complete(visits["points"], {"text": "p"}).record(visits["points"])
    log.complete(visits["summary"], {"text": "s"}).record(visits["summary"])
    visits["report"] = log.visit("report", node_type="output", predecessors=(visits["summary"], visits["points"]))
    log.complete(visits["report"], {}).record(visits["report"])
    log.finish()
    return log, visits


def copied_visits(events: list[ev.RunEvent]) -> list[str]:
    return [e.visit_uuid for e in events if isinstance(e, ev.VisitStarted)]


def test_a_fork_is_cut_just_before_the_chosen_visit_began():
    log, visits = dag_source()
    point = fork_point(log.events, visit_uuid=visits["summary"])
    began = next(e for e in log.events if isinstance(e, ev.VisitStarted) and e.visit_uuid == visits["summary"])
    assert point == ForkPoint(began.originator_version - 1, visits["summary"], "summary")
    assert fork_point(log.events, node_id="summary") == point


def test_a_fork_copies_the_visits_that_ended_before_the_cut_with_every_event_but_model_calls():
    log, visits = dag_source()
    point = fork_point(log.events, node_id="summary")
    copied = copied_history(log.events, point, reexecuted_nodes(workflow_from_dict(GRAPH), point))
    assert copied_visits(copied) == [visits["input"], visits["research"]]
    assert [type(e).__name__ for e in copied] == [
        "VisitStarted", "VisitCompleted", "VisitRecorded", "VisitStarted", "NodeStreamed", "VisitCompleted",
        "VisitRecorded",
    ]


def test_a_visit_that_had_not_ended_at_the_cut_is_left_out_and_runs_again():
    log, visits = dag_source()
    point = fork_point(log.events, node_id="points")
    assert copied_visits(copied_history(log.events, point)) == [visits["input"], visits["research"]]


def test_in_dag_mode_a_fork_leaves_out_what_a_newer_version_put_downstream_of_the_chosen_node():
    log, visits = dag_source()
    moved = {**GRAPH, "edges": [{"source": "points", "target": "research"}, {"source": "input", "target": "points"},
                                {"source": "research", "target": "summary"}]}
    point = fork_point(log.events, node_id="report")
    assert reexecuted_nodes(workflow_from_dict(moved), point) == {"report"}
    assert "research" in reexecuted_nodes(workflow_from_dict(moved), ForkPoint(3, "x", "points"))
    every = copied_visits(copied_history(log.events, point, reexecuted_nodes(workflow_from_dict(GRAPH), point)))
    assert every == [visits[node] for node in ("input", "research", "summary", "points")]


def test_a_fork_starts_from_a_finished_visit_only():
    log = RunLog().created(mode="DAG")
    log.started()
    open_visit = log.visit("research")
    with pytest.raises(VisitNotFinished, match="has not finished"):
        fork_point(log.events, visit_uuid=open_visit)
    with pytest.raises(VisitNotFinished, match="no finished visit yet"):
        fork_point(log.events, node_id="research")
    with pytest.raises(ForkVisitNotFound, match="no visit 'nope'"):
        fork_point(log.events, visit_uuid="nope")
    with pytest.raises(ForkVisitNotFound, match="no visit of node 'summary'"):
        fork_point(log.events, node_id="summary")


def test_from_a_node_a_fork_takes_its_latest_finished_visit():
    log = RunLog().created()
    log.started()
    first = log.visit("draft")
    log.complete(first, {"text": "1"})
    second = log.visit("draft", after=first)
    log.complete(second, {"text": "2"})
    log.visit("draft", after=second)
    assert fork_point(log.events, node_id="draft").visit_uuid == second


def test_an_agentic_fork_keeps_the_planners_decisions_before_the_cut_and_the_questions_of_its_visits():
    log = RunLog().created()
    log.started()
    log.decide("draft", "start")
    draft = log.visit("draft")
    log.ask(draft, "c1", "which?", ("a", "b")).answer("c1", "a").complete(draft, {"text": "d"}).record(draft)
    log.model_called(purpose="planner").decide("review", "check it", "draft")
    review = log.visit("review", after=draft)
    log.complete(review, {"ok": False}).record(review)
    log.decide("draft", "revise", "review")
    again = log.visit("draft", after=review)
    log.complete(again, {"text": "d2"})
    point = fork_point(log.events, visit_uuid=again)
    copied = copied_history(log.events, point)
    assert [type(e).__name__ for e in copied].count("PlannerDecided") == 3
    assert [e.answer for e in copied if isinstance(e, ev.ClarifyAnswered)] == ["a"]
    assert not [e for e in copied if isinstance(e, (ev.ModelCalled, ev.RunStarted, ev.RunCreated))]


def test_a_rerun_is_cut_before_the_first_failed_or_interrupted_visit_else_before_the_runs_end():
    log, visits = dag_source()
    with pytest.raises(RunNotRerunnable, match="only a failed or cancelled run"):
        rerun_point(fold(log.events), log.events)
    failed = RunLog().created(mode="DAG")
    failed.started()
    done = failed.visit("input")
    failed.complete(done, {})
    broken = failed.visit("research", after=done)
    failed.fail(broken, "model endpoint answered 400").fail_run("node 'research' failed")
    assert rerun_point(fold(failed.events), failed.events).visit_uuid == broken
    cancelled = RunLog().created(mode="DAG")
    cancelled.started()
    cancelled.request_cancel().cancel()
    assert rerun_point(fold(cancelled.events), cancelled.events) == ForkPoint(3)


def test_a_version_of_the_other_mode_or_without_the_fork_node_is_refused():
    log, _ = dag_source()
    created = log.events[0]
    assert isinstance(created, ev.RunCreated)
    point = ForkPoint(7, "v3", "summary")
    check_fork_version(created, workflow_from_dict(GRAPH), 1, point)
    with pytest.raises(ForkVisitNotFound, match="version 2 of workflow .* has no node 'summary'"):
        check_fork_version(created, workflow_from_dict({**GRAPH, "nodes": GRAPH["nodes"][:2], "edges": []}), 2, point)
    agentic = {**GRAPH, "mode": "AGENTIC", "startNodeId": "input"}
    with pytest.raises(ForkModeChanged, match="a fork keeps its source's mode"):
        check_fork_version(created, workflow_from_dict(agentic), 3, point)


def test_a_forks_log_is_its_creation_the_fork_event_and_the_copies_at_its_own_positions_with_their_payloads():
    log, visits = dag_source()
    source = log.events[0]
    assert isinstance(source, ev.RunCreated)
    created = msgspec.structs.replace(source, originator_id=FORK_ID)
    point = fork_point(log.events, node_id="summary")
    copied = copied_history(log.events, point)
    forked, *copies = fork_events(created, source, point, copied)
    assert isinstance(forked, ev.RunForked)
    assert (forked.originator_version, forked.source_run_id, forked.source_position) == (2, source.originator_id, point.position)
    assert forked.copied_positions == tuple(e.originator_version for e in copied) and forked.source_chain_head == ""
    assert [e.originator_version for e in copies] == list(range(3, 3 + len(copied)))
    assert all(e.originator_id == FORK_ID for e in copies)
    strip = {"originator_id", "originator_version"}
    assert [{k: v for k, v in msgspec.to_builtins(e).items() if k not in strip} for e in copies] == [
        {k: v for k, v in msgspec.to_builtins(e).items() if k not in strip} for e in copied
    ]


def test_a_fork_with_copied_questions_waits_unstarted_and_numbers_its_next_visit_after_every_copied_one():
    log = RunLog().created(mode="DAG")
    log.started()
    first = log.visit("ask", sort_order=1)
    log.ask(first, "c1", "which?").answer("c1", "a").complete(first, {}).record(first)
    later = log.visit("other", sort_order=5)
    log.complete(later, {})
    source = log.events[0]
    assert isinstance(source, ev.RunCreated)
    created = msgspec.structs.replace(source, originator_id=FORK_ID)
    point = ForkPoint(log.events[-1].originator_version)
    run = fold([created, *fork_events(created, source, point, copied_history(log.events, point))])
    assert run is not None and run.status is RunStatus.CREATED and not run.started
    assert run.visit_count == 5 and run.pending_clarify is None and run.answered_clarify_ids == {"c1"}
