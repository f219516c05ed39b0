"""The model's closed vocabularies: run modes, node types, stream kinds, model call purposes, remote run
outcomes, visit statuses.

Values of all but visit statuses are stored in events, so a value may be added but never removed
or renamed: an old log must keep decoding.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

RunMode = Literal["DAG", "AGENTIC"]
NodeType = Literal["userInput", "llm", "agent", "smartAction", "output"]
StreamKind = Literal[
    "thinking", "status", "step", "tool_progress", "tool_call", "tool_result", "todo_update", "clarify_request",
]
ModelCallPurpose = Literal["node", "reformat", "planner"]
RemoteRunOutcome = Literal["completed", "failed", "cancelled", "stop_unconfirmed", "unknown"]
"""How a remote gateway run ended for flowtrail: its own terminal status (completed, failed, cancelled:
the gateway confirmed a stop), a stop the gateway did not confirm in time, or an outcome that cannot be read."""
VisitStatus = Literal["RUNNING", "SUCCESS", "FAILED", "SKIPPED"]

RUN_MODES: tuple[RunMode, ...] = get_args(RunMode)
NODE_TYPES: tuple[NodeType, ...] = get_args(NodeType)
STREAM_KINDS: tuple[StreamKind, ...] = get_args(StreamKind)
MODEL_CALL_PURPOSES: tuple[ModelCallPurpose, ...] = get_args(ModelCallPurpose)
REMOTE_RUN_OUTCOMES: tuple[RemoteRunOutcome, ...] = get_args(RemoteRunOutcome)
VISIT_STATUSES: tuple[VisitStatus, ...] = get_args(VisitStatus)

VISIT_RUNNING: VisitStatus = "RUNNING"
VISIT_SUCCESS: VisitStatus = "SUCCESS"
VISIT_FAILED: VisitStatus = "FAILED"
VISIT_SKIPPED: VisitStatus = "SKIPPED"


def is_run_mode(value: str) -> TypeGuard[RunMode]:
    """True for DAG and AGENTIC."""
    return value in RUN_MODES


def is_node_type(value: str) -> TypeGuard[NodeType]:
    """True for the node types a workflow may use."""
    return value in NODE_TYPES


def is_stream_kind(value: str) -> TypeGuard[StreamKind]:
    """True for the seed's eight `node_stream` kinds."""
    return value in STREAM_KINDS


def is_model_call_purpose(value: str) -> TypeGuard[ModelCallPurpose]:
    """True for what a model is called for: a node, a reformat of its answer, the planner."""
    return value in MODEL_CALL_PURPOSES


def is_remote_run_outcome(value: str) -> TypeGuard[RemoteRunOutcome]:
    """True for the ways a remote gateway run ends for flowtrail."""
    return value in REMOTE_RUN_OUTCOMES
