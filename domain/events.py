"""The run event catalogue: immutable, past-tense facts, one stream per run.

Tags are stored with every event and must never change. Add fields only with defaults.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args
from uuid import UUID

import msgspec

from domain.vocabulary import ModelCallPurpose, NodeType, RemoteRunOutcome, RunMode, StreamKind

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
    erased: bool = False
    """False when appended; true in the stored copy of an erased run, whose content is gone (`RunErased`)."""
    trace_parent: str | None = None
    """The W3C `traceparent` of the request that created it: the trace every execution of the run continues
    (None: the service was not exporting traces, or recorded before traces)."""
    webhook: str | None = None
    """The URL the caller asked the run's webhooks to be sent to (None: none asked; erased with the content)."""


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


class RunForked(RunEvent, frozen=True, tag="RunForked"):
    """The run is a fork of another: the events after this one, `copied_positions` of them, are the source's, copied.

    It follows the run's RunCreated (RunCreated stays every run's first event). The fork was cut at
    `source_position` of the source: what it copied stood at or before it, and it re-executes from
    `source_visit_uuid` on (None: a re-run of a run that ended with no visit failed goes on from its end).
    """

    source_run_id: UUID
    source_position: int
    source_workflow_version: int
    source_visit_uuid: str | None = None
    source_node_id: str | None = None
    source_chain_head: str = ""
    """The source's hash-chain link at `source_position` (hex, docs/history.md); empty when that event was stored
    before the chain began."""
    copied_positions: tuple[int, ...] = ()
    """The source position of each copied event, in order (they follow this event at positions 3, 4, ...)."""
    rerun: bool = False
    """True when the fork re-runs a failed or cancelled run from where it failed."""
class RemoteRunRequested(RunEvent, frozen=True, tag="RemoteRunRequested"):
    """A visit is submitting one run to a remote agent gateway (recorded before the request is sent).

    Until a RemoteRunAccepted of the same attempt follows, whether the gateway started the run is unknown.
    """

    visit_uuid: str
    node_id: str
    gateway_id: str
    session_id: str
    attempt: int
    """Which gateway run of the visit this is (1, 2, ...)."""


class RemoteRunAccepted(RunEvent, frozen=True, tag="RemoteRunAccepted"):
    """The gateway accepted a visit's run and named it: from now on the run is followed by this id, never submitted again."""

    visit_uuid: str
    node_id: str
    attempt: int
    remote_run_id: str


class RemoteRunStopRequested(RunEvent, frozen=True, tag="RemoteRunStopRequested"):
    """Flowtrail asked the gateway to stop a visit's run (`reason`: cancelled, idle_timeout, ...); it is stopped only
    once a RemoteRunEnded says `cancelled`."""

    visit_uuid: str
    node_id: str
    attempt: int
    remote_run_id: str
    reason: str = ""


class RemoteRunEnded(RunEvent, frozen=True, tag="RemoteRunEnded"):
    """One remote gateway run ended for flowtrail: its outcome, tokens and duration (one record per gateway run).

    `output` is the answer of a completed run, so a visit resumed after a crash uses it instead of asking again;
    `reason` says why flowtrail ended or gave up on the run (a failure code), `error` what the gateway said.
    """

    visit_uuid: str
    node_id: str
    gateway_id: str
    session_id: str
    attempt: int
    outcome: RemoteRunOutcome
    remote_run_id: str = ""
    """Empty when the gateway never answered the submission."""
    duration_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reason: str = ""
    error: str = ""
    output: str = ""


class RunErased(RunEvent, frozen=True, tag="RunErased"):
    """The content of an ended run was erased; its skeleton and hash chain stay (docs/history.md)."""

    erased_by: str
    """Who erased it: the key id of the caller, or `retention` (FLOWTRAIL_RETENTION_DAYS)."""
    events_erased: int = 0
    """How many of the events before this one had content that was removed."""


class WebhookAttempted(RunEvent, frozen=True, tag="WebhookAttempted"):
    """One attempt to deliver a webhook of the run ended: answered (with its status), or failed (why).

    An audit record appended after the event that triggered the delivery, also to an ended run; it changes
    nothing of the run's status (decision 41).
    """

    webhook_id: str
    """The `webhook-id` every attempt of this delivery carries."""
    url: str
    """Where it was sent, without credentials, query or fragment."""
    trigger: str
    """What happened: `run.completed`, `run.failed`, `run.cancelled` or `run.waiting`."""
    trigger_position: int
    """The position of the event that triggered the delivery."""
    attempt: int
    status_code: int | None = None
    """The receiver's HTTP status (None: no answer)."""
    error: str = ""
    """Why the attempt failed when it got no answer: timeout, refused, connect, address (empty otherwise)."""
    duration_ms: float = 0.0
    delivered: bool = False
    """True when the receiver answered 2xx: the delivery is done."""


class WebhookAbandoned(RunEvent, frozen=True, tag="WebhookAbandoned"):
    """A webhook delivery was given up: its time bound passed, or the receiver refused it for good."""

    webhook_id: str
    url: str
    trigger: str
    trigger_position: int
    attempts: int
    reason: str


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
    | RunForked
    | RemoteRunRequested
    | RemoteRunAccepted
    | RemoteRunStopRequested
    | RemoteRunEnded
    | RunErased
    | WebhookAttempted
    | WebhookAbandoned
)

RUN_EVENT_TYPES: tuple[type[RunEvent], ...] = get_args(AnyRunEvent)


def event_tag(event: RunEvent) -> str:
    """The stable stored tag of an event."""
    return str(type(event).__struct_config__.tag)
