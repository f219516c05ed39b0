"""The wire shapes projections send: SSE message payloads, visit snapshots, node lists, logs, listed runs, context bodies.

camelCase on the wire (`rename="camel"`), snake_case in Python. The field order is the order on
the wire, kept byte for byte (tests/unit/test_golden_replay.py): `type` is a plain Literal field
declared after `run_id`, not a msgspec tag (a tag would be written first). A field that is left
out of the JSON (rather than null) defaults to UNSET.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec
from msgspec import UNSET, UnsetType

JSON = dict[str, Any]
VisitStatus = Literal["RUNNING", "SUCCESS", "FAILED", "SKIPPED"]
EndStatus = Literal["SUCCESS", "FAILED", "SKIPPED"]
RunStatusName = Literal["CREATED", "RUNNING", "SUCCESS", "FAILED"]
LogType = Literal[
    "THINKING", "TOOL_CALL", "TOOL_RESULT", "STATUS", "STEP", "TOOL_PROGRESS", "TODO_UPDATE", "CLARIFY_REQUEST", "ERROR",
]


class Camel(msgspec.Struct, rename="camel"):
    """Base of every wire shape: snake_case in Python, camelCase in JSON."""


# --- parts ----------------------------------------------------------------------------


class LogEntry(Camel, gc=False):
    """One log line of a visit."""

    type: LogType
    message: str
    detail: str | None
    timestamp: str


class ToolCall(Camel, gc=False):
    """One tool call (`args`) or its result (`result`), as §2.3 TOOL_CALLS lists them."""

    tool: str | None
    args: str | UnsetType = UNSET
    result: str | UnsetType = UNSET


class PauseView(Camel, kw_only=True):
    """The question a run waits on."""

    clarify_id: str
    node_id: str
    question: str
    choices: tuple[str, ...]
    created_at: str


class VisitSnapshot(Camel, kw_only=True):
    """One visit as a whole, its logs as JSON text in `logsJson`."""

    visit_uuid: str
    run_id: str
    node_id: str
    node_type: str
    node_label: str
    iter_seq: int
    sort_order: int
    from_node_id: str | None
    from_visit_uuid: str | None
    predecessor_visit_uuids: tuple[str, ...]
    status: VisitStatus
    output: JSON | None
    error: str | None
    skip_reason: str | None
    started_at: str | None
    completed_at: str | None
    logs_json: str
    logs_count: int


class VisitRef(Camel, kw_only=True):
    """A visit by its ids alone (one the visit index did not keep: the run went over its visit limit)."""

    visit_uuid: str
    run_id: str
    node_id: str


class NodeView(Camel, kw_only=True):
    """One node of a run: its last visit's state, logs counted over all its visits."""

    node_id: str
    node_type: str
    label: str
    status: VisitStatus
    output: JSON | None
    error: str | None
    logs_count: int
    logs_url: str | UnsetType = UNSET
    """Set by the API, which knows where the node's logs are served."""


class Decision(Camel, kw_only=True):
    """The planner's choice: the next node (null: finish the run), why, and where it stood."""

    next_node_id: str | None
    reason: str
    from_node_id: str | None


class ForkedFrom(Camel, kw_only=True):
    """Where a fork came from: its source run, the visit it executes again (null: a re-run that goes on from the
    source's end) and the source position it copied up to."""

    run_id: str
    visit_uuid: str | None
    position: int


class RunListItem(Camel):
    """One run in a listing: the stored run row (`projections.run_row.RunRow`)."""

    run_id: str
    workflow_name: str
    workflow_id: int
    workflow_version: int
    status: RunStatusName
    owner_key_id: str
    cancel_requested: bool
    cancelled: bool
    created_at: str
    started_at: str | None
    completed_at: str | None
    error_code: str | None
    prompt_tokens: int
    completion_tokens: int
    last_event_id: int
    waiting_for_answer: bool = False
    """True while the run waits for a person's answer to its question."""
    waiting_since: str | None = None
    """Since when it waits (ISO 8601 UTC); null when it waits for none."""
    forked_from: ForkedFrom | UnsetType = UNSET
    """Where a fork came from; left out for a run that is not a fork."""
    erased_at: str | UnsetType = UNSET
    """When the run's content was erased (absent: it was not)."""


# --- SSE message payloads (`data:` of each message) ----------------------------------------------
# Each has `erased` last: true on every message of an erased run (docs/history.md), absent otherwise.


class NodeStatusRunningPayload(Camel, kw_only=True):
    """`node_status` RUNNING: a visit began."""

    run_id: str
    type: Literal["node_status"] = "node_status"
    node_id: str
    visit_uuid: str
    status: Literal["RUNNING"] = "RUNNING"
    node_type: str
    node_label: str
    erased: bool | UnsetType = UNSET


