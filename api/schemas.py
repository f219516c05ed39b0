"""The wire shapes of API v1: camelCase request and response Structs (their OpenAPI helpers: api.openapi).

These are the published contract; domain events never leave the service as they are. The
shapes projections build (node list, log entries, the current pause, SSE payloads) are defined
in `projections.payloads` and used here as they are.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar.params import PathParameter
from msgspec import UNSET, UnsetType

from domain.failures import FailureCode
from projections.payloads import (
    Camel,
    ForkedFrom,
    NodeView,
    PauseView,
    RunListItem,
    RunStatusName,
)
from projections.payloads import LogEntry as LogEntry  # the node logs answer
from projections.webhooks import WebhookView

MAX_TTL_HOURS = 87_600
"""Ten years: the longest workspace retention a run may ask for."""


WORKFLOW_NAME_DESCRIPTION = "the workflow's name, else its numeric id (ASCII digits, leading zeros allowed)"
RUN_ID_DESCRIPTION = "the run's id, 32 hex characters"
WorkflowNameInPath = Annotated[str, PathParameter(name="workflowName", description=WORKFLOW_NAME_DESCRIPTION)]
RunIdInPath = Annotated[str, PathParameter(name="runId", description=RUN_ID_DESCRIPTION)]
NodeIdInPath = Annotated[str, PathParameter(name="nodeId", description="a node id of the run's workflow")]
"""Path parameters under the seed's names (`{workflowName}`, `{runId}`, `{nodeId}`)."""

CancelOutcome = Literal["REQUESTED", "ALREADY_REQUESTED", "ALREADY_FINISHED"]
EraseOutcome = Literal["ERASED", "ALREADY_ERASED"]


# --- requests -------------------------------------------------------------------------


class CreateRunRequest(Camel, forbid_unknown_fields=True):
    """The JSON body of run creation (or the `payload` part of a multipart request)."""

    variables: dict[str, Any] = {}
    run_async: bool = msgspec.field(default=True, name="async")
    ttl_hours: Annotated[int, msgspec.Meta(ge=1, le=MAX_TTL_HOURS)] = 720
    webhook: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)] | None = None
    """An https URL the run's webhooks are sent to: on its end and on each pause for an answer (docs/api.md,
    "Webhooks")."""


class ForkRunRequest(Camel, forbid_unknown_fields=True):
    """The body of a fork: the visit to run again from (or the node whose latest finished visit it is) and what
    changes from there."""

    from_visit: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] | None = None
    from_node: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] | None = None
    variables: dict[str, Any] = {}
    """Overrides of the source run's variables."""
    workflow_version: Annotated[int, msgspec.Meta(ge=1, le=2**53)] | None = None
    """A published version of the source's workflow (default: the source's version)."""
    run_async: bool = msgspec.field(default=True, name="async")


class RerunRequest(Camel, forbid_unknown_fields=True):
    """The body of a re-run (optional): whether to answer at once or with the new run's stream."""

    run_async: bool = msgspec.field(default=True, name="async")


class ResumeRequest(Camel, forbid_unknown_fields=True):
    """The answer to an AskFor question."""

    clarify_id: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    answer: Annotated[str, msgspec.Meta(min_length=1, max_length=65_536)]


# --- responses ------------------------------------------------------------------------


class ErrorEnvelope(msgspec.Struct):
    """`{code, message, data: null}`: every error answer."""

    code: str
    message: str
    data: None = None


class WorkflowInputView(Camel):
    """One run variable a workflow declares (from its userInput nodes)."""

    name: str
    type: str
    required: bool
    description: str


class WorkflowOutputView(Camel):
    """One result a workflow declares (from its output nodes)."""

    name: str
    type: str
    description: str


class GraphNodeView(Camel):
    """One node of a workflow's graph: its id, type and label (the label is the id when the definition has none)."""

    id: str
    type: str
    label: str


class GraphEdgeView(Camel):
    """One edge of a workflow's graph, with its condition (null: always taken)."""

    source: str
    target: str
    condition: str | None


class WorkflowGraph(Camel):
    """`GET /workflows/{workflowName}/graph`: the nodes and edges of the workflow's current version, in definition
    order, with its mode and start node (null: a DAG starts at every node without an incoming edge)."""

    workflow_name: str
    version: int
    mode: str
    start_node_id: str | None
    nodes: list[GraphNodeView]
    edges: list[GraphEdgeView]


class TimedTokens(Camel):
    """Tokens and their cost: `cost` is null unless FLOWTRAIL_MODEL_PRICES prices every model (or gateway) that used
    some, in one `currency` (null when there is no cost)."""

    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    currency: str | None


class WaitView(Camel):
    """A question a visit asked: when, and when it was answered (null: not yet)."""

    asked_at: str
    answered_at: str | None


