"""Forks, decided from the source run's events alone: where a fork is cut, what it copies, its first events.

A fork is cut at a position of its source: just before the chosen visit began (a re-run: before its
first failed or interrupted visit). It copies every visit that had ended with an output or a skip by
then, each with all of its events, and every planner decision before the cut; it copies nothing of the
source after the cut, nothing of the run as a whole (start, cancel, end, model-call records) and no
visit that had not ended by then. In DAG mode it also leaves out the visits of the chosen node and of
every node downstream of it in the version the fork runs. Each copy keeps its source's payload and
time, and takes the fork's run id and its next position.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from domain import events as ev
from domain.errors import DomainError
from domain.run_state import Run, RunStatus
from domain.workflow import WorkflowDefinition, descendants, node_by_id

Ending = Literal["", "completed", "failed", "skipped"]
_ENDINGS: dict[type, Ending] = {ev.VisitCompleted: "completed", ev.VisitFailed: "failed", ev.VisitSkipped: "skipped"}
_REUSED: frozenset[Ending] = frozenset({"completed", "skipped"})
_VISIT_EVENTS = (ev.VisitStarted, ev.NodeStreamed, ev.VisitCompleted, ev.VisitSkipped, ev.VisitRecorded, ev.ClarifyRequested)
"""The events of a visit a fork copies (a failed visit is never copied, so neither is its VisitFailed)."""
RERUNNABLE = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})


class ForkVisitNotFound(DomainError):
    """The source run has no such visit (or no visit of that node), or the fork's version lacks its node."""

    code = "NODE_NOT_FOUND"


class VisitNotFinished(DomainError):
    """A fork starts from a finished visit; this one is still running or waiting on a question."""

    code = "VISIT_NOT_FINISHED"


class RunNotRerunnable(DomainError):
    """Only a failed or cancelled run is re-run."""

    code = "RUN_NOT_FAILED"


class ForkModeChanged(DomainError):
    """A fork keeps its source's mode (DAG or AGENTIC); a version of the other mode is refused."""


class VisitTrace(msgspec.Struct):
    """One visit as a fork sees it: its node, the position it began at, and how it ended ("": not yet)."""

    visit_uuid: str
    node_id: str
    began: int
    ending: Ending = ""


class ForkPoint(msgspec.Struct, frozen=True):
    """Where a fork is cut: the source position it copies up to, and the visit it executes again (if any)."""

    position: int
    visit_uuid: str | None = None
    node_id: str | None = None


def visit_traces(events: Iterable[ev.RunEvent]) -> dict[str, VisitTrace]:
    """Every visit of the events, in the order they began."""
    traces: dict[str, VisitTrace] = {}
    for event in events:
        if isinstance(event, (ev.VisitStarted, ev.VisitSkipped)):
            traces.setdefault(event.visit_uuid, VisitTrace(event.visit_uuid, event.node_id, event.originator_version))
        if isinstance(event, (ev.VisitCompleted, ev.VisitFailed, ev.VisitSkipped)) and event.visit_uuid in traces:
            traces[event.visit_uuid].ending = _ENDINGS[type(event)]
    return traces


def _before(trace: VisitTrace) -> ForkPoint:
    return ForkPoint(trace.began - 1, trace.visit_uuid, trace.node_id)


def fork_point(events: Sequence[ev.RunEvent], *, visit_uuid: str | None = None, node_id: str | None = None) -> ForkPoint:
    """The cut just before a finished visit began: the one named, else the node's latest finished visit."""
    traces = visit_traces(events)
    if visit_uuid is not None:
        trace = traces.get(visit_uuid)
        if trace is None:
            raise ForkVisitNotFound(f"the run has no visit {visit_uuid[:64]!r}", visit_uuid=visit_uuid[:64])
        if not trace.ending:
            raise VisitNotFinished(
                f"visit {visit_uuid} of node {trace.node_id!r} has not finished; a fork starts from a finished visit",
                visit_uuid=visit_uuid,
            )
        return _before(trace)
    visits = [trace for trace in traces.values() if trace.node_id == node_id]
    finished = [trace for trace in visits if trace.ending]
    if finished:
        return _before(finished[-1])
    shown = (node_id or "")[:64]
    if visits:
        raise VisitNotFinished(f"node {shown!r} has no finished visit yet; a fork starts from a finished visit", node_id=shown)
    raise ForkVisitNotFound(f"the run has no visit of node {shown!r}", node_id=shown)


