"""/api/v1/workflows/{workflowName}/runs/{runId}/fork, /rerun and /forks: runs made from another run's history.

As on every run route, the caller's key is checked first and the source's visibility next (a source the key
may not see is 404 RUN_NOT_FOUND); the body is read after that. A fork is created like a run (`async`,
`Idempotency-Key`), and its answer is the creation answer plus `forkedFrom`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any
from uuid import uuid4

from litestar import Controller, Request, Response, get, post
from litestar.di import Provide

from api.dependencies import Injected, require_engine, run_in_workflow
from api.envelope import Envelope, ok
from api.errors import validation_failed
from api.jsonbody import decode_json
from api.limits import KeyLimits
from api.listing import DEFAULT_LIMIT, Cursor, Limit, StatusFilter, run_page, visible_query
from api.openapi import also_ok_as_replay_or_stream, documented_body, error_responses, inline_schema
from api.paths import WORKFLOW_RUN
from api.runs import IDEMPOTENCY_HEADER, EventStreamAnswer, start_and_stream
from api.schemas import ForkedRun, ForkRunRequest, RerunRequest, RunPage
from api.streams import LAST_EVENT_ID, OpenStream, open_stream
from api.uploads import RESERVED_VARIABLE, read_json_body
from api.views import created_view
from domain.idempotency import check_key, request_digest
from engine.access import ApiKey, KeyRing
from engine.catalogue import Catalogue
from engine.execution import RunExecutor
from engine.readmodel import ReadModel
from engine.runs.creation import IdempotentRequest
from engine.runs.fork import ForkPlan, ForkRequest, RunForks
from engine.runs.hot import HotRun
from engine.runs.service import RunService
from engine.settings import Settings
from engine.workspace.directory import Workspace
from projections.summary import RunSummary

FORK_BODY = documented_body(
    {"application/json": {"schema": inline_schema(ForkRunRequest)}}, adjust=also_ok_as_replay_or_stream,
)
RERUN_BODY = documented_body(
    {"application/json": {"schema": inline_schema(RerunRequest)}}, required=False, adjust=also_ok_as_replay_or_stream,
)


def decode_fork(raw: bytes) -> ForkRunRequest:
    """The fork's body: exactly one of `fromVisit` and `fromNode`, and no `uploadedFiles` among the variables."""
    body = decode_json(raw, ForkRunRequest) if raw.strip() else ForkRunRequest()
    if (body.from_visit is None) == (body.from_node is None):
        raise validation_failed('name where to fork from: exactly one of "fromVisit" (a visit uuid) and "fromNode"')
    if RESERVED_VARIABLE in body.variables:
        raise validation_failed(f"variables.{RESERVED_VARIABLE} is the source's uploaded files; do not send it")
    return body


def forked_view(summary: RunSummary) -> ForkedRun:
    """The answer to a fork: the creation answer, plus where the fork came from."""
    created, forked_from = created_view(summary), summary.forked_from
    assert forked_from is not None, "a fork's summary is read after its RunForked"
    return ForkedRun(**{name: getattr(created, name) for name in created.__struct_fields__}, forked_from=forked_from)


def fork_idempotency(key: str | None, caller: ApiKey, plan: ForkPlan, request: dict[str, Any]) -> IdempotentRequest | None:
    """What a (checked) key is bound to: the caller, the normalised fork request and the version the fork runs."""
    if key is None:
        return None
    return IdempotentRequest(
        caller_key_id=caller.id, key=key, digest=request_digest(request),
        workflow_name=plan.entry.name, workflow_version=plan.entry.version,
    )


@dataclass(frozen=True)
class Forking:
    """The service parts and the caller a fork request works with (one dependency, resolved after the caller's key)."""

    caller: ApiKey
    runs: RunService
    forks: RunForks
    engine: RunExecutor | None
    limits: KeyLimits
    settings: Settings
    keys: KeyRing

    async def answer(
        self, request: Request[Any, Any, Any], source: HotRun, wanted: ForkRequest, normalised: dict[str, Any],
        run_async: bool, key: str | None, last_event_id: str | None,
    ) -> Any:
        """Plan the fork (a refusal stores nothing), create it, and answer as creation does: the JSON envelope, or
        with `async: false` the fork's stream."""
        plan = await self.forks.plan(source.run_id, wanted, caller_key_id=self.caller.id)
        stream: OpenStream | None = None
        if not run_async:
            require_engine(self.engine)
            stream = open_stream(self.caller, self.keys, self.limits, request, self.settings.stream)
        try:
            request_bound = {**normalised, "async": run_async, "workflowVersion": plan.entry.version}
            idempotency = fork_idempotency(key, self.caller, plan, request_bound)
            creation = await self.forks.create(plan, run_id=uuid4(), idempotency=idempotency)
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        if stream is not None:
            answer: EventStreamAnswer = await start_and_stream(
                require_engine(self.engine), self.runs, stream, creation, last_event_id,
            )
            return answer
        hot = await self.runs.hot(creation.run_id)
        headers = {"Idempotent-Replayed": "true"} if creation.replayed else {}
        return Response(ok(forked_view(hot.summary)), status_code=200 if creation.replayed else 201, headers=headers)


