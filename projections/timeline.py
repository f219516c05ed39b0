"""A run's timeline: when each visit started and ended, how long it waited for answers, the tokens it used by model.

A pure fold of the run's events (`RunTimeline.apply`), read by `GET /runs/{runId}/timeline` and the viewer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from domain import events as ev
from domain.vocabulary import VISIT_FAILED, VISIT_RUNNING, VISIT_SKIPPED, VISIT_SUCCESS
from projections.visits import skipped_iter_seq


@dataclass
class Wait:
    """One question a visit asked: when, and when it was answered (None: not yet)."""

    asked_at: datetime
    answered_at: datetime | None = None


def add_tokens(tokens: dict[str, list[int]], model: str, prompt: int, completion: int) -> None:
    """Count one model call's (or gateway run's) tokens under its model (or gateway) id."""
    counts = tokens.setdefault(model, [0, 0])
    counts[0] += prompt
    counts[1] += completion


@dataclass
class VisitTime:
    """One visit's place in time and its tokens, `{model or gateway id: [prompt, completion]}`."""

    visit_uuid: str
    node_id: str
    node_label: str
    iter_seq: int
    sort_order: int
    position: int
    status: str = VISIT_RUNNING
    started_at: datetime | None = None
    ended_at: datetime | None = None
    waits: list[Wait] = field(default_factory=list)
    tokens: dict[str, list[int]] = field(default_factory=dict)


class RunTimeline:
    """The fold: the run's own times, its tokens by model (the planner's calls too) and one `VisitTime` a visit."""

    def __init__(self) -> None:
        self.created_at: datetime | None = None
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.visits: dict[str, VisitTime] = {}
        self.tokens: dict[str, list[int]] = {}
        self._asked: dict[str, Wait] = {}

    def apply(self, event: ev.RunEvent) -> None:
        """Fold one event in (events of other types change nothing)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def in_order(self) -> list[VisitTime]:
        """The visits by sortOrder, ties in the order they began (the viewer's card order)."""
        return sorted(self.visits.values(), key=lambda visit: (visit.sort_order, visit.position))

    def _open(self, event: ev.VisitStarted | ev.VisitSkipped, iter_seq: int) -> VisitTime:
        visit = self.visits.get(event.visit_uuid)
        if visit is None:
            visit = VisitTime(event.visit_uuid, event.node_id, event.node_label, iter_seq, event.sort_order,
                              len(self.visits))
            self.visits[event.visit_uuid] = visit
        return visit

    def _created(self, event: ev.RunCreated) -> None:
        self.created_at = event.timestamp

    def _started(self, event: ev.RunStarted) -> None:
        self.started_at = self.started_at or event.timestamp

    def _ended(self, event: ev.RunCompleted | ev.RunFailed | ev.RunCancelled) -> None:
        self.ended_at = event.timestamp

    def _visit_started(self, event: ev.VisitStarted) -> None:
        self._open(event, event.iter_seq).started_at = event.timestamp

    def _visit_skipped(self, event: ev.VisitSkipped) -> None:
        of_node = sum(1 for visit in self.visits.values() if visit.node_id == event.node_id)
        visit = self._open(event, skipped_iter_seq(event, of_node))
        visit.status, visit.started_at, visit.ended_at = VISIT_SKIPPED, event.timestamp, event.timestamp

    def _visit_ended(self, event: ev.VisitCompleted | ev.VisitFailed) -> None:
        visit = self.visits.get(event.visit_uuid)
        if visit is not None:
            visit.status = VISIT_SUCCESS if isinstance(event, ev.VisitCompleted) else VISIT_FAILED
            visit.ended_at = event.timestamp

    def _asked_for(self, event: ev.ClarifyRequested) -> None:
        visit = self.visits.get(event.visit_uuid)
        if visit is not None and event.clarify_id not in self._asked:
            wait = Wait(event.timestamp)
            visit.waits.append(wait)
            self._asked[event.clarify_id] = wait

    def _answered(self, event: ev.ClarifyAnswered) -> None:
        wait = self._asked.get(event.clarify_id)
        if wait is not None and wait.answered_at is None:
            wait.answered_at = event.timestamp

    def _used(self, visit_uuid: str, model: str, prompt: int, completion: int) -> None:
        add_tokens(self.tokens, model, prompt, completion)
        visit = self.visits.get(visit_uuid)
        if visit is not None:
            add_tokens(visit.tokens, model, prompt, completion)

    def _model_called(self, event: ev.ModelCalled) -> None:
        self._used(event.visit_uuid, event.model_id, event.prompt_tokens, event.completion_tokens)

    def _remote_run_ended(self, event: ev.RemoteRunEnded) -> None:
        self._used(event.visit_uuid, event.gateway_id, event.prompt_tokens, event.completion_tokens)


_HANDLERS: dict[type, Callable[[RunTimeline, Any], None]] = {
    ev.RunCreated: RunTimeline._created,
    ev.RunStarted: RunTimeline._started,
    ev.RunCompleted: RunTimeline._ended,
    ev.RunFailed: RunTimeline._ended,
    ev.RunCancelled: RunTimeline._ended,
    ev.VisitStarted: RunTimeline._visit_started,
    ev.VisitSkipped: RunTimeline._visit_skipped,
    ev.VisitCompleted: RunTimeline._visit_ended,
    ev.VisitFailed: RunTimeline._visit_ended,
    ev.ClarifyRequested: RunTimeline._asked_for,
    ev.ClarifyAnswered: RunTimeline._answered,
    ev.ModelCalled: RunTimeline._model_called,
    ev.RemoteRunEnded: RunTimeline._remote_run_ended,
}