class VisitTimeView(Camel):
    """One visit on the run's timeline: when it started and ended (null: not yet), the time it ran (`durationMs`, to
    `asOf` while it runs), the part of that spent waiting for answers (`waitingMs`), its waits and its tokens."""

    visit_uuid: str
    node_id: str
    node_label: str
    iter_seq: int
    status: str
    started_at: str | None
    completed_at: str | None
    duration_ms: int | None
    waiting_ms: int
    waits: list[WaitView]
    usage: TimedTokens
    models: list[str]


class RunTimelineView(Camel):
    """`GET /runs/{runId}/timeline`: the run's times, its tokens and cost (the planner's calls included) and its
    visits in card order (sortOrder), measured as of `asOf` (the server's clock)."""

    run_id: str
    as_of: str
    created_at: str | None
    started_at: str | None
    completed_at: str | None
    duration_ms: int | None
    usage: TimedTokens
    visits: list[VisitTimeView]


class WorkflowView(Camel):
    """One workflow the caller may run."""

    workflow_id: int
    workflow_name: str
    display_name: str
    description: str
    version: int
    inputs: list[WorkflowInputView]
    outputs: list[WorkflowOutputView]


class RunLinks(Camel):
    """Where to go next with a run (paths use the workflow's name)."""

    start: str
    stream: str
    result: str
    workspace: str


class CreatedRun(Camel):
    """A run that was created (or the original run of a repeated idempotent request)."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatusName
    created_at: str
    links: RunLinks


class ForkedRun(CreatedRun):
    """A fork that was created: the creation answer, plus where it came from."""

    forked_from: ForkedFrom


class StartedRun(Camel):
    """A run that was started."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: Literal["RUNNING"]
    started_at: str | None
    links: RunLinks


class WorkspaceView(Camel):
    """The run's files."""

    file_count: int
    total_bytes: int
    download_url: str


class TokenUsage(Camel):
    """Tokens over every model call and gateway run of a run (sums of its ModelCalled and RemoteRunEnded events)."""

    prompt_tokens: int
    completion_tokens: int


class ChainHead(Camel):
    """The run's newest link in its hash chain (docs/history.md): a receipt `flowtrail verify` can be held to."""

    position: int
    link: str


class RunView(Camel):
    """`GET run`: the seed's shape plus `createdAt`, `cancelRequested`, `cancelled`, token `usage`, the failure's
    `errorCode`, whether (and since when) the run waits for an answer, with the question, (a fork's) `forkedFrom`,
    only when true `remoteWorkMayBeRunning`, the head of the run's hash `chain` (absent when every event was stored
    before the chain existed), and on an erased run `erased` and `erasedAt`."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatusName
    created_at: str | None
    started_at: str | None
    completed_at: str | None
    error: str | None
    outputs: dict[str, Any] | None
    nodes: list[NodeView]
    workspace: WorkspaceView
    cancel_requested: bool
    cancelled: bool
    usage: TokenUsage
    error_code: FailureCode | None = None
    """The failure's category (null unless the run failed); docs/api.md, "Failure categories"."""
    waiting_for_answer: bool = False
    waiting_since: str | None = None
    current_pause: PauseView | None = None
    """The question the run waits on (as `GET state` shows it)."""
    forked_from: ForkedFrom | UnsetType = UNSET
    """Where a fork came from; left out for a run that is not a fork."""
    remote_work_may_be_running: bool | UnsetType = UNSET
    """Present (true) when a gateway run of this run was not confirmed stopped, or its outcome is unknown: remote
    work may still be going on (docs/hermes.md); left out otherwise."""
    chain: ChainHead | UnsetType = UNSET
    erased: bool | UnsetType = UNSET
    """True on an erased run (absent otherwise): its content is gone, its skeleton and chain stay."""
    erased_at: str | UnsetType = UNSET
    webhooks: list[WebhookView] | UnsetType = UNSET
    """The run's webhook deliveries that have begun (docs/api.md, "Webhooks"); left out while there is none."""


class RunState(Camel):
    """`GET state`: status and the current pause (null when none)."""

    run_id: str
    status: RunStatusName
    current_pause: PauseView | None


class ResumeResult(Camel):
    """The answer was stored; `accepted` says whether the run took it up at once."""

    accepted: bool
    run_id: str
    clarify_id: str


class CancelResult(Camel):
    """What a cancel request did, and the run's two cancel facts."""

    run_id: str
    outcome: CancelOutcome
    status: RunStatusName
    cancel_requested: bool
    cancelled: bool


class ErasedRun(Camel):
    """What an erasure did: ERASED now, or ALREADY_ERASED before (its clean-up done again); when, by which key
    (`retention` for FLOWTRAIL_RETENTION_DAYS), and how many events lost their content."""

    run_id: str
    outcome: EraseOutcome
    erased_at: str
    erased_by: str
    events_erased: int


class RunPage(Camel):
    """One page of a run listing, newest first; `nextCursor` fetches the next (null: this is the last)."""

    items: list[RunListItem]
    next_cursor: str | None
