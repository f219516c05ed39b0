"""Response bodies built from a run's projections (links use the workflow's kebab-case name)."""

from __future__ import annotations

from urllib.parse import quote

from api.paths import API
from api.schemas import CreatedRun, RunLinks, RunState, RunView, StartedRun, TokenUsage, WorkspaceView
from engine.runs.hot import HotRun
from projections.summary import RunSummary, node_list
from projections.visits import VisitIndex
from projections.wire import iso_utc


def run_path(summary: RunSummary) -> str:
    """`/api/v1/workflows/{workflowName}/runs/{runId}`."""
    return f"{API}/workflows/{quote(summary.workflow_name, safe='')}/runs/{summary.run_id}"


def run_links(summary: RunSummary) -> RunLinks:
    """The seed's four links."""
    base = run_path(summary)
    return RunLinks(start=f"{base}/start", stream=f"{base}/stream", result=base, workspace=f"{base}/workspace")


def created_view(summary: RunSummary) -> CreatedRun:
    """The answer to run creation."""
    return CreatedRun(
        run_id=summary.run_id or "",
        workflow_id=summary.workflow_id or 0,
        workflow_name=summary.workflow_name,
        display_name=summary.display_name,
        status=summary.external_status,
        created_at=iso_utc(summary.created_at) or "",
        links=run_links(summary),
    )


def started_view(summary: RunSummary) -> StartedRun:
    """The answer to a start: the run is RUNNING from here on."""
    return StartedRun(
        run_id=summary.run_id or "",
        workflow_id=summary.workflow_id or 0,
        workflow_name=summary.workflow_name,
        display_name=summary.display_name,
        status="RUNNING",
        started_at=iso_utc(summary.started_at),
        links=run_links(summary),
    )


def run_view(hot: HotRun, index: VisitIndex, file_count: int, total_bytes: int) -> RunView:
    """`GET run`: status, times, outputs, nodes (from `index`, the run's whole visit index) and workspace."""
    summary = hot.summary
    base = run_path(summary)
    nodes = node_list(index, logs_url=lambda node_id: f"{base}/nodes/{quote(node_id, safe='')}/logs")
    return RunView(
        run_id=summary.run_id or "",
        workflow_id=summary.workflow_id or 0,
        workflow_name=summary.workflow_name,
        display_name=summary.display_name,
        status=summary.external_status,
        created_at=iso_utc(summary.created_at),
        started_at=iso_utc(summary.started_at),
        completed_at=iso_utc(summary.completed_at),
        error=summary.error,
        outputs=summary.outputs,
        nodes=nodes,
        workspace=WorkspaceView(file_count=file_count, total_bytes=total_bytes, download_url=f"{base}/workspace"),
        cancel_requested=summary.cancel_requested,
        cancelled=summary.cancelled,
        usage=TokenUsage(prompt_tokens=summary.prompt_tokens, completion_tokens=summary.completion_tokens),
    )


def state_view(summary: RunSummary) -> RunState:
    """`GET state`: `{runId, status, currentPause}`."""
    return RunState(run_id=summary.run_id or "", status=summary.external_status, current_pause=summary.current_pause)
