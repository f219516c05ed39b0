"""How far a run got, folded from its events: the only memory the engine resumes from.

A visit's facts (status, output, iterSeq, where it came from) are folded once, by the
visit index (`projections.visits.VisitFold`); progress adds only what execution needs:
questions and answers, the checkpoint a visit resumes from, planner decisions, inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from domain import events as ev
from domain.vocabulary import VISIT_SKIPPED, VISIT_SUCCESS
from engine.hermes.ports import REMOTE_EVENTS, RemoteEvent
from projections.visits import Visit, VisitFold


@dataclass(frozen=True)
class Answer:
    """A question a visit asked and the answer it got."""

    clarify_id: str
    question: str
    answer: str
    turn: int


class VisitProgress(Visit):
    """One visit as the engine resumes it: the visit index's record, plus its questions and checkpoint."""

    __slots__ = ("answers", "asked", "remote_events", "streamed_since_checkpoint", "tools_since_checkpoint")

    def __init__(self, event: ev.VisitStarted | ev.VisitSkipped, iter_seq: int, position: int) -> None:
        super().__init__(event, iter_seq, position)
        self.answers: list[Answer] = []
        self.asked: ev.ClarifyRequested | None = None
        self.streamed_since_checkpoint = False
        self.tools_since_checkpoint: list[str] = []
        self.remote_events: list[RemoteEvent] = []
        """The facts of the visit's gateway runs (engine.hermes.ports.remote_runs folds them)."""

    @property
    def turns_done(self) -> int:
        """Model turns to skip when the visit resumes: those played up to its last answered question."""
        return self.answers[-1].turn if self.answers else 0

    @property
    def waiting(self) -> bool:
        """True while the visit's question has no answer."""
        return self.asked is not None

    @property
    def interrupted(self) -> bool:
        """True when the visit is open, not waiting, and did something since its last checkpoint."""
        return self.is_open and not self.waiting and self.streamed_since_checkpoint


class ProgressVisits(VisitFold[VisitProgress]):
    """Every visit of the run, uncapped: the engine must know each one it started."""

    visit_type = VisitProgress

    def __init__(self) -> None:
        super().__init__(max_visits=None)


@dataclass
class Progress:
    """A run's visits, planner decisions and inputs, in log order."""

    run_id: Any = None
    workflow_name: str = ""
    workflow_version: int = 0
    variables: dict[str, Any] = field(default_factory=dict)
    uploaded_files: tuple[str, ...] = ()
    started_at: datetime | None = None
    trace_parent: str | None = None
    index: ProgressVisits = field(default_factory=ProgressVisits)
    trail: list[VisitProgress | ev.PlannerDecided] = field(default_factory=list)
    decisions: int = 0

    def apply(self, event: ev.RunEvent) -> None:
        """Fold one event: the visit index first, then what only execution needs."""
        self.index.apply(event)
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    @property
    def visits(self) -> Mapping[str, VisitProgress]:
        """Every visit by its uuid, in the order they began (skipped ones included)."""
        return self.index.by_uuid()

    def visits_of(self, node_id: str) -> list[VisitProgress]:
        """The node's visits in the order they began (skipped ones included)."""
        return self.index.visits_of(node_id)

    def last_of(self, node_id: str) -> VisitProgress | None:
        """The node's most recent visit."""
        visits = self.visits_of(node_id)
        return visits[-1] if visits else None

    def open_visits(self) -> list[VisitProgress]:
        """Visits that have not ended, in the order they began."""
        return [visit for visit in self.visits.values() if visit.is_open]

    def started_visits(self) -> int:
        """Visits that were started (skipped ones are not counted)."""
        return sum(visit.status != VISIT_SKIPPED for visit in self.visits.values())

    def scope(self) -> dict[str, Any]:
        """What templates see: run variables, `uploadedFiles`, and each node's latest successful output data."""
        scope: dict[str, Any] = dict(self.variables)
        scope.setdefault("uploadedFiles", list(self.uploaded_files))
        for visit in self.visits.values():
            if visit.status == VISIT_SUCCESS:
                scope[visit.node_id] = visit.data
        return scope


def _created(progress: Progress, event: ev.RunCreated) -> None:
    progress.run_id = event.originator_id
    progress.workflow_name, progress.workflow_version = event.workflow_name, event.workflow_version
    progress.variables, progress.uploaded_files = dict(event.variables), tuple(event.uploaded_files)
    progress.trace_parent = event.trace_parent


def _started(progress: Progress, event: ev.RunStarted) -> None:
    progress.started_at = event.timestamp


def _visit_started(progress: Progress, event: ev.VisitStarted) -> None:
    visit = progress.index.find(event.visit_uuid)
    if visit is not None:
        progress.trail.append(visit)


def _streamed(progress: Progress, event: ev.NodeStreamed) -> None:
    visit = progress.index.find(event.visit_uuid)
    if visit is None:
        return
    visit.streamed_since_checkpoint = True
    if event.kind == "tool_call" and event.tool_name:
        visit.tools_since_checkpoint.append(event.tool_name)


def _asked(progress: Progress, event: ev.ClarifyRequested) -> None:
    visit = progress.index.find(event.visit_uuid)
    if visit is not None:
        visit.asked = event


def _answered(progress: Progress, event: ev.ClarifyAnswered) -> None:
    for visit in progress.visits.values():
        asked = visit.asked
        if asked is not None and asked.clarify_id == event.clarify_id:
            visit.answers.append(Answer(asked.clarify_id, asked.question, event.answer, asked.turn))
            visit.asked = None
            visit.streamed_since_checkpoint = False
            visit.tools_since_checkpoint = []
            return


def _remote(progress: Progress, event: RemoteEvent) -> None:
    visit = progress.index.find(event.visit_uuid)
    if visit is not None:
        visit.remote_events.append(event)
        visit.streamed_since_checkpoint = True


def _decided(progress: Progress, event: ev.PlannerDecided) -> None:
    progress.decisions += 1
    progress.trail.append(event)


_HANDLERS: dict[type, Any] = {
    ev.RunCreated: _created,
    ev.RunStarted: _started,
    ev.VisitStarted: _visit_started,
    ev.NodeStreamed: _streamed,
    ev.ClarifyRequested: _asked,
    ev.ClarifyAnswered: _answered,
    ev.PlannerDecided: _decided,
    **{kind: _remote for kind in REMOTE_EVENTS},
}


def fold_progress(events: Iterable[ev.RunEvent]) -> Progress:
    """The progress after all of a run's events."""
    progress = Progress()
    for event in events:
        progress.apply(event)
    return progress
