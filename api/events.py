"""GET /api/v1/runs/{runId}/events: a run's stored events as JSON Lines, streamed page by page.

One line per stored event, in position order: the event's JSON exactly as the store keeps
it (`type` is its stable tag, `originator_version` its position in the run, `originator_id`
the run id, `timestamp` when it happened; the other fields are the event's own), with one
member added last, `chain`: the event's link in the run's hash chain (docs/history.md; absent
on events stored before the chain existed). Decoding a line with the store's mapper gives
back the domain event, so an auditor rebuilds every projection from these lines alone, and
`flowtrail verify` checks the chain from them alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from litestar import Controller, get
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIFormat, OpenAPIMediaType, OpenAPIResponse, OpenAPIType, Operation, Schema
from litestar.params import QueryParameter
from litestar.response import Stream

from api.dependencies import Injected, run_by_id
from api.openapi import error_responses
from api.paths import RUN_EVENTS
from domain.chain import event_line
from engine.runs.hot import HotRun
from engine.runs.service import RunService

NDJSON = "application/x-ndjson"
PAGE_EVENTS = 500
"""Events read from the store per page (the answer never holds the whole log)."""


def event_line_schema() -> Schema:
    """One line of the answer: a stored event (its own fields besides these four vary by `type`)."""
    return Schema(
        type=OpenAPIType.OBJECT,
        description="one stored event as the log encodes it; the fields besides these depend on `type`",
        required=["type", "originator_id", "originator_version", "timestamp"],
        properties={
            "type": Schema(type=OpenAPIType.STRING, description="the event's stable tag, e.g. RunCreated"),
            "originator_id": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.UUID, description="the run id"),
            "originator_version": Schema(type=OpenAPIType.INTEGER, minimum=1,
                                         description="the event's position in the run (the stream's event id)"),
            "timestamp": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.DATE_TIME),
            "chain": Schema(
                type=OpenAPIType.OBJECT, required=["link"],
                description="the event's link in the run's hash chain (docs/history.md); always the last member; "
                            "absent on events stored before the chain existed",
                properties={
                    "link": Schema(type=OpenAPIType.STRING, description="link(n), 64 hex digits"),
                    "skeleton": Schema(type=OpenAPIType.STRING,
                                       description="s(n), on a whole event whose skeleton differs from it"),
                    "content": Schema(type=OpenAPIType.STRING, description="c(n), on an erased event"),
                    "erased": Schema(type=OpenAPIType.BOOLEAN, description="true on an erased event"),
                },
            ),
        },
        additional_properties=True,
    )


@dataclass
class EventLinesOperation(Operation):
    """An operation whose 200 answer is JSON Lines of stored events."""

    def __post_init__(self) -> None:
        answer = (self.responses or {}).get("200")
        if isinstance(answer, OpenAPIResponse):
            answer.content = {NDJSON: OpenAPIMediaType(schema=event_line_schema())}


async def event_lines(runs: RunService, hot: HotRun, after: int) -> AsyncIterator[bytes]:
    """The run's stored events after a position, one JSON line each with its chain member, a page at a time."""
    while True:
        page = await runs.stored_lines(hot.run_id, after=after, limit=PAGE_EVENTS)
        if not page:
            return
        yield b"".join(event_line(state, cells) + b"\n" for _, state, cells in page)
        if len(page) < PAGE_EVENTS:
            return
        after = page[-1][0]


class RunEventsController(Controller):
    """The log of one run, for auditors and exports."""

    path = RUN_EVENTS
    dependencies = {"run": Provide(run_by_id)}
    tags = ["audit"]

    @get(
        operation_id="listRunEvents",
        summary="A run's stored events as JSON Lines (streamed), after a position",
        description=(
            "One stored event a line, in position order: the event's JSON as the log keeps it, with its hash-chain "
            "link as the last member, `chain` (docs/history.md). "
            "`after=N` starts after position N (a stream's Last-Event-ID)."
        ),
        media_type=NDJSON,
        responses={200: ResponseSpec(data_container=str, media_type=NDJSON, generate_examples=False,
                                     description="the run's stored events, one JSON object a line"),
                   **error_responses(400, 404)},
        operation_class=EventLinesOperation,
    )
    async def events(
        self,
        run: Injected[HotRun],
        runs: Injected[RunService],
        after: Annotated[int, QueryParameter(ge=0, le=2**63 - 1, description="only events after this position")] = 0,
    ) -> Stream:
        """Every stored event of the run after `after`, streamed."""
        return Stream(event_lines(runs, run, after), media_type=NDJSON, headers={"X-Accel-Buffering": "no"})
