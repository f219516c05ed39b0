"""DAG scheduling: nodes run once their predecessors settle; false conditions skip, and skips cascade."""

from __future__ import annotations

from domain.workflow import workflow_from_dict
from engine.execution.dag import Skip, plan_dag


def dag(nodes: list[str], edges: list[tuple], types: dict[str, str] | None = None):
    types = types or {}
    return workflow_from_dict({
        "name": "flow", "displayName": "Flow", "mode": "DAG",
        "nodes": [{"id": n, "type": types.get(n, "llm")} for n in nodes],
        "edges": [{"source": e[0], "target": e[1], **({"condition": e[2]} if len(e) > 2 else {})} for e in edges],
    })


DIAMOND = dag(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_only_the_roots_are_ready_at_the_start():
    plan = plan_dag(DIAMOND, {}, {})
    assert plan.ready == ["a"] and not plan.skips and not plan.settled


def test_independent_successors_become_ready_together():
    assert plan_dag(DIAMOND, {"a": "SUCCESS"}, {}).ready == ["b", "c"]


def test_a_running_node_is_not_started_again_and_its_successors_wait():
    assert plan_dag(DIAMOND, {"a": "SUCCESS", "b": "SUCCESS", "c": "RUNNING"}, {}).ready == []


def test_a_join_runs_once_every_predecessor_is_done():
    plan = plan_dag(DIAMOND, {"a": "SUCCESS", "b": "SUCCESS", "c": "SUCCESS"}, {})
    assert plan.ready == ["d"]


def test_the_plan_is_settled_when_every_node_succeeded_or_was_skipped():
    assert plan_dag(DIAMOND, {"a": "SUCCESS", "b": "SUCCESS", "c": "SKIPPED", "d": "SUCCESS"}, {}).settled


def test_a_false_condition_skips_the_node_and_the_nodes_only_reachable_through_it():
    flow = dag(["gate", "yes", "no", "after-no", "end"],
               [("gate", "yes", "{{gate.ok}} == true"), ("gate", "no", "{{gate.ok}} == false"),
                ("no", "after-no"), ("yes", "end"), ("after-no", "end")])
    plan = plan_dag(flow, {"gate": "SUCCESS"}, {"gate": {"ok": True}})
    assert plan.ready == ["yes"]
    assert plan.skips == [
        Skip("no", "condition '{{gate.ok}} == false' on the edge from 'gate' is false"),
        Skip("after-no", "predecessor 'no' was skipped"),
    ]


def test_a_join_with_one_live_edge_runs_even_when_the_other_branch_was_skipped():
    flow = dag(["gate", "yes", "no", "end"],
               [("gate", "yes", "{{gate.ok}}"), ("gate", "no", "not {{gate.ok}}"), ("yes", "end"), ("no", "end")])
    plan = plan_dag(flow, {"gate": "SUCCESS", "yes": "SUCCESS", "no": "SKIPPED"}, {"gate": {"ok": True}})
    assert plan.ready == ["end"] and not plan.skips


def test_a_condition_on_a_missing_field_is_false_so_the_node_is_skipped():
    flow = dag(["a", "b"], [("a", "b", "{{a.missing}} exists")])
    assert plan_dag(flow, {"a": "SUCCESS"}, {"a": {}}).skips == [
        Skip("b", "condition '{{a.missing}} exists' on the edge from 'a' is false")]


def test_failed_nodes_are_reported():
    assert plan_dag(DIAMOND, {"a": "SUCCESS", "b": "FAILED"}, {}).failed == ["b"]