def rerun_point(run: Run, events: Sequence[ev.RunEvent]) -> ForkPoint:
    """The cut of a re-run: before the first visit that failed or was interrupted, else before the run's end."""
    if run.status not in RERUNNABLE:
        raise RunNotRerunnable(
            f"run {run.id.hex} is {run.status.value}; only a failed or cancelled run can be re-run "
            "(fork it to run it again from a visit)",
            run_id=run.id.hex, status=run.status.value,
        )
    for trace in visit_traces(events).values():
        if trace.ending in ("", "failed"):
            return _before(trace)
    return ForkPoint(events[-1].originator_version - 1)


def check_fork_version(source: ev.RunCreated, definition: WorkflowDefinition, version: int, point: ForkPoint) -> None:
    """Refuse a version of the other mode, or one whose graph lacks the node the fork executes again."""
    if definition.mode != source.mode:
        raise ForkModeChanged(
            f"version {version} of workflow {source.workflow_name!r} runs in {definition.mode} mode and the run "
            f"in {source.mode} mode; a fork keeps its source's mode",
        )
    if point.node_id is not None and node_by_id(definition, point.node_id) is None:
        raise ForkVisitNotFound(
            f"version {version} of workflow {source.workflow_name!r} has no node {point.node_id!r} to fork from",
            node_id=point.node_id,
        )


def reexecuted_nodes(definition: WorkflowDefinition, point: ForkPoint) -> frozenset[str]:
    """The nodes whose earlier visits a fork leaves out: in DAG mode the chosen node and everything downstream of it."""
    if point.node_id is None or definition.mode != "DAG":
        return frozenset()
    return frozenset({point.node_id} | descendants(definition, point.node_id))


def copied_history(events: Sequence[ev.RunEvent], point: ForkPoint, reexecuted: frozenset[str] = frozenset()) -> list[ev.RunEvent]:
    """The source's events a fork copies, in their order (see the module's docstring)."""
    before = [event for event in events if event.originator_version <= point.position]
    kept = {
        uuid for uuid, trace in visit_traces(before).items()
        if trace.ending in _REUSED and trace.node_id not in reexecuted
    }
    asked = {event.clarify_id for event in before if isinstance(event, ev.ClarifyRequested) and event.visit_uuid in kept}
    return [event for event in before if _copied(event, kept, asked)]


def _copied(event: ev.RunEvent, kept: set[str], asked: set[str]) -> bool:
    if isinstance(event, ev.PlannerDecided):
        return True
    if isinstance(event, ev.ClarifyAnswered):
        return event.clarify_id in asked
    return isinstance(event, _VISIT_EVENTS) and event.visit_uuid in kept


def fork_events(
    created: ev.RunCreated, source: ev.RunCreated, point: ForkPoint, copied: Sequence[ev.RunEvent], *,
    rerun: bool = False, chain_head: str = "",
) -> list[ev.RunEvent]:
    """What follows a fork's RunCreated: its RunForked, then the copies at the fork's next positions."""
    forked = ev.RunForked(
        originator_id=created.originator_id, originator_version=created.originator_version + 1,
        timestamp=created.timestamp, source_run_id=source.originator_id, source_position=point.position,
        source_workflow_version=source.workflow_version, source_visit_uuid=point.visit_uuid,
        source_node_id=point.node_id, source_chain_head=chain_head,
        copied_positions=tuple(event.originator_version for event in copied), rerun=rerun,
    )
    first = forked.originator_version + 1
    copies = [
        msgspec.structs.replace(event, originator_id=created.originator_id, originator_version=first + offset)
        for offset, event in enumerate(copied)
    ]
    return [forked, *copies]
