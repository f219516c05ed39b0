"""The run event catalogue: immutable, past-tense facts, one stream per run.

Tags are stored with every event and must never change. Add fields only with defaults.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args
from uuid import UUID

import msgspec

from domain.vocabulary import ModelCallPurpose, NodeType, RunMode, StreamKind

JSON = dict[str, Any]


class RunEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every run event: which run, its position in the run, when."""

    originator_id: UUID
    originator_version: int
    timestamp: datetime


class RunCreated(RunEvent, frozen=True, tag="RunCreated"):
    """A caller created a run of one version of a workflow."""

    workflow_id: int
    workflow_name: str
    workflow_version: int
    display_name: str
    mode: RunMode
    variables: JSON = {}
    uploaded_files: tuple[str, ...] = ()
    ttl_hours: int = 720
    caller_key_id: str = ""
    idempotency_key: str | None = None
    request_id: str | None = None
    """The `X-Request-Id` of the API request that caused it (None: recorded before ids, or not from a request)."""
    trace_parent: str | None = None
    """The W3C `traceparent` of the request that created it: the trace every execution of the run continues
    (None: the service was not exporting traces, or recorded before traces)."""


class RunStarted(RunEvent, frozen=True, tag="RunStarted"):
    """The run was started and the engine took it on."""

    request_id: str | None = None
    """The `X-Request-Id` of the API request that caused it (None: recorded before ids, or not from a request)."""


class VisitStarted(RunEvent, frozen=True, tag="VisitStarted"):
    """The engine began one visit of a node."""

    visit_uuid: str
    node_id: str
    node_type: NodeType
    node_label: str
    iter_seq: int
    sort_order: int
    from_node_id: str | None = None
    from_visit_uuid: str | None = None
    predecessor_visit_uuids: tuple[str, ...] = ()


class NodeStreamed(RunEvent, frozen=True, tag="NodeStreamed"):
    """A visit produced a piece of its stream (thinking, tool call, TODO list...)."""

    visit_uuid: str
    node_id: str
    kind: StreamKind
    content: str
    tool_name: str | None = None


class VisitCompleted(RunEvent, frozen=True, tag="VisitCompleted"):
    """A visit finished with an output envelope."""

    visit_uuid: str
    node_id: str
    output: JSON


class VisitFailed(RunEvent, frozen=True, tag="VisitFailed"):
    """A visit failed with an error."""

    visit_uuid: str
    node_id: str
    error: str
    output: JSON | None = None
    error_code: str | None = None
    """The failure's code (`domain.failures`); None in failures stored before codes were recorded."""


class VisitSkipped(RunEvent, frozen=True, tag="VisitSkipped"):
    """A node was not run because a branch condition excluded it."""

    visit_uuid: str
    node_id: str
    node_type: NodeType
    node_label: str
    sort_order: int
    reason: str = ""
    iter_seq: int = 0
    """Which visit of the node this is (1, 2, ...); 0 in skips stored before it was recorded."""


class VisitRecorded(RunEvent, frozen=True, tag="VisitRecorded"):
    """A finished visit was recorded as a whole (the snapshot is a projection)."""

    visit_uuid: str
    node_id: str


class PlannerDecided(RunEvent, frozen=True, tag="PlannerDecided"):
    """The planner chose the next node (None: finish the run) and said why."""

    next_node_id: str | None
    reason: str
    from_node_id: str | None = None


class ClarifyRequested(RunEvent, frozen=True, tag="ClarifyRequested"):
    """A visit paused the run with a question for the user."""

    clarify_id: str
    visit_uuid: str
    node_id: str
    question: str
    choices: tuple[str, ...] = ()
    turn: int = 0
    """How many model turns the visit had played when it asked (it resumes after them)."""


class ClarifyAnswered(RunEvent, frozen=True, tag="ClarifyAnswered"):
    """The user answered a pending question; the run may go on."""

    clarify_id: str
    answer: str
    request_id: str | None = None
    """The `X-Request-Id` of the API request that caused it (None: recorded before ids, or not from a request)."""


class RunCancelRequested(RunEvent, frozen=True, tag="RunCancelRequested"):
    """A caller asked for the run to be cancelled."""

    reason: str = ""
    request_id: str | None = None
    """The `X-Request-Id` of the API request that caused it (None: recorded before ids, or not from a request)."""


class RunCancelled(RunEvent, frozen=True, tag="RunCancelled"):
    """The engine stopped the run after a cancel request."""

    reason: str = ""


class RunCompleted(RunEvent, frozen=True, tag="RunCompleted"):
    """The run finished successfully with an output envelope."""

    output: JSON
    working_dir_files: tuple[str, ...] = ()


class RunFailed(RunEvent, frozen=True, tag="RunFailed"):
    """The run finished with an error."""

    error: str
    error_code: str | None = None
    """The failure's code (`domain.failures`); None in failures stored before codes were recorded."""


class ModelCalled(RunEvent, frozen=True, tag="ModelCalled"):
    """One call to a language model ended (answered, or failed after this attempt)."""

    visit_uuid: str
    node_id: str
    model_id: str
    purpose: ModelCallPurpose
    attempt: int
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    prompt_sha256: str = ""
    error_code: str | None = None


AnyRunEvent = (
    RunCreated
    | RunStarted
    | VisitStarted
    | NodeStreamed
    | VisitCompleted
    | VisitFailed
    | VisitSkipped
    | VisitRecorded
    | PlannerDecided
    | ClarifyRequested
    | ClarifyAnswered
    | RunCancelRequested
    | RunCancelled
    | RunCompleted
    | RunFailed
    | ModelCalled
)

RUN_EVENT_TYPES: tuple[type[RunEvent], ...] = get_args(AnyRunEvent)


def event_tag(event: RunEvent) -> str:
    """The stable stored tag of an event."""
    return str(type(event).__struct_config__.tag)
