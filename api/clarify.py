"""/api/v1/runs/{runId}/resume and /state: the AskFor contract (no workflow segment; runIds are global).

Checks, in order: 400 malformed runId or body; 404 RUN_NOT_FOUND (absent or outside the
key's scope); then the domain's own guard, `domain.run.check_answerable` (decisions 10, 16):
409 CLARIFY_ALREADY_ANSWERED (the clarifyId was answered before: idempotent success, the
first answer stands); 410 RUN_ALREADY_FINISHED (finished, or a cancel was requested); 404
CLARIFY_NOT_FOUND (the run is not waiting on that question). The engine checks again under
the run's lock, so an answer and a cancel cannot interleave.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get, post
from litestar.di import Provide

from api.dependencies import Injected, RunAccess, parse_run_id, run_by_id
from api.envelope import Envelope, ok
from api.errors import validation_failed
from api.jsonbody import decode_json
from api.openapi import documented_body, error_responses, inline_schema
from api.paths import RUN
from api.schemas import ResumeRequest, ResumeResult, RunIdInPath, RunState
from api.uploads import read_json_body
from api.views import state_view
from domain.run import check_answerable
from engine.access import ApiKey
from engine.execution import RunExecutor
from engine.runs.hot import HotRun

MAX_RESUME_BYTES = 128 * 1024


def decode_resume(raw: bytes) -> ResumeRequest:
    """`{clarifyId, answer}`; a missing or malformed body is a 400."""
    if not raw.strip():
        raise validation_failed("the request body is required: {\"clarifyId\": \"...\", \"answer\": \"...\"}")
    return decode_json(raw, ResumeRequest)


class ClarifyController(Controller):
    """Answer a run's question and restore the question panel after a reconnect."""

    path = RUN
    dependencies = {"run": Provide(run_by_id)}
    tags = ["askfor"]

    @post(
        "/resume",
        operation_id="resumeRun",
        summary="Answer the run's AskFor question",
        description="409 CLARIFY_ALREADY_ANSWERED is idempotent success: the question had been answered before.",
        operation_class=documented_body({"application/json": {"schema": inline_schema(ResumeRequest)}}),
        status_code=200,
        responses=error_responses(400, 404, 409, 410, 503),
    )
    async def resume(
        self, request: Request[Any, Any, Any], run_id: RunIdInPath,
        caller: Injected[ApiKey], run_access: Injected[RunAccess], engine: Injected[RunExecutor],
    ) -> Envelope[ResumeResult]:
        """Store the answer; `accepted` says whether the paused run took it up at once."""
        parse_run_id(run_id)
        answer = decode_resume(await read_json_body(request, MAX_RESUME_BYTES))
        hot = await run_access.visible(caller, run_id, None)
        run = hot.summary.run
        assert run is not None  # a visible run was loaded from its first event
        check_answerable(run, answer.clarify_id)
        accepted = await engine.answer(hot.run_id, answer.clarify_id, answer.answer)
        return ok(ResumeResult(accepted=bool(accepted), run_id=hot.run_id.hex, clarify_id=answer.clarify_id))

    @get(
        "/state",
        operation_id="getRunState",
        summary="The run's status and current AskFor pause",
        responses=error_responses(400, 404),
    )
    async def state(
        self, run: Injected[HotRun],
    ) -> Envelope[RunState]:
        """`{runId, status, currentPause}`; `choices` is an array, `createdAt` ISO_LOCAL_DATE_TIME."""
        return ok(state_view(run.summary))
