"""Response bodies built from a run's projections (links use the workflow's kebab-case name)."""

from __future__ import annotations

from urllib.parse import quote

from msgspec import UNSET

from api.paths import API
from api.schemas import (
    ChainHead,
    CreatedRun,
    ErasedRun,
    RunLinks,
    RunState,
    RunView,
    StartedRun,
    TokenUsage,
    WorkspaceView,
)
from engine.runs.erasure import Erasure
from engine.runs.hot import HotRun
from projections.summary import RunSummary, node_list
from projections.visits import VisitIndex
from projections.wire import iso_utc


def run_path(summary: RunSummary) -> str:
    """`/api/v1/workflows/{workflowName}/runs/{runId}`."""
    created = summary.created
    return f"{API}/workflows/{quote(created.workflow_name, safe='')}/runs/{created.originator_id.hex}"


def run_links(summary: RunSummary) -> RunLinks:
    """The seed's four links."""
    base = run_path(summary)
    return RunLinks(start=f"{base}/start", stream=f"{base}/stream", result=base, workspace=f"{base}/workspace")


def created_view(summary: RunSummary) -> CreatedRun:
    """The answer to run creation."""
    created = summary.created
    return CreatedRun(
        run_id=created.originator_id.hex,
        workflow_id=created.workflow_id,
        workflow_name=created.workflow_name,
        display_name=created.display_name,
        status=summary.external_status,
        created_at=iso_utc(created.timestamp),
        links=run_links(summary),
    )


def started_view(summary: RunSummary) -> StartedRun:
    """The answer to a start: the run is RUNNING from here on."""
    created = summary.created
    return StartedRun(
        run_id=created.originator_id.hex,
        workflow_id=created.workflow_id,
        workflow_name=created.workflow_name,
        display_name=created.display_name,
        status="RUNNING",
        started_at=iso_utc(summary.started_at),
        links=run_links(summary),
    )


def run_view(
    hot: HotRun, index: VisitIndex, file_count: int, total_bytes: int, head: tuple[int, bytes] | None = None,
) -> RunView:
    """`GET run`: status, times, outputs, nodes (from `index`, the run's whole visit index), workspace and chain head."""
    summary = hot.summary
    created = summary.created
    base = run_path(summary)
    nodes = node_list(index, logs_url=lambda node_id: f"{base}/nodes/{quote(node_id, safe='')}/logs")
    return RunView(
        run_id=created.originator_id.hex,
        workflow_id=created.workflow_id,
        workflow_name=created.workflow_name,
        display_name=created.display_name,
        status=summary.external_status,
        created_at=iso_utc(created.timestamp),
        started_at=iso_utc(summary.started_at),
        completed_at=iso_utc(summary.completed_at),
        error=summary.error,
        outputs=summary.outputs,
        nodes=nodes,
        workspace=WorkspaceView(file_count=file_count, total_bytes=total_bytes, download_url=f"{base}/workspace"),
        cancel_requested=summary.cancel_requested,
        cancelled=summary.cancelled,
        usage=TokenUsage(prompt_tokens=summary.prompt_tokens, completion_tokens=summary.completion_tokens),
        error_code=summary.error_code, waiting_for_answer=summary.waiting_since is not None,
        waiting_since=iso_utc(summary.waiting_since), current_pause=summary.current_pause,
        forked_from=UNSET if summary.forked_from is None else summary.forked_from,
        remote_work_may_be_running=True if summary.remote_work_may_be_running else UNSET,
        chain=UNSET if head is None else ChainHead(position=head[0], link=head[1].hex()),
        erased=True if summary.erased else UNSET,
        erased_at=UNSET if summary.erased_at is None else iso_utc(summary.erased_at),
        webhooks=summary.webhooks.views() or UNSET,
    )


def erased_view(erasure: Erasure) -> ErasedRun:
    """What DELETE of a run answers."""
    return ErasedRun(
        run_id=erasure.run_id.hex, outcome="ALREADY_ERASED" if erasure.already else "ERASED",
        erased_at=iso_utc(erasure.erased_at) or "", erased_by=erasure.erased_by, events_erased=erasure.events_erased,
    )


def state_view(summary: RunSummary) -> RunState:
    """`GET state`: `{runId, status, currentPause}`."""
    run_id = summary.created.originator_id.hex
    return RunState(run_id=run_id, status=summary.external_status, current_pause=summary.current_pause)
