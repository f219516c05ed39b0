"""Predecessor paths (§2.1): given visits, then the chains that lead to one of them."""

from __future__ import annotations

import pytest

from domain import events as ev
from projections.paths import predecessor_paths
from projections.visits import VisitIndex, VisitNotFound
from tests.unit.builders import RUN_ID, T0, RunLog, fold, wire


def paths_of(run: RunLog, visit_uuid: str, **kwargs) -> dict:
    return wire(predecessor_paths(fold(VisitIndex(max_visits=1000), run.events), visit_uuid, **kwargs))


def test_a_linear_run_has_one_path_as_in_the_first_spec_example():
    run = RunLog().created().started()
    v1 = run.visit("A", "v1")
    v2 = run.visit("B", "v2", after=v1)
    v3 = run.visit("C", "v3", after=v2)
    run.visit("G", "v4", after=v3)
    assert paths_of(run, "v4") == {
        "visitUuids": ["v1", "v2", "v3", "v4"],
        "nodeIds": ["A", "B", "C", "G"],
        "paths": [{"sequence": ["A", "B", "C", "G"], "visitUuids": ["v1", "v2", "v3", "v4"], "hasBacktrack": False}],
        "backtrackEdgeKeys": [],
        "truncated": False,
    }


def test_a_revisit_into_an_earlier_node_is_marked_as_a_back_edge_as_in_the_second_spec_example():
    run = RunLog().created().started()
    v1 = run.visit("A", "v1")
    run.visit("C", "c1", after=v1)
    v2 = run.visit("B", "v2", after=v1)
    v3 = run.visit("G", "v3", after=v2)
    run.visit("C", "v4", after=v3)
    assert paths_of(run, "v4") == {
        "visitUuids": ["v1", "v2", "v3", "v4"],
        "nodeIds": ["A", "B", "G", "C"],
        "paths": [{"sequence": ["A", "B", "G", "C"], "visitUuids": ["v1", "v2", "v3", "v4"], "hasBacktrack": True}],
        "backtrackEdgeKeys": ["G->C"],
        "truncated": False,
    }


def test_a_back_edge_stays_marked_on_paths_that_pass_through_it():
    run = RunLog().created().started()
    a = run.visit("A")
    c1 = run.visit("C", after=a)
    g = run.visit("G", after=c1)
    c2 = run.visit("C", after=g)
    d = run.visit("D", after=c2)
    body = paths_of(run, d)
    assert body["paths"][0]["sequence"] == ["A", "C", "G", "C", "D"]
    assert body["paths"][0]["hasBacktrack"] is True
    assert body["backtrackEdgeKeys"] == ["G->C"]


def test_a_diamond_join_has_one_path_through_each_branch():
    run = RunLog().created().started()
    a = run.visit("A")
    b = run.visit("B", after=a)
    c = run.visit("C", after=a)
    d = run.visit("D", predecessors=(b, c))
    body = paths_of(run, d)
    assert [p["sequence"] for p in body["paths"]] == [["A", "B", "D"], ["A", "C", "D"]]
    assert body["visitUuids"] == [a, b, c, d] and body["nodeIds"] == ["A", "B", "C", "D"]
    assert body["truncated"] is False


def test_predecessor_uuids_take_precedence_over_the_from_visit():
    run = RunLog().created().started()
    a = run.visit("A")
    b = run.visit("B")
    c = run.visit("C", after=a, predecessors=(b,))
    assert [p["sequence"] for p in paths_of(run, c)["paths"]] == [["B", "C"]]


def test_a_visit_with_no_predecessors_is_a_path_of_its_own():
    run = RunLog().created().started()
    a = run.visit("A")
    assert paths_of(run, a)["paths"] == [{"sequence": ["A"], "visitUuids": [a], "hasBacktrack": False}]


def _chain_of_diamonds(run: RunLog, count: int) -> str:
    join = run.visit("S")
    for i in range(count):
        left = run.visit(f"L{i}", after=join)
        right = run.visit(f"R{i}", after=join)
        join = run.visit(f"J{i}", predecessors=(left, right))
    return join


def test_paths_are_capped_at_one_hundred_and_marked_truncated():
    run = RunLog().created().started()
    end = _chain_of_diamonds(run, 7)  # 128 paths
    body = paths_of(run, end)
    assert len(body["paths"]) == 100 and body["truncated"] is True
    assert len({tuple(p["visitUuids"]) for p in body["paths"]}) == 100


def test_as_many_paths_as_the_cap_are_not_truncated_and_one_more_is():
    run = RunLog().created().started()
    end = _chain_of_diamonds(run, 2)  # 4 paths
    at_cap = paths_of(run, end, max_paths=4)
    assert len(at_cap["paths"]) == 4 and at_cap["truncated"] is False
    assert paths_of(run, end, max_paths=3)["truncated"] is True


def test_a_chain_deeper_than_two_hundred_is_cut_at_its_oldest_end():
    run = RunLog().created().started()
    last = run.visit("N0")
    for i in range(1, 250):
        last = run.visit(f"N{i}", after=last)
    body = paths_of(run, last)
    (path,) = body["paths"]
    assert len(path["visitUuids"]) == 200
    assert path["sequence"][0] == "N50" and path["sequence"][-1] == "N249"
    assert body["truncated"] is True


def test_a_chain_of_exactly_two_hundred_is_whole():
    run = RunLog().created().started()
    last = run.visit("N0")
    for i in range(1, 200):
        last = run.visit(f"N{i}", after=last)
    body = paths_of(run, last)
    assert len(body["paths"][0]["visitUuids"]) == 200 and body["truncated"] is False


def test_a_malformed_cycle_of_predecessors_does_not_loop():
    index = VisitIndex()
    for n, (uuid, pred) in enumerate([("x", "y"), ("y", "x")], start=1):
        index.apply(ev.VisitStarted(
            originator_id=RUN_ID, originator_version=n, timestamp=T0, visit_uuid=uuid, node_id=uuid.upper(),
            node_type="llm", node_label=uuid, iter_seq=1, sort_order=n, predecessor_visit_uuids=(pred,),
        ))
    assert predecessor_paths(index, "y").paths[0].visit_uuids == ["x", "y"]


def test_the_paths_of_an_unknown_visit_raise_visit_not_found():
    with pytest.raises(VisitNotFound):
        paths_of(RunLog().created(), "nope")