class NodeStatusEndedPayload(Camel, kw_only=True):
    """`node_status` SUCCESS, FAILED or SKIPPED: a visit ended, with its output, logs and the run's context so far."""

    run_id: str
    type: Literal["node_status"] = "node_status"
    node_id: str
    visit_uuid: str
    status: EndStatus
    output: JSON | None
    error: str | None
    logs: list[LogEntry]
    context_snapshot: JSON
    erased: bool | UnsetType = UNSET


class NodeStreamPayload(Camel, kw_only=True):
    """`node_stream`: one piece of a visit's stream (tool calls and results cut to 500 characters)."""

    run_id: str
    type: Literal["node_stream"] = "node_stream"
    node_id: str
    visit_uuid: str
    kind: str
    content: str
    tool_name: str | None
    erased: bool | UnsetType = UNSET


class VisitRecordedPayload(Camel, kw_only=True):
    """`visit_recorded`: a finished visit as a whole."""

    run_id: str
    type: Literal["visit_recorded"] = "visit_recorded"
    visit: VisitSnapshot
    erased: bool | UnsetType = UNSET


class VisitRefRecordedPayload(Camel, kw_only=True):
    """`visit_recorded` of a visit beyond the run's visit limit: its ids only."""

    run_id: str
    type: Literal["visit_recorded"] = "visit_recorded"
    visit: VisitRef
    erased: bool | UnsetType = UNSET


class PlannerDecisionPayload(Camel, kw_only=True):
    """`planner_decision`: the AGENTIC planner chose the next node."""

    run_id: str
    type: Literal["planner_decision"] = "planner_decision"
    decision: Decision
    erased: bool | UnsetType = UNSET


class WorkflowCompletePayload(Camel, kw_only=True):
    """`workflow_complete`: the run succeeded (the stream ends)."""

    run_id: str
    type: Literal["workflow_complete"] = "workflow_complete"
    output: JSON
    success: bool = True
    working_dir_files: tuple[str, ...]
    erased: bool | UnsetType = UNSET


class WorkflowErrorPayload(Camel, kw_only=True):
    """`workflow_error`: the run failed or was cancelled (the stream ends)."""

    run_id: str
    type: Literal["workflow_error"] = "workflow_error"
    error: str
    success: bool = False
    error_code: str | None = None
    """The failure's category (docs/api.md, "Failure categories"): a field added to the seed's."""
    erased: bool | UnsetType = UNSET


class SnapshotPayload(Camel, kw_only=True):
    """`snapshot` (with `snapshot=true`): the run's state and every visit so far, before the live messages."""

    run_id: str
    type: Literal["snapshot"] = "snapshot"
    status: RunStatusName
    cancel_requested: bool
    cancelled: bool
    current_pause: PauseView | None
    visits: list[VisitSnapshot]
    erased: bool | UnsetType = UNSET


EventPayload = (
    NodeStatusRunningPayload
    | NodeStatusEndedPayload
    | NodeStreamPayload
    | VisitRecordedPayload
    | VisitRefRecordedPayload
    | PlannerDecisionPayload
    | WorkflowCompletePayload
    | WorkflowErrorPayload
)
"""The payload of a run event's SSE message."""

SsePayload = EventPayload | SnapshotPayload
"""Every payload a stream may send."""

SSE_PAYLOADS: tuple[type[Camel], ...] = get_args(SsePayload)


# --- context bodies (§2) ------------------------------------------------------------------


class PathChain(Camel, kw_only=True):
    """One chain of visits leading to the asked visit, oldest first."""

    sequence: list[str]
    visit_uuids: list[str]
    has_backtrack: bool


class PredecessorPaths(Camel, kw_only=True):
    """§2.1: the chains, their visits in sortOrder, the back-edges, and whether the walk was cut."""

    visit_uuids: list[str]
    node_ids: list[str]
    paths: list[PathChain]
    backtrack_edge_keys: list[str]
    truncated: bool


class NodeOutput(Camel, kw_only=True):
    """§2.2: a visit's output envelope, `data` whole or one field of it."""

    node_id: str
    iter_seq: int
    visit_uuid: str
    status: Any
    message: Any
    data: Any
    requested_field: str | None


class NodeMeta(Camel, kw_only=True):
    """§2.3: what a visit did on the way; only the parts of the asked kind are present."""

    node_id: str
    iter_seq: int
    visit_uuid: str
    thinking: str | UnsetType = UNSET
    tool_calls: list[ToolCall] | UnsetType = UNSET
    todo_list: list[Any] | UnsetType = UNSET
    logs: list[LogEntry] | UnsetType = UNSET
