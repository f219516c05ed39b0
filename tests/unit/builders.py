"""Build one run's events in order, positions and timestamps counted for you."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import msgspec

from domain import events as ev
from projections.wire import encode

RUN_ID = UUID("a3f9b2c1a3f9b2c1a3f9b2c1a3f9b2c1")
T0 = datetime(2026, 7, 1, 8, 30, 0, tzinfo=UTC)

P = TypeVar("P")


def wire(value: Any) -> Any:
    """A body as a client reads it: encoded as JSON and decoded again."""
    return msgspec.json.decode(encode(value))


def fold(projection: P, events: Iterable[ev.RunEvent]) -> P:
    """Apply every event to a projection and return it."""
    for event in events:
        projection.apply(event)  # type: ignore[attr-defined]
    return projection


class RunLog:
    """A run's event log under construction; each method appends one event (event n at second n)."""

    def __init__(self, run_id: UUID = RUN_ID, start: datetime = T0, step: timedelta = timedelta(seconds=1)) -> None:
        self.run_id = run_id
        self.start = start
        self.step = step
        self.events: list[ev.RunEvent] = []
        self._node_of: dict[str, str] = {}
        self._visits_of: dict[str, int] = {}

    def _add(self, cls: type[ev.RunEvent], **fields: Any) -> ev.RunEvent:
        n = len(self.events) + 1
        event = cls(originator_id=self.run_id, originator_version=n, timestamp=self.start + self.step * n, **fields)
        self.events.append(event)
        return event

    def created(self, **fields: Any) -> RunLog:
        """RunCreated with demo defaults."""
        defaults = dict(workflow_id=12, workflow_name="military-analyze-agent", workflow_version=1,
                        display_name="军事分析助手", mode="AGENTIC")
        self._add(ev.RunCreated, **{**defaults, **fields})
        return self

    def forked(self, source: UUID, position: int, visit_uuid: str | None = None, node_id: str | None = None,
               copied: tuple[int, ...] = ()) -> RunLog:
        """RunForked (a fork's second event)."""
        self._add(ev.RunForked, source_run_id=source, source_position=position, source_workflow_version=1,
                  source_visit_uuid=visit_uuid, source_node_id=node_id, copied_positions=copied)
        return self

    def started(self) -> RunLog:
        """RunStarted."""
        self._add(ev.RunStarted)
        return self

    def visit(self, node_id: str, uuid: str | None = None, *, node_type: str = "agent", label: str | None = None,
              iter_seq: int | None = None, sort_order: int | None = None, after: str | None = None,
              predecessors: tuple[str, ...] = ()) -> str:
        """VisitStarted; `after` is the visit it came from. Returns the visit uuid."""
        uuid = uuid or f"v{len(self._node_of) + 1}"
        seen = self._visits_of.get(node_id, 0) + 1
        self._visits_of[node_id] = seen
        self._add(
            ev.VisitStarted, visit_uuid=uuid, node_id=node_id, node_type=node_type, node_label=label or node_id,
            iter_seq=iter_seq or seen, sort_order=sort_order if sort_order is not None else len(self._node_of) + 1,
            from_node_id=self._node_of.get(after) if after else None, from_visit_uuid=after,
            predecessor_visit_uuids=tuple(predecessors),
        )
        self._node_of[uuid] = node_id
        return uuid

    def stream(self, uuid: str, kind: str, content: str, tool_name: str | None = None) -> RunLog:
        """NodeStreamed."""
        self._add(ev.NodeStreamed, visit_uuid=uuid, node_id=self._node_of[uuid], kind=kind,
                  content=content, tool_name=tool_name)
        return self

    def complete(self, uuid: str, data: Any = None, message: str = "调用成功") -> RunLog:
        """VisitCompleted with a 200 envelope."""
        self._add(ev.VisitCompleted, visit_uuid=uuid, node_id=self._node_of[uuid],
                  output={"status": 200, "message": message, "data": data})
        return self

    def fail(self, uuid: str, error: str, output: dict[str, Any] | None = None) -> RunLog:
        """VisitFailed."""
        self._add(ev.VisitFailed, visit_uuid=uuid, node_id=self._node_of[uuid], error=error, output=output)
        return self

    def skip(self, node_id: str, uuid: str | None = None, reason: str = "", iter_seq: int | None = None) -> str:
        """VisitSkipped (`iter_seq` None: as stored before skips recorded it). Returns the visit uuid."""
        uuid = uuid or f"v{len(self._node_of) + 1}"
        self._visits_of[node_id] = self._visits_of.get(node_id, 0) + 1
        recorded = {} if iter_seq is None else {"iter_seq": iter_seq}
        self._add(ev.VisitSkipped, visit_uuid=uuid, node_id=node_id, node_type="llm", node_label=node_id,
                  sort_order=len(self._node_of) + 1, reason=reason, **recorded)
        self._node_of[uuid] = node_id
        return uuid

    def record(self, uuid: str) -> RunLog:
        """VisitRecorded."""
        self._add(ev.VisitRecorded, visit_uuid=uuid, node_id=self._node_of[uuid])
        return self

    def decide(self, next_node_id: str | None, reason: str, from_node_id: str | None = None) -> RunLog:
        """PlannerDecided."""
        self._add(ev.PlannerDecided, next_node_id=next_node_id, reason=reason, from_node_id=from_node_id)
        return self

    def ask(self, uuid: str, clarify_id: str, question: str, choices: tuple[str, ...] = ()) -> RunLog:
        """ClarifyRequested."""
        self._add(ev.ClarifyRequested, clarify_id=clarify_id, visit_uuid=uuid, node_id=self._node_of[uuid],
                  question=question, choices=choices)
        return self

    def answer(self, clarify_id: str, answer: str) -> RunLog:
        """ClarifyAnswered."""
        self._add(ev.ClarifyAnswered, clarify_id=clarify_id, answer=answer)
        return self

    def request_cancel(self, reason: str = "") -> RunLog:
        """RunCancelRequested."""
        self._add(ev.RunCancelRequested, reason=reason)
        return self

    def cancel(self, reason: str = "") -> RunLog:
        """RunCancelled."""
        self._add(ev.RunCancelled, reason=reason)
        return self

    def finish(self, data: Any = None, files: tuple[str, ...] = ()) -> RunLog:
        """RunCompleted with a 200 envelope."""
        self._add(ev.RunCompleted, output={"status": 200, "message": "工作流执行成功", "data": data},
                  working_dir_files=files)
        return self

    def fail_run(self, error: str) -> RunLog:
        """RunFailed."""
        self._add(ev.RunFailed, error=error)
        return self

    def erase(self, erased_by: str = "demo", events_erased: int = 0) -> RunLog:
        """RunErased."""
        self._add(ev.RunErased, erased_by=erased_by, events_erased=events_erased)
        return self

    def model_called(self, uuid: str = "", *, purpose: str = "node", attempt: int = 1, prompt_tokens: int = 0,
                     completion_tokens: int = 0, error_code: str | None = None) -> RunLog:
        """ModelCalled for a visit (the planner's when `uuid` is empty)."""
        self._add(ev.ModelCalled, visit_uuid=uuid, node_id=self._node_of.get(uuid, ""), model_id="gpt",
                  purpose=purpose, attempt=attempt, latency_ms=12.5, prompt_tokens=prompt_tokens,
                  completion_tokens=completion_tokens, finish_reason="" if error_code else "stop",
                  prompt_sha256="ab" * 32, error_code=error_code)
        return self

    def remote_run(self, uuid: str, *, attempt: int = 1, remote_run_id: str | None = "run_1", outcome: str | None = None,
                   stop: str | None = None, prompt_tokens: int = 0, completion_tokens: int = 0, output: str = "") -> RunLog:
        """A visit's gateway run: RemoteRunRequested, RemoteRunAccepted (unless no id), a stop request and its end."""
        node_id = self._node_of[uuid]
        self._add(ev.RemoteRunRequested, visit_uuid=uuid, node_id=node_id, gateway_id="uni",
                  session_id="flowtrail-s", attempt=attempt)
        if remote_run_id is not None:
            self._add(ev.RemoteRunAccepted, visit_uuid=uuid, node_id=node_id, attempt=attempt, remote_run_id=remote_run_id)
        if stop is not None and remote_run_id is not None:
            self._add(ev.RemoteRunStopRequested, visit_uuid=uuid, node_id=node_id, attempt=attempt,
                      remote_run_id=remote_run_id, reason=stop)
        if outcome is not None:
            self._add(ev.RemoteRunEnded, visit_uuid=uuid, node_id=node_id, gateway_id="uni", session_id="flowtrail-s",
                      attempt=attempt, outcome=outcome, remote_run_id=remote_run_id or "", duration_ms=1500.0,
                      prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, output=output,
                      reason=stop or "")
        return self
