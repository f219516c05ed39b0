"""The Run aggregate refuses illegal transitions and changes only by applying events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from domain import run as decide
from domain.errors import (
    ClarifyAlreadyAnswered,
    ClarifyNotFound,
    IllegalTransition,
    RunAlreadyFinished,
    RunAlreadyStarted,
    UnknownVisit,
)
from domain.run import RunStatus, evolve, fold

AT = datetime(2026, 7, 1, tzinfo=UTC)
FLOW: dict[str, Any] = dict(workflow_id=1, workflow_name="demo", workflow_version=1, display_name="Demo", mode="DAG")


def created():
    return evolve(None, decide.create_run(uuid4(), AT, **FLOW))


def apply(run, *decisions):
    for decision in decisions:
        run = evolve(run, decision(run, AT))
    return run


def running():
    return apply(created(), decide.start_run)


def with_visit(run, visit="v1"):
    return apply(run, lambda s, at: decide.start_visit(s, at, visit_uuid=visit, node_id="n", node_type="llm",
                                                  node_label="N", iter_seq=1, sort_order=1))


def test_a_new_run_is_created_at_version_one():
    run = created()
    assert run.status is RunStatus.CREATED and run.version == 1


def test_starting_twice_is_refused():
    with pytest.raises(RunAlreadyStarted):
        decide.start_run(running(), AT)


def test_completing_a_run_that_was_never_started_is_refused():
    with pytest.raises(IllegalTransition):
        decide.complete_run(created(), AT, output={})


def test_answering_a_question_that_was_not_asked_is_refused():
    with pytest.raises(ClarifyNotFound):
        decide.answer_clarify(running(), AT, clarify_id="c1", answer="yes")


def test_streaming_into_a_visit_that_is_not_open_is_refused():
    with pytest.raises(UnknownVisit):
        decide.stream_chunk(running(), AT, visit_uuid="nope", node_id="n", kind="thinking", content="x")


def test_an_unknown_stream_kind_is_refused():
    with pytest.raises(IllegalTransition):
        decide.stream_chunk(with_visit(running()), AT, visit_uuid="v1", node_id="n", kind="shouting", content="x")


def test_a_question_pauses_the_run_and_its_answer_resumes_it():
    run = with_visit(running())
    run = apply(run, lambda s, at: decide.request_clarify(s, at, clarify_id="c1", visit_uuid="v1", node_id="n",
                                                     question="Which?", choices=("a", "b")))
    assert run.status is RunStatus.PAUSED and run.pending_clarify.choices == ("a", "b")
    run = apply(run, lambda s, at: decide.answer_clarify(s, at, clarify_id="c1", answer="a"))
    assert run.status is RunStatus.RUNNING and run.pending_clarify is None


def test_a_second_answer_to_the_same_question_is_already_answered():
    run = with_visit(running())
    run = apply(run,
                lambda s, at: decide.request_clarify(s, at, clarify_id="c1", visit_uuid="v1", node_id="n", question="?"),
                lambda s, at: decide.answer_clarify(s, at, clarify_id="c1", answer="a"))
    with pytest.raises(ClarifyAlreadyAnswered):
        decide.answer_clarify(run, AT, clarify_id="c1", answer="b")


def test_cancel_requested_and_cancelled_are_distinct_facts():
    run = apply(running(), decide.request_cancel)
    assert run.status is RunStatus.CANCEL_REQUESTED and run.cancel_requested
    run = apply(run, decide.cancel_run)
    assert run.status is RunStatus.CANCELLED


def test_confirming_a_cancel_nobody_requested_is_refused():
    with pytest.raises(IllegalTransition):
        decide.cancel_run(running(), AT)


def test_a_run_that_completed_before_the_cancel_took_effect_stays_completed():
    run = apply(running(), decide.request_cancel,
                lambda s, at: decide.complete_run(s, at, output={"status": 200, "message": "", "data": {}}))
    assert run.status is RunStatus.SUCCEEDED
    with pytest.raises(RunAlreadyFinished):
        decide.cancel_run(run, AT)


def test_nothing_can_happen_to_a_finished_run():
    run = apply(running(), lambda s, at: decide.fail_run(s, at, error="boom"))
    for decision in (decide.request_cancel, lambda s, at: decide.fail_run(s, at, error="again")):
        with pytest.raises(RunAlreadyFinished):
            decision(run, AT)


def test_a_start_of_a_run_that_was_started_is_already_started_even_once_it_has_finished():
    run = apply(running(), lambda s, at: decide.fail_run(s, at, error="boom"))
    with pytest.raises(RunAlreadyStarted):
        decide.check_startable(run)
    with pytest.raises(RunAlreadyStarted):
        decide.start_run(run, AT)


def test_a_start_of_a_run_cancelled_before_it_was_started_is_already_finished():
    asked_to_stop = apply(created(), decide.request_cancel)
    for run in (asked_to_stop, apply(asked_to_stop, decide.cancel_run)):
        with pytest.raises(RunAlreadyFinished):
            decide.start_run(run, AT)


def paused():
    return apply(with_visit(running()), lambda s, at: decide.request_clarify(s, at, clarify_id="c1", visit_uuid="v1",
                                                                        node_id="n", question="Which?"))


def test_an_answer_once_a_cancel_was_requested_is_refused_as_the_run_will_not_go_on():
    with pytest.raises(RunAlreadyFinished, match="is being cancelled"):
        decide.answer_clarify(apply(paused(), decide.request_cancel), AT, clarify_id="c1", answer="a")


def test_an_answer_is_taken_only_for_the_question_the_run_waits_on():
    run = apply(paused(), lambda s, at: decide.answer_clarify(s, at, clarify_id="c1", answer="a"))
    for waiting_on_nothing, clarify_id in ((running(), "c1"), (paused(), "c2")):
        with pytest.raises(ClarifyNotFound):
            decide.check_answerable(waiting_on_nothing, clarify_id)
    assert run.answered_clarify_ids == {"c1"}


def answered_then_failed():
    run = with_visit(running())
    return apply(run, lambda s, at: decide.request_clarify(s, at, clarify_id="c1", visit_uuid="v1", node_id="n",
                                                      question="Which?"),
                 lambda s, at: decide.answer_clarify(s, at, clarify_id="c1", answer="a"),
                 lambda s, at: decide.fail_run(s, at, error="boom"))


def test_an_answer_is_checked_for_already_answered_first_then_a_finished_run_then_an_unknown_question():
    with pytest.raises(ClarifyAlreadyAnswered):
        decide.check_answerable(answered_then_failed(), "c1")
    with pytest.raises(RunAlreadyFinished):
        decide.check_answerable(answered_then_failed(), "c-unknown")
    with pytest.raises(ClarifyNotFound):
        decide.check_answerable(created(), "c1")


def test_positions_increase_by_one_per_event():
    events, run = [], None
    for decision in (lambda s, at: decide.create_run(uuid4(), at, **FLOW),
                     decide.start_run, decide.request_cancel, decide.cancel_run):
        event = decision(run, AT)
        events.append(event)
        run = evolve(run, event)
    assert [e.originator_version for e in events] == [1, 2, 3, 4]
    assert fold(events) == run


def test_a_log_must_begin_with_run_created():
    with pytest.raises(IllegalTransition):
        evolve(None, decide.start_run(created(), AT))


def test_a_skip_records_which_visit_of_the_node_it_is():
    skip = decide.skip_visit(running(), AT, visit_uuid="s1", node_id="n", node_type="llm", node_label="N",
                        iter_seq=2, sort_order=1, reason="branch not taken")
    assert (skip.iter_seq, skip.reason) == (2, "branch not taken")
    with pytest.raises(IllegalTransition):
        decide.skip_visit(running(), AT, visit_uuid="s1", node_id="n", node_type="llm", node_label="N",
                     iter_seq=0, sort_order=1)
