"""What an asking visit may see of its run: only the visits that come before it."""

from __future__ import annotations

from uuid import uuid4

import pytest

from engine.context.views import ColdIndexes, VisibleIndex
from engine.runs.service import RunNotFound
from projections.paths import predecessor_paths
from projections.visits import VisitIndex, VisitNotFound, output_view
from tests.unit.builders import RUN_ID, RunLog, fold


def revisit_run() -> VisitIndex:
    run = RunLog().created().started()
    a = run.visit("A", "a")
    run.complete(a, {"n": 1})
    c1 = run.visit("C", "c1", after=a)
    run.complete(c1, {"n": 2})
    g = run.visit("G", "g", after=c1)
    run.complete(g, {"n": 3})
    run.visit("C", "c2", after=g)
    run.visit("D", "d", after="c2")
    return fold(VisitIndex(), run.events)


def seen_by(index: VisitIndex, uuid: str, **how) -> VisibleIndex:
    return VisibleIndex(index, index.get(uuid), **how)


def test_earlier_visits_are_visible_and_the_asker_and_later_ones_are_not():
    index = revisit_run()
    visible = seen_by(index, "c2")
    assert [v for v in ("a", "c1", "g", "c2", "d") if visible.find(v)] == ["a", "c1", "g"]


def test_the_asker_itself_is_visible_only_when_asked_for():
    index = revisit_run()
    assert seen_by(index, "c2", with_asker=True).find("c2") is not None
    assert seen_by(index, "c2", with_asker=True).find("d") is None


def test_the_last_visit_of_a_node_is_the_last_one_before_the_asker():
    visible = seen_by(revisit_run(), "c2")
    assert visible.visit_at("C").visit_uuid == "c1"
    assert output_view(visible, "C").data == {"n": 2}


def test_a_later_visit_is_refused_exactly_like_one_that_does_not_exist():
    visible = seen_by(revisit_run(), "g")
    with pytest.raises(VisitNotFound) as later:
        visible.visit_at("D")
    with pytest.raises(VisitNotFound) as missing:
        visible.visit_at("Z")
    assert str(later.value).replace("D", "?") == str(missing.value).replace("Z", "?")
    with pytest.raises(VisitNotFound, match="visit d not found"):
        visible.get("d")
    with pytest.raises(VisitNotFound, match="with iterSeq 2"):
        visible.visit_at("C", 2)


def test_the_path_from_the_asker_is_the_same_as_over_the_whole_index():
    index = revisit_run()
    assert predecessor_paths(seen_by(index, "c2", with_asker=True), "c2") == predecessor_paths(index, "c2")


class FakeRuns:
    """`RunService.events` over a list of events of any runs, recording each (run, after) asked for."""

    def __init__(self, events) -> None:
        self.log = list(events)
        self.asked: list[tuple] = []

    async def events(self, run_id, *, after=0):
        self.asked.append((run_id, after))
        return [e for e in self.log if e.originator_id == run_id and e.originator_version > after]


async def test_a_cold_fold_is_kept_and_caught_up_from_where_it_stopped():
    run = RunLog().created().started()
    a = run.visit("A", "a")
    runs = FakeRuns(run.events)
    cold = ColdIndexes()
    first = await cold.read(runs, RUN_ID)
    run.complete(a, {"n": 1})
    runs.log = list(run.events)
    again = await cold.read(runs, RUN_ID)
    assert again is first and again.get("a").output["data"] == {"n": 1}
    assert runs.asked == [(RUN_ID, 0), (RUN_ID, 3)]


async def test_cold_folds_beyond_the_limit_forget_the_least_recently_read():
    logs = [RunLog(run_id=uuid4()).created().started() for _ in range(3)]
    runs = FakeRuns([event for log in logs for event in log.events])
    cold = ColdIndexes(max_runs=2)
    for log in (logs[0], logs[1], logs[0], logs[2]):
        await cold.read(runs, log.run_id)
    runs.asked.clear()
    for log in logs:
        await cold.read(runs, log.run_id)
    assert runs.asked == [(logs[0].run_id, 2), (logs[1].run_id, 0), (logs[2].run_id, 0)]
    assert len(cold) == 2


async def test_a_run_with_no_events_is_not_found_and_not_kept():
    cold = ColdIndexes()
    with pytest.raises(RunNotFound):
        await cold.read(FakeRuns([]), uuid4())
    assert len(cold) == 0
