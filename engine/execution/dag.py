"""DAG mode: the scheduling rule (pure: which nodes may run, which are skipped) and the runner that applies it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.conditions import evaluate
from domain.vocabulary import VISIT_FAILED, VISIT_SKIPPED, VISIT_SUCCESS, VisitStatus
from domain.workflow import (
    WorkflowDefinition,
    edge_condition,
    edges_into,
    node_by_id,
    predecessors,
    topological_order,
)
from engine.execution.outcomes import (
    Completed,
    Failed,
    HandedOver,
    Paused,
    RunOutcome,
    Skip,
    VisitOutcome,
    node_failed,
)
from engine.execution.progress import Progress
from engine.execution.session import RunSession


@dataclass
class DagPlan:
    """What to do next: nodes to start, nodes to skip, and whether every node is settled."""

    ready: list[str] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    settled: bool = False
    failed: list[str] = field(default_factory=list)


def _edge_verdict(source_status: VisitStatus | None, condition: Any, scope: dict[str, Any]) -> tuple[bool, str]:
    """(edge is live, why not) for an edge whose source has settled."""
    if source_status == VISIT_SKIPPED:
        return False, "was skipped"
    if condition is not None and not evaluate(condition, scope):
        return False, "condition is false"
    return True, ""


def plan_dag(defn: WorkflowDefinition, states: Mapping[str, VisitStatus], scope: dict[str, Any]) -> DagPlan:
    """The next step for `states` (node id -> RUNNING/SUCCESS/FAILED/SKIPPED; absent: not begun).

    A node runs once all its predecessors settled and at least one incoming edge is live (its
    source succeeded and its condition holds); when every incoming edge is dead it is skipped,
    which in turn kills the edges out of it. Skips cascade within one call.
    """
    plan = DagPlan(failed=[node for node, status in states.items() if status == VISIT_FAILED])
    known = dict(states)
    for node_id in topological_order(defn):
        if node_id in known:
            continue
        edges = edges_into(defn, node_id)
        if not edges:
            plan.ready.append(node_id)
            continue
        if any(known.get(edge.source) not in (VISIT_SUCCESS, VISIT_SKIPPED) for edge in edges):
            continue
        verdicts = [(edge, *_edge_verdict(known[edge.source], edge_condition(edge), scope)) for edge in edges]
        if any(live for _, live, _ in verdicts):
            plan.ready.append(node_id)
            continue
        reason = "; ".join(_dead_edge(edge, why) for edge, _, why in verdicts)
        plan.skips.append(Skip(node_id, reason))
        known[node_id] = VISIT_SKIPPED
    plan.settled = all(known.get(node.id) in (VISIT_SUCCESS, VISIT_SKIPPED, VISIT_FAILED) for node in defn.nodes)
    return plan


def _dead_edge(edge: Any, why: str) -> str:
    if why == "was skipped":
        return f"predecessor {edge.source!r} was skipped"
    return f"condition {edge.condition.strip()!r} on the edge from {edge.source!r} is false"


def node_states(progress: Progress) -> dict[str, VisitStatus]:
    """Each visited node's status: that of its latest visit."""
    return {visit.node_id: visit.status for visit in progress.visits.values()}


async def run_dag(session: RunSession) -> RunOutcome:
    """Run ready nodes concurrently until every node settled, one failed, or one asked a question.

    On a failure the other running visits are stopped (the session closes them); on a question
    no new node starts, the running ones finish, and then the run pauses. While the process stops,
    no new node starts either: the running ones finish and the run is handed over, unless every
    node is settled by then.
    """
    defn, progress = session.defn, session.progress
    assert defn is not None
    tasks: dict[asyncio.Task[VisitOutcome], str] = {}
    failure: tuple[str, Failed] | None = None
    pause: Paused | None = None
    try:
        for visit in progress.open_visits():
            tasks[_spawn(session.run_visit(session.node(visit.node_id), visit, resumed=True))] = visit.node_id
        while True:
            if failure is None and pause is None and not session.handing_over:
                failure = await _launch_ready(session, defn, progress, tasks)
                if failure is not None:
                    _cancel(tasks)
            if not tasks:
                break
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                node_id = tasks.pop(task)
                if task.cancelled():
                    continue
                outcome = task.result()
                if isinstance(outcome, Failed) and failure is None:
                    failure = (node_id, outcome)
                    _cancel(tasks)
                elif isinstance(outcome, Paused) and pause is None:
                    pause = outcome
    finally:
        _cancel(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
    if failure is not None:
        return Failed(node_failed(failure[0], failure[1].error), failure[1].code)
    if pause is not None:
        return pause
    if session.handing_over and not _all_settled(defn, progress):
        return HandedOver()
    return _output(defn, progress)


async def _launch_ready(session: RunSession, defn: WorkflowDefinition, progress: Progress,
                        tasks: dict[asyncio.Task[VisitOutcome], str]) -> tuple[str, Failed] | None:
    """Record skips and start every ready node; the first failed node and its error, if any."""
    plan = plan_dag(defn, node_states(progress), progress.scope())
    if plan.failed:
        visit = progress.last_of(plan.failed[0])
        if visit is None or visit.error is None:
            return plan.failed[0], Failed("failed", "RUN_FAILED")
        return plan.failed[0], Failed(visit.error, visit.error_code or "RUN_FAILED")
    if plan.skips:
        await session.skip(plan.skips)
    for node_id in plan.ready:
        came = [progress.last_of(source) for source in predecessors(defn, node_id)]
        live = [visit for visit in came if visit is not None and visit.status == VISIT_SUCCESS]
        visit = await session.start_visit(
            session.node(node_id), iter_seq=1, came_from=live[0] if live else None,
            predecessors=tuple(visit.visit_uuid for visit in live),
        )
        tasks[_spawn(session.run_visit(session.node(node_id), visit))] = node_id
    return None


def _all_settled(defn: WorkflowDefinition, progress: Progress) -> bool:
    """True when every node has a recorded visit that ended (succeeded, failed or skipped)."""
    states = node_states(progress)
    return all(states.get(node.id) in (VISIT_SUCCESS, VISIT_SKIPPED, VISIT_FAILED) for node in defn.nodes)


def _output(defn: WorkflowDefinition, progress: Progress) -> RunOutcome:
    data: dict[str, Any] = {}
    ran = False
    for node_id in topological_order(defn):
        node = node_by_id(defn, node_id)
        visit = progress.last_of(node_id)
        if node is not None and node.type == "output" and visit is not None and visit.status == VISIT_SUCCESS:
            ran = True
            if isinstance(visit.data, dict):
                data.update(visit.data)
    if not ran:
        return Failed("no output node ran (every output node was skipped)", "EMPTY_RESULT")
    return Completed(data)


def _spawn(step: Any) -> asyncio.Task[VisitOutcome]:
    return asyncio.ensure_future(step)


def _cancel(tasks: dict[asyncio.Task[VisitOutcome], str]) -> None:
    for task in tasks:
        task.cancel()