async def forking(
    caller: Injected[ApiKey], runs: Injected[RunService], catalogue: Injected[Catalogue], workspace: Injected[Workspace],
    settings: Injected[Settings], limits: Injected[KeyLimits], optional_engine: Injected[RunExecutor | None],
    keys: Injected[KeyRing],
) -> Forking:
    """What the fork and re-run routes work with."""
    return Forking(caller, runs, RunForks(runs, catalogue, workspace), optional_engine, limits, settings, keys)


class ForkController(Controller):
    """Forks and re-runs of one run, and the list of its forks."""

    path = WORKFLOW_RUN
    tags = ["runs"]
    dependencies = {"run": Provide(run_in_workflow), "forking": Provide(forking)}

    @post(
        "/fork",
        operation_id="forkRun",
        summary="Fork the run at a finished visit: a new run with its history up to there, executing from there",
        description=(
            "`fromVisit` (a visit uuid) or `fromNode` (its latest finished visit); optional `variables` (overrides), "
            "`workflowVersion` (another published version of the workflow), `async` and `Idempotency-Key` as on "
            "creation. 201 with the creation answer plus `forkedFrom`."
        ),
        operation_class=FORK_BODY,
        status_code=201,
        responses=error_responses(400, 404, 409, 429, 503),
    )
    async def fork(
        self, request: Request[Any, Any, Any], run: Injected[HotRun], forking: Injected[Forking],
        idempotency_key: Annotated[str | None, IDEMPOTENCY_HEADER] = None,
        last_event_id: Annotated[str | None, LAST_EVENT_ID] = None,
    ) -> Envelope[ForkedRun]:
        """Create a fork of the run (and with `async: false` start it and answer with its stream)."""
        key = check_key(idempotency_key) if idempotency_key is not None else None
        body = decode_fork(await read_json_body(request))
        wanted = ForkRequest(visit_uuid=body.from_visit, node_id=body.from_node, variables=body.variables,
                             workflow_version=body.workflow_version)
        normalised = {"fork": run.run_id.hex, "fromVisit": body.from_visit, "fromNode": body.from_node,
                      "variables": body.variables}
        return await forking.answer(request, run, wanted, normalised, body.run_async, key, last_event_id)

    @post(
        "/rerun",
        operation_id="rerunRun",
        summary="Re-run a failed or cancelled run from its first failed or interrupted visit",
        description=(
            "A fork with the run's own version and variables, cut before its first failed or interrupted visit "
            "(a run that ended with no visit failed goes on from its end). 409 RUN_NOT_FAILED for any other run."
        ),
        operation_class=RERUN_BODY,
        status_code=201,
        responses=error_responses(400, 404, 409, 429, 503),
    )
    async def rerun(
        self, request: Request[Any, Any, Any], run: Injected[HotRun], forking: Injected[Forking],
        idempotency_key: Annotated[str | None, IDEMPOTENCY_HEADER] = None,
        last_event_id: Annotated[str | None, LAST_EVENT_ID] = None,
    ) -> Envelope[ForkedRun]:
        """Create the re-run (and with `async: false` start it and answer with its stream)."""
        key = check_key(idempotency_key) if idempotency_key is not None else None
        raw = await read_json_body(request)
        body = decode_json(raw, RerunRequest) if raw.strip() else RerunRequest()
        normalised = {"rerun": run.run_id.hex}
        return await forking.answer(request, run, ForkRequest(rerun=True), normalised, body.run_async, key,
                                    last_event_id)

    @get(
        "/forks",
        operation_id="listRunForks",
        summary="The run's forks (and re-runs) this API key may see, newest first",
        responses=error_responses(400, 404),
    )
    async def forks(
        self, run: Injected[HotRun], caller: Injected[ApiKey], read_model: Injected[ReadModel],
        status: StatusFilter = None, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
    ) -> Envelope[RunPage]:
        """Runs forked from this one (not their forks), as the listing shows them, one page at a time."""
        query = visible_query(caller, limit=limit, statuses=status, created_after=None, created_before=None,
                              cursor=cursor)
        return await run_page(read_model, replace(query, forked_from=run.run_id.hex))
