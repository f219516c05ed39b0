"""What one asking visit may read of its run: visits before it, memory first, the store behind."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from domain.errors import FlowtrailError
from engine.context.tokens import ContextTokens, Grant, InvalidToken
from engine.runs.hot import HotRun
from engine.runs.hot_runs import HotRuns
from engine.runs.service import RunNotFound, RunService
from projections.paths import predecessor_paths
from projections.payloads import NodeMeta, NodeOutput, PredecessorPaths
from projections.visits import (
    Visit,
    VisitIndex,
    VisitNotFound,
    meta_view,
    output_view,
    pick_visit,
)

MEMORY, STORE = "memory", "store"


class ContextDisabled(FlowtrailError):
    """Context query is switched off (the API answers 503)."""

    code = "CONTEXT_DISABLED"

    def __init__(self) -> None:
        super().__init__("context query is disabled")


class VisitEnded(InvalidToken):
    """The token's visit has already ended, so its token is no longer good."""


class VisibleIndex:
    """A run's visit index as one asking visit sees it: only the visits that come before it.

    "Before" is the index's own order (sortOrder, then the order visits began). With
    `with_asker` the asking visit itself is visible too (the path query starts from it).
    A later visit and a visit that does not exist are refused alike.
    """

    def __init__(self, index: VisitIndex, asker: Visit, *, with_asker: bool = False) -> None:
        self.index, self.asker, self.with_asker = index, asker, with_asker

    @property
    def run_id(self) -> str | None:
        """The run's id (hex)."""
        return self.index.run_id

    def sees(self, visit: Visit) -> bool:
        """True when the asker may read this visit."""
        return visit.order < self.asker.order or (self.with_asker and visit is self.asker)

    def find(self, visit_uuid: str) -> Visit | None:
        """The visible visit with this uuid, or None."""
        visit = self.index.find(visit_uuid)
        return visit if visit is not None and self.sees(visit) else None

    def get(self, visit_uuid: str) -> Visit:
        """The visible visit with this uuid; VisitNotFound otherwise."""
        visit = self.find(visit_uuid)
        if visit is None:
            raise VisitNotFound(f"visit {visit_uuid} not found", run_id=self.run_id, visit_uuid=visit_uuid)
        return visit

    def visit_at(self, node_id: str, iter_seq: int | None = None) -> Visit:
        """The visible visit of a node with this iterSeq (None: the last visible one); VisitNotFound otherwise."""
        visible = [visit for visit in self.index.visits_of(node_id) if self.sees(visit)]
        return pick_visit(visible, node_id, iter_seq, self.run_id)


@dataclass(frozen=True)
class AskerView:
    """The index a query is answered from, the asking visit, and where the index came from."""

    index: VisitIndex
    asker: Visit
    source: str


class ColdIndexes:
    """Whole visit indexes folded from the log, caught up from it on every read: for runs that
    are not hot, and for runs with more visits than a hot index keeps.

    Each read asks the store for the events after the position already folded, so an answer
    is always what a fresh fold of the whole log would give; only the fold itself is reused.
    These folds have no visit cap (the memory index's `MAX_VISITS_PER_RUN` is what they stand
    behind); the least recently read runs are forgotten beyond `max_runs`.
    """

    def __init__(self, max_runs: int = 32) -> None:
        self.max_runs = max_runs
        self._folds: OrderedDict[UUID, tuple[VisitIndex, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._folds)

    async def read(self, runs: RunService, run_id: UUID) -> VisitIndex:
        """The run's index as the log has it now; RunNotFound for a run with no events."""
        index, version = self._folds.pop(run_id) if run_id in self._folds else (VisitIndex(max_visits=None), 0)
        for event in await runs.events(run_id, after=version):
            index.apply(event)
            version = event.originator_version
        if index.run_id is None:
            raise RunNotFound(run_id.hex)
        self._folds[run_id] = (index, version)
        while len(self._folds) > self.max_runs:
            self._folds.popitem(last=False)
        return index


class ContextReader:
    """Answers context queries of asking visits from their run's visit index: memory first, the log behind."""

    def __init__(self, runs: RunService, hot_runs: HotRuns, tokens: ContextTokens, *, enabled: bool,
                 hot_retention_seconds: float, cold: ColdIndexes | None = None) -> None:
        self.enabled = enabled
        self.runs = runs
        self._hot_runs = hot_runs
        self.tokens = tokens
        self.hot_retention = timedelta(seconds=hot_retention_seconds)
        self.cold = cold if cold is not None else ColdIndexes()

    async def run_index(self, run_id: UUID) -> tuple[VisitIndex, str]:
        """The run's visit index: the hot one while the run is live and for the retention after, else from the log.

        A hot index that reached its visit cap lacks the later visits, so such a run is read from the log too.
        """
        index = self._hot_runs.index_of(run_id, ended_within=self.hot_retention)
        if index is not None:
            return index, MEMORY
        return await self.cold.read(self.runs, run_id), STORE

    async def whole_index(self, hot: HotRun) -> VisitIndex:
        """A hot run's visit index with every visit: its own, or from the log once it reached its cap."""
        index = hot.full_index()
        if index is not None:
            return index
        return await self.cold.read(self.runs, hot.run_id)

    async def index_at(self, hot: HotRun, position: int) -> VisitIndex:
        """Every visit of a hot run as of `position`: its own index, or folded from the log once it reached its cap."""
        own = hot.full_index()
        if own is not None:
            return own
        index = VisitIndex(max_visits=None)
        for event in await self.runs.events(hot.run_id):
            if event.originator_version > position:
                break
            index.apply(event)
        return index

    def authenticate(self, token: str | None) -> Grant:
        """The grant a context token stands for (ContextTokenError when it stands for none)."""
        if not self.enabled:
            raise ContextDisabled()
        return self.tokens.authenticate(token)

    async def asker_view(self, grant: Grant) -> AskerView:
        """The view of the grant's run from its visit; 404 if the visit is unknown, 401 once it has ended."""
        index, source = await self.run_index(grant.run_id)
        asker = index.find(grant.visit_uuid)
        if asker is None:
            raise VisitNotFound("the asking visit is not known", run_id=index.run_id)
        if asker.status != "RUNNING":
            self.tokens.invalidate_visit(grant.run_id, grant.visit_uuid)
            raise VisitEnded("the context token's visit has ended")
        return AskerView(index, asker, source)


def path_body(view: AskerView, visit_uuid: str | None) -> PredecessorPaths:
    """§2.1 for the asker (or an earlier visit): its predecessor chains, back-edges and `truncated`."""
    visible = VisibleIndex(view.index, view.asker, with_asker=True)
    return predecessor_paths(visible, visit_uuid or view.asker.visit_uuid)


def output_body(view: AskerView, node_id: str, field: str | None, iter_seq: int | None) -> NodeOutput:
    """§2.2 for an earlier visit of a node: the envelope, `data` whole or one field."""
    return output_view(VisibleIndex(view.index, view.asker), node_id, field, iter_seq)


def meta_body(view: AskerView, visit_uuid: str | None, node_id: str | None,
              kind: str | None, iter_seq: int | None) -> NodeMeta:
    """§2.3 for an earlier visit: thinking, tool calls, TODO list, or all with the raw logs."""
    return meta_view(VisibleIndex(view.index, view.asker), visit_uuid, node_id, kind, iter_seq)
