"""The progress fold: what a resumed session knows from the log alone."""

from __future__ import annotations

from domain import events as ev
from engine.execution.progress import fold_progress
from projections.visits import Visit, VisitIndex
from tests.fixtures.stored import decoded, rows_of, stored_logs
from tests.unit.builders import RunLog, fold


def asked(log: RunLog, uuid: str, clarify_id: str, turn: int) -> None:
    n = len(log.events) + 1
    log.events.append(ev.ClarifyRequested(
        originator_id=log.run_id, originator_version=n, timestamp=log.start + log.step * n,
        clarify_id=clarify_id, visit_uuid=uuid, node_id="ask", question="Which?", choices=("a", "b"), turn=turn,
    ))


def test_the_scope_holds_variables_uploads_and_each_nodes_latest_successful_output():
    log = RunLog().created(variables={"topic": "tides"}, uploaded_files=("a.csv",)).started()
    log.complete(log.visit("draft"), {"text": "one"})
    log.complete(log.visit("draft"), {"text": "two"})
    log.fail(log.visit("review"), "boom")
    assert fold_progress(log.events).scope() == {"topic": "tides", "uploadedFiles": ["a.csv"], "draft": {"text": "two"}}


def test_an_answered_question_is_a_checkpoint_the_visit_resumes_after():
    log = RunLog().created().started()
    uuid = log.visit("ask")
    log.stream(uuid, "thinking", "hmm")
    asked(log, uuid, "c1", turn=2)
    waiting = fold_progress(log.events).visits[uuid]
    log.answer("c1", "b")
    resumed = fold_progress(log.events).visits[uuid]
    assert waiting.waiting and not waiting.interrupted
    assert resumed.turns_done == 2 and resumed.answers[0].answer == "b" and not resumed.interrupted


def test_a_visit_that_streamed_since_its_checkpoint_was_interrupted_and_remembers_its_tool_calls():
    log = RunLog().created().started()
    uuid = log.visit("work")
    log.stream(uuid, "tool_call", '{"q":"x"}', "web_search")
    visit = fold_progress(log.events).visits[uuid]
    assert visit.interrupted and visit.tools_since_checkpoint == ["web_search"] and visit.turns_done == 0


def test_the_trail_keeps_visits_and_decisions_in_log_order_and_counts_decisions():
    log = RunLog().created().started()
    first = log.visit("input")
    log.complete(first, {}).decide("draft", "go", "input")
    log.skip("other")
    progress = fold_progress(log.events)
    assert [getattr(item, "node_id", None) or item.next_node_id for item in progress.trail] == ["input", "draft"]
    assert progress.decisions == 1 and progress.started_visits() == 1


def test_a_skipped_visit_has_the_iter_seq_its_event_recorded_and_old_skips_count_the_nodes_visits():
    log = RunLog().created().started()
    log.complete(log.visit("other"), {})
    recorded, old = log.skip("other", iter_seq=5), log.skip("other")
    visits = fold_progress(log.events).visits
    assert (visits[recorded].iter_seq, visits[old].iter_seq) == (5, 3)


def test_progress_and_the_visit_index_see_every_visit_of_the_recorded_logs_alike():
    for path in stored_logs():
        events = [decoded(row) for row in rows_of(path)]
        for run_id in dict.fromkeys(e.originator_id for e in events if isinstance(e, ev.RunEvent)):
            run_events = [e for e in events if isinstance(e, ev.RunEvent) and e.originator_id == run_id]
            index, progress = fold(VisitIndex(), run_events), fold_progress(run_events)
            kept = [v for v in progress.visits.values() if v.visit_uuid in index.by_uuid()]  # the index keeps 200
            assert [facts(v) for v in kept] == [facts(v) for v in index.by_uuid().values()]


def facts(visit: Visit) -> tuple:
    return (visit.visit_uuid, visit.node_id, visit.iter_seq, visit.sort_order, visit.status, visit.output,
            visit.error, visit.from_node_id, visit.from_visit_uuid)
