"""The visit index: one run's visits with their outputs and logs, folded from its events."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from domain import events as ev
from domain.errors import FlowtrailError
from domain.failures import FailureCode, failure_code
from domain.vocabulary import VISIT_FAILED, VISIT_RUNNING, VISIT_SKIPPED, VISIT_SUCCESS, NodeType, VisitStatus
from projections.logs import VisitLog
from projections.payloads import LogEntry, NodeMeta, NodeOutput, VisitSnapshot
from projections.wire import iso_utc, to_json

MAX_VISITS_PER_RUN = 200


class VisitNotFound(FlowtrailError):
    """No visit matches the query (the API answers 404)."""

    code = "NODE_NOT_FOUND"


class Visit:
    """One visit of a node; changed only by the fold that owns it."""

    __slots__ = (
        "visit_uuid", "run_id", "node_id", "node_type", "node_label", "iter_seq", "sort_order",
        "from_node_id", "from_visit_uuid", "predecessor_visit_uuids", "status", "output",
        "error", "error_code", "skip_reason", "started_at", "completed_at", "log", "position",
    )

    def __init__(self, event: ev.VisitStarted | ev.VisitSkipped, iter_seq: int, position: int) -> None:
        self.visit_uuid, self.node_id, self.iter_seq = event.visit_uuid, event.node_id, iter_seq
        self.run_id = event.originator_id.hex
        self.node_type: NodeType = event.node_type
        self.node_label = event.node_label
        self.sort_order, self.position = event.sort_order, position
        self.from_node_id: str | None = None
        self.from_visit_uuid: str | None = None
        self.predecessor_visit_uuids: tuple[str, ...] = ()
        self.status: VisitStatus = VISIT_RUNNING
        self.output: dict[str, Any] | None = None
        self.error: str | None = None
        self.error_code: FailureCode | None = None
        self.skip_reason: str | None = None
        self.started_at: datetime | None = None
        self.completed_at: datetime | None = None
        self.log = VisitLog()

    @property
    def is_open(self) -> bool:
        """True while the visit has neither completed nor failed (nor was skipped)."""
        return self.status == VISIT_RUNNING

    @property
    def data(self) -> Any:
        """The `data` of the visit's output envelope (None when it has none)."""
        return (self.output or {}).get("data")

    @property
    def predecessors(self) -> tuple[str, ...]:
        """Visits this one came from (falls back to `from_visit_uuid`)."""
        if self.predecessor_visit_uuids:
            return self.predecessor_visit_uuids
        return (self.from_visit_uuid,) if self.from_visit_uuid else ()

    @property
    def order(self) -> tuple[int, int]:
        """Sort key: sortOrder, then the order visits began."""
        return (self.sort_order, self.position)

    @property
    def logs(self) -> list[LogEntry]:
        """The rendered log entries."""
        return self.log.entries()

    @property
    def logs_count(self) -> int:
        """How many log entries the visit has."""
        return len(self.log)


V = TypeVar("V", bound=Visit)


def skipped_iter_seq(event: ev.VisitSkipped, visits_of_node: int) -> int:
    """A skipped visit's iterSeq: the event's, else (logs before it was recorded) the node's next."""
    return event.iter_seq or visits_of_node + 1


