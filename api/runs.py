"""/api/v1/workflows/{workflowName}/runs: list, create, start, read, node logs, workspace zip, cancel.

Every handler checks the caller's key first and the run's visibility to that key next;
request bodies are read by hand after that, so an unknown key never gets past a 401.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID, uuid4

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import Provide
from litestar.params import HeaderParameter
from litestar.response import ServerSentEvent, Stream

from api.dependencies import Injected, require_engine, run_in_workflow, visible_workflow
from api.downloads import measure_workspace, zip_chunks
from api.envelope import Envelope, ok
from api.errors import ApiError
from api.idempotency import idempotent_request
from api.limits import KeyLimits
from api.listing import (
    DEFAULT_LIMIT,
    CreatedAfter,
    CreatedBefore,
    Cursor,
    ErrorCodeFilter,
    Limit,
    StatusFilter,
    workflow_run_page,
)
from api.openapi import also_ok_as_replay_or_stream, documented_body, error_responses, inline_schema
from api.paths import WORKFLOW_RUNS
from api.schemas import (
    CancelOutcome,
    CancelResult,
    CreatedRun,
    CreateRunRequest,
    ErasedRun,
    LogEntry,
    NodeIdInPath,
    RunPage,
    RunView,
    StartedRun,
    WorkflowNameInPath,
)
from api.streams import LAST_EVENT_ID, OpenStream, open_stream, resume_cursor
from api.uploads import CreateBody, read_create_body
from api.views import created_view, erased_view, run_view, started_view
from domain.catalogue import WorkflowEntry
from domain.errors import RunAlreadyFinished, RunAlreadyStarted
from domain.idempotency import check_key
from domain.run import check_startable
from engine.access import ApiKey, KeyRing, may_erase_run
from engine.catalogue import Catalogue, WorkflowNotFound
from engine.context.views import ContextReader
from engine.execution import RunExecutor
from engine.readmodel import ReadModel
from engine.runs.creation import Creation, NewRun
from engine.runs.erasure import RunEraser
from engine.runs.hot import HotRun
from engine.runs.service import RunService
from engine.settings import Settings
from engine.webhooks.service import Webhooks
from engine.workspace.directory import Workspace
from projections.visits import VisitNotFound, node_logs

CREATE_BODY = documented_body({
    "application/json": {"schema": inline_schema(CreateRunRequest)},
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "properties": {
                "payload": {**inline_schema(CreateRunRequest), "description": "the JSON request"},
                "files": {
                    "type": "array",
                    "items": {"type": "string", "format": "binary"},
                    "description": "files for the run's workspace; per-part header X-Relative-Path keeps directories",
                },
            },
        },
        "encoding": {"payload": {"contentType": "application/json"}},
    },
}, required=False, adjust=also_ok_as_replay_or_stream)

IDEMPOTENCY_HEADER = HeaderParameter(
    name="Idempotency-Key", required=False,
    description="repeat a creation safely: the same key with the same request returns the original run",
)


class EventStreamAnswer(ServerSentEvent):
    """An SSE answer from a JSON route: keeps `text/event-stream` over the route's media type."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        """The streaming response, with this response's own media type."""
        kwargs["media_type"] = None
        return super().to_asgi_response(*args, **kwargs)


async def remove_dir(path: Path) -> None:
    """Delete a directory tree off the event loop (missing is fine)."""
    await asyncio.to_thread(shutil.rmtree, path, True)


def new_run(entry: WorkflowEntry, body: CreateBody, caller: ApiKey, webhooks: Webhooks) -> NewRun:
    """The run a creation request asks for (its webhook URL checked: InvalidWebhook)."""
    webhook = body.request.webhook
    return NewRun.of(
        entry, variables=body.request.variables, uploaded_files=tuple(f.path for f in body.files),
        ttl_hours=body.request.ttl_hours, caller_key_id=caller.id,
        webhook=None if webhook is None else webhooks.check_url(webhook),
    )


async def start_quietly(engine: RunExecutor, run_id: UUID) -> None:
    """Start a run unless it already was (a repeated blocking creation re-attaches)."""
    try:
        await engine.start(run_id)
    except (RunAlreadyStarted, RunAlreadyFinished):
        pass


def node_known(catalogue: Catalogue, hot: HotRun, node_id: str) -> bool:
    """True when the run's workflow version has a node with this id."""
    created = hot.summary.created
    try:
        entry = catalogue.version(created.workflow_name, created.workflow_version)
    except WorkflowNotFound:
        return False
    return any(node.id == node_id for node in entry.definition.nodes)