class VisitFold(Generic[V]):
    """One run's visits, each a `visit_type`, folded from its events: the one per-visit fold.

    `apply(event)` is the only way it changes. The read side's index holds plain `Visit`s;
    the engine's progress holds a subclass that adds what execution needs.
    """

    visit_type: type[V]

    def __init__(self, max_visits: int | None = MAX_VISITS_PER_RUN) -> None:
        self.max_visits = max_visits
        self.overflowed = False
        self.run_id: str | None = None
        self._by_uuid: dict[str, V] = {}
        self._by_node: dict[str, list[V]] = {}
        self._arrival: list[V] = []

    def apply(self, event: ev.RunEvent) -> None:
        """Fold one run event into the index."""
        if self.run_id is None:
            self.run_id = event.originator_id.hex
        handler = _INDEX_HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _open(self, event: ev.VisitStarted | ev.VisitSkipped, iter_seq: int) -> V | None:
        if event.visit_uuid in self._by_uuid:
            return None
        if self.max_visits is not None and len(self._arrival) >= self.max_visits:
            self.overflowed = True
            return None
        visit = self.visit_type(event, iter_seq, len(self._arrival))
        self._by_uuid[visit.visit_uuid] = visit
        self._by_node.setdefault(visit.node_id, []).append(visit)
        self._arrival.append(visit)
        return visit

    def _started(self, event: ev.VisitStarted) -> None:
        visit = self._open(event, event.iter_seq)
        if visit is not None:
            visit.from_node_id = event.from_node_id
            visit.from_visit_uuid = event.from_visit_uuid
            visit.predecessor_visit_uuids = tuple(event.predecessor_visit_uuids)
            visit.started_at = event.timestamp

    def _skipped(self, event: ev.VisitSkipped) -> None:
        visit = self._open(event, skipped_iter_seq(event, len(self._by_node.get(event.node_id, ()))))
        if visit is not None:
            visit.status = VISIT_SKIPPED
            visit.skip_reason = event.reason or None
            visit.completed_at = event.timestamp

    def _streamed(self, event: ev.NodeStreamed) -> None:
        visit = self._by_uuid.get(event.visit_uuid)
        if visit is not None:
            visit.log.add_stream(event.kind, event.content, event.tool_name, event.timestamp)

    def _clarify(self, event: ev.ClarifyRequested) -> None:
        visit = self._by_uuid.get(event.visit_uuid)
        if visit is not None:
            visit.log.add_clarify(event.clarify_id, event.question, event.choices, event.timestamp)

    def _completed(self, event: ev.VisitCompleted) -> None:
        visit = self._by_uuid.get(event.visit_uuid)
        if visit is not None:
            visit.status, visit.output, visit.completed_at = VISIT_SUCCESS, event.output, event.timestamp

    def _failed(self, event: ev.VisitFailed) -> None:
        visit = self._by_uuid.get(event.visit_uuid)
        if visit is not None:
            visit.status, visit.output, visit.error = VISIT_FAILED, event.output, event.error
            visit.error_code = failure_code(event.error, event.error_code)
            visit.completed_at = event.timestamp
            visit.log.add_error(event.error, event.timestamp)

    def forget(self, visit_uuid: str) -> None:
        """Drop one visit (a fold that holds only the visits still being recorded lets go of them)."""
        visit = self._by_uuid.pop(visit_uuid, None)
        if visit is not None:
            self._by_node[visit.node_id].remove(visit)
            self._arrival.remove(visit)

    def __len__(self) -> int:
        return len(self._arrival)

    def find(self, visit_uuid: str) -> V | None:
        """The visit with this uuid, or None."""
        return self._by_uuid.get(visit_uuid)

    def get(self, visit_uuid: str) -> V:
        """The visit with this uuid; VisitNotFound if there is none."""
        visit = self._by_uuid.get(visit_uuid)
        if visit is None:
            raise VisitNotFound(f"visit {visit_uuid} not found", run_id=self.run_id, visit_uuid=visit_uuid)
        return visit

    def by_uuid(self) -> Mapping[str, V]:
        """Every visit by its uuid, in the order they began."""
        return self._by_uuid

    def visits_of(self, node_id: str) -> list[V]:
        """The visits of one node, in the order they began."""
        return list(self._by_node.get(node_id, ()))

    def visit_at(self, node_id: str, iter_seq: int | None = None) -> Visit:
        """The visit of a node with this iterSeq (None: the last one); VisitNotFound if none."""
        return pick_visit(self._by_node.get(node_id, ()), node_id, iter_seq, self.run_id)

    def in_order(self) -> list[V]:
        """All visits by sortOrder (ties in the order they began)."""
        return sorted(self._arrival, key=lambda visit: visit.order)

    def node_ids(self) -> list[str]:
        """The visited nodes, ordered by their first visit's sortOrder."""
        firsts = sorted((visits[0] for visits in self._by_node.values()), key=lambda visit: visit.order)
        return [visit.node_id for visit in firsts]


class VisitIndex(VisitFold[Visit]):
    """The read side's visit index: visits in sortOrder with iterSeq, fromNode, output and logs."""

    visit_type = Visit


# Plain functions, not bound methods: no reference cycle, so a dropped projection is freed at once.
_INDEX_HANDLERS: dict[type, Callable[[Any, Any], None]] = {
    ev.VisitStarted: VisitFold._started,
    ev.VisitSkipped: VisitFold._skipped,
    ev.NodeStreamed: VisitFold._streamed,
    ev.VisitCompleted: VisitFold._completed,
    ev.VisitFailed: VisitFold._failed,
    ev.ClarifyRequested: VisitFold._clarify,
}


class Visits(Protocol):
    """What the views read of a visit index (engine.context's view of one asking visit reads alike)."""

    @property
    def run_id(self) -> str | None:
        """The run's id (hex)."""

    def get(self, visit_uuid: str) -> Visit:
        """The visit with this uuid; VisitNotFound if there is none."""

    def find(self, visit_uuid: str) -> Visit | None:
        """The visit with this uuid, or None."""

    def visit_at(self, node_id: str, iter_seq: int | None = None) -> Visit:
        """The visit of a node with this iterSeq (None: the last one); VisitNotFound if none."""


def pick_visit(visits: Sequence[Visit], node_id: str, iter_seq: int | None, run_id: str | None) -> Visit:
    """Among a node's visits (in order), the one with this iterSeq (None: the last); VisitNotFound if none."""
    if visits and iter_seq is None:
        return visits[-1]
    for visit in visits:
        if visit.iter_seq == iter_seq:
            return visit
    raise VisitNotFound(
        f"node {node_id} has no visit" + ("" if iter_seq is None else f" with iterSeq {iter_seq}"),
        run_id=run_id, node_id=node_id, iter_seq=iter_seq,
    )


def visit_snapshot(visit: Visit) -> VisitSnapshot:
    """The visit as a whole (SSE `visit_recorded` and `snapshot`), logs as `logsJson`."""
    logs = visit.logs
    return VisitSnapshot(
        visit_uuid=visit.visit_uuid,
        run_id=visit.run_id,
        node_id=visit.node_id,
        node_type=visit.node_type,
        node_label=visit.node_label,
        iter_seq=visit.iter_seq,
        sort_order=visit.sort_order,
        from_node_id=visit.from_node_id,
        from_visit_uuid=visit.from_visit_uuid,
        predecessor_visit_uuids=visit.predecessor_visit_uuids,
        status=visit.status,
        output=visit.output,
        error=visit.error,
        skip_reason=visit.skip_reason,
        started_at=iso_utc(visit.started_at),
        completed_at=iso_utc(visit.completed_at),
        logs_json=to_json(logs),
        logs_count=len(logs),
    )


def output_view(index: Visits, node_id: str, field: str | None = None, iter_seq: int | None = None) -> NodeOutput:
    """§2.2: a node visit's envelope, `data` whole or one field of it."""
    visit = index.visit_at(node_id, iter_seq)
    envelope = visit.output or {}
    data = envelope.get("data")
    if field is not None:
        data = data.get(field) if isinstance(data, dict) else None
    return NodeOutput(
        node_id=visit.node_id,
        iter_seq=visit.iter_seq,
        visit_uuid=visit.visit_uuid,
        status=envelope.get("status"),
        message=envelope.get("message"),
        data=data,
        requested_field=field,
    )


META_KINDS = ("THINKING", "TOOL_CALLS", "TODO", "ALL")
DEFAULT_META_KIND = "ALL"


class UnknownMetaKind(FlowtrailError):
    """The meta query named a kind other than THINKING, TOOL_CALLS, TODO or ALL."""


def meta_view(index: Visits, visit_uuid: str | None, node_id: str | None,
              kind: str | None = None, iter_seq: int | None = None) -> NodeMeta:
    """§2.3: a visit's thinking, tool calls, TODO list, or all of them with the raw logs."""
    kind = (kind or DEFAULT_META_KIND).upper()
    if kind not in META_KINDS:
        raise UnknownMetaKind(f"unknown meta kind {kind!r}; expected one of {', '.join(META_KINDS)}")
    if visit_uuid:
        visit = index.get(visit_uuid)
    elif node_id:
        visit = index.visit_at(node_id, iter_seq)
    else:
        raise VisitNotFound("a meta query needs a visitUuid or a nodeId", run_id=index.run_id)
    body = NodeMeta(node_id=visit.node_id, iter_seq=visit.iter_seq, visit_uuid=visit.visit_uuid)
    if kind in ("THINKING", "ALL"):
        body.thinking = visit.log.thinking()
    if kind in ("TOOL_CALLS", "ALL"):
        body.tool_calls = visit.log.tool_calls()
    if kind in ("TODO", "ALL"):
        body.todo_list = visit.log.todo_list()
    if kind == "ALL":
        body.logs = visit.logs
    return body


def node_logs(index: VisitIndex, node_id: str) -> list[LogEntry]:
    """All log entries of a node's visits, visit after visit; VisitNotFound if never visited."""
    visits = index.visits_of(node_id)
    if not visits:
        raise VisitNotFound(f"node {node_id} has no visit", run_id=index.run_id, node_id=node_id)
    return [entry for visit in visits for entry in visit.logs]