async def start_and_stream(
    engine: RunExecutor, runs: RunService, stream: OpenStream, creation: Creation, last_event_id: str | None,
) -> EventStreamAnswer:
    """Start a blocking creation's run and answer with its stream (a repeat re-attaches after Last-Event-ID)."""
    try:
        hot = await runs.hot(creation.run_id)
        if creation.replayed:
            await start_quietly(engine, creation.run_id)
        else:
            await engine.start(creation.run_id)
        cursor = await resume_cursor(runs, hot, last_event_id) if creation.replayed else 0
    except BaseException:
        stream.close()
        raise
    headers = {"X-Accel-Buffering": "no", "X-Run-Id": creation.run_id.hex}
    return EventStreamAnswer(stream.follow(runs, hot, cursor), headers=headers, status_code=200)


CANCEL_OUTCOMES: dict[str, CancelOutcome] = {
    "requested": "REQUESTED", "already_requested": "ALREADY_REQUESTED", "already_finished": "ALREADY_FINISHED",
}


class RunController(Controller):
    """Runs of one workflow."""

    path = WORKFLOW_RUNS
    tags = ["runs"]
    dependencies = {"run": Provide(run_in_workflow)}

    @post(
        operation_id="createRun",
        summary="Create a run (JSON, or multipart with a payload part and files parts)",
        description=(
            "`async: true` (default) creates the run and answers 201 with its links; `async: false` starts it "
            "at once and answers with its SSE stream. With `Idempotency-Key`, a repeat of the same request by "
            "the same key answers 200 with the original run; a different request is 409 IDEMPOTENCY_KEY_REUSED."
        ),
        operation_class=CREATE_BODY,
        request_max_body_size=None,
        status_code=201,
        responses=error_responses(400, 404, 409, 413, 415, 429, 503),
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        workflow_name: WorkflowNameInPath,
        caller: Injected[ApiKey],
        keys: Injected[KeyRing],
        catalogue: Injected[Catalogue],
        runs: Injected[RunService],
        workspace: Injected[Workspace],
        settings: Injected[Settings],
        limits: Injected[KeyLimits],
        optional_engine: Injected[RunExecutor | None],
        webhooks: Injected[Webhooks],
        idempotency_key: Annotated[str | None, IDEMPOTENCY_HEADER] = None,
        last_event_id: Annotated[str | None, LAST_EVENT_ID] = None,
    ) -> Envelope[CreatedRun]:
        """Create a run of the workflow, optionally with files, optionally starting it at once."""
        entry = visible_workflow(catalogue, caller, workflow_name)
        key = check_key(idempotency_key) if idempotency_key is not None else None
        run_id = uuid4()
        run_dir = workspace.path_for(run_id)
        stream: OpenStream | None = None
        try:
            body = await read_create_body(request, run_dir, settings.uploads)
            if not body.request.run_async:
                require_engine(optional_engine)
                stream = open_stream(caller, keys, limits, request, settings.stream)
            idempotency = idempotent_request(key, caller, entry, body)
            creation = await runs.create(new_run(entry, body, caller, webhooks), run_id=run_id, idempotency=idempotency)
        except BaseException:
            await remove_dir(run_dir)
            if stream is not None:
                stream.close()
            raise
        if creation.replayed:
            await remove_dir(run_dir)
        if stream is not None:
            answer = await start_and_stream(require_engine(optional_engine), runs, stream, creation, last_event_id)
            return answer  # type: ignore[return-value]  # the blocking form answers with the stream; OpenAPI documents both
        hot = await runs.hot(creation.run_id)
        status = 200 if creation.replayed else 201
        headers = {"Idempotent-Replayed": "true"} if creation.replayed else {}
        return Response(ok(created_view(hot.summary)), status_code=status, headers=headers)  # type: ignore[return-value]  # 201 or 200 with the same envelope

    @get(
        operation_id="listWorkflowRuns",
        summary="List the runs of one workflow this API key may see, newest first",
        responses=error_responses(400, 404),
    )
    async def list_runs(
        self, workflow_name: WorkflowNameInPath, caller: Injected[ApiKey], catalogue: Injected[Catalogue],
        read_model: Injected[ReadModel], status: StatusFilter = None, created_after: CreatedAfter = None,
        created_before: CreatedBefore = None, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
        error_code: ErrorCodeFilter = None,
    ) -> Envelope[RunPage]:
        """The workflow's runs in the key's scope (its own unless it sees all runs), filtered, one page at a time."""
        return await workflow_run_page(
            workflow_name, caller, catalogue, read_model, status=status, created_after=created_after,
            created_before=created_before, limit=limit, cursor=cursor, error_code=error_code,
        )

    @post(
        "/{runId:str}/start",
        operation_id="startRun",
        summary="Start a created run",
        status_code=200,
        responses=error_responses(400, 404, 409, 410, 503),
    )
    async def start(
        self, run: Injected[HotRun], engine: Injected[RunExecutor],
    ) -> Envelope[StartedRun]:
        """Start the run; a second start is 409 RUN_ALREADY_STARTED, a run that finished unstarted 410 (decision 10)."""
        state = run.summary.run
        assert state is not None  # a visible run was loaded from its first event
        check_startable(state)
        await engine.start(run.run_id)
        return ok(started_view(run.summary))

    @get(
        "/{runId:str}",
        operation_id="getRun",
        summary="A run's status, outputs, nodes and workspace",
        responses=error_responses(400, 404),
    )
    async def get_run(
        self, run: Injected[HotRun], runs: Injected[RunService], workspace: Injected[Workspace],
        context: Injected[ContextReader],
    ) -> Envelope[RunView]:
        """The persisted result of a run, in the seed's shape, with the head of its hash chain."""
        files, size = await measure_workspace(workspace.path_for(run.run_id))
        head = await runs.chain_head(run.run_id)
        return ok(run_view(run, await context.whole_index(run), files, size, head))

    @delete(
        "/{runId:str}",
        operation_id="eraseRun",
        summary="Erase an ended run's content (its skeleton and hash chain stay)",
        description=(
            "By the run's owner, or a key with `mayErase` (seeing all runs is not that right: 403 FORBIDDEN). "
            "409 RUN_STATE_CONFLICT while the run has not ended (never started, running, waiting for an answer). "
            "A run erased before answers ALREADY_ERASED and its clean-up is done again (docs/history.md)."
        ),
        status_code=200,
        responses=error_responses(400, 403, 404, 409, 503),
    )
    async def erase(
        self, run: Injected[HotRun], caller: Injected[ApiKey], eraser: Injected[RunEraser],
    ) -> Envelope[ErasedRun]:
        """Erase the run's variables, files, model text, tool data, outputs and answers; keep its skeleton and chain."""
        if not may_erase_run(caller, run.summary.created.caller_key_id):
            raise ApiError("FORBIDDEN", "this key may erase only the runs it created (a key with mayErase may erase any it sees)")
        return ok(erased_view(await eraser.erase(run.run_id, by=caller.id)))

    @get(
        "/{runId:str}/nodes/{nodeId:str}/logs",
        operation_id="getNodeLogs",
        summary="A node's persisted logs, over all its visits",
        responses=error_responses(400, 404),
    )
    async def node_logs(
        self, node_id: NodeIdInPath, run: Injected[HotRun], catalogue: Injected[Catalogue],
        context: Injected[ContextReader],
    ) -> Envelope[list[LogEntry]]:
        """`{type, message, detail, timestamp}` entries; a node not visited yet has none."""
        try:
            return ok(node_logs(await context.whole_index(run), node_id))
        except VisitNotFound:
            if node_known(catalogue, run, node_id):
                return ok([])
            raise VisitNotFound(f"run {run.run_id.hex} has no node {node_id[:64]!r}") from None

    @get(
        "/{runId:str}/workspace",
        operation_id="downloadWorkspace",
        summary="The run's workspace as a zip (binary, streamed)",
        media_type="application/zip",
        responses=error_responses(400, 404),
    )
    async def workspace(
        self, run: Injected[HotRun], workspace: Injected[Workspace],
    ) -> Stream:
        """Every file of the run's workspace, zipped on the fly."""
        name = f"{run.summary.created.workflow_name}-{run.run_id.hex}.zip"
        return Stream(
            zip_chunks(workspace.path_for(run.run_id)),
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{name}"', "X-Accel-Buffering": "no"},
        )

    @post(
        "/{runId:str}/cancel",
        operation_id="cancelRun",
        summary="Ask for a run to be cancelled",
        description=(
            "outcome REQUESTED (recorded now; `cancelled` becomes true when the engine has stopped the run), "
            "ALREADY_REQUESTED, or ALREADY_FINISHED (nothing to cancel)."
        ),
        status_code=200,
        responses=error_responses(400, 404, 503),
    )
    async def cancel(
        self, run: Injected[HotRun], engine: Injected[RunExecutor],
    ) -> Envelope[CancelResult]:
        """Request a cancel; `cancelRequested` and `cancelled` are reported as separate facts."""
        outcome = await engine.cancel(run.run_id)
        summary = run.summary
        return ok(CancelResult(
            run_id=run.run_id.hex, outcome=CANCEL_OUTCOMES[outcome], status=summary.external_status,
            cancel_requested=summary.cancel_requested, cancelled=summary.cancelled,
        ))
