"""GET /api/v1/runs and GET /api/v1/workflows/{workflowName}/runs: the runs a key may see, newest first.

Pages come from the run read model (`engine.readmodel`) by keyset pagination: the opaque cursor is
the (creation time, run id) of the last run of the previous page.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Literal

from litestar import Controller, get
from litestar.params import QueryParameter

from api.dependencies import Injected, visible_workflow
from api.envelope import Envelope, ok
from api.errors import validation_failed
from api.openapi import error_responses
from api.paths import RUNS
from api.schemas import RunPage
from domain.failures import FailureCode
from engine.access import ApiKey
from engine.catalogue import Catalogue
from engine.readmodel import ReadModel, RunQuery
from engine.readmodel.table import micros
from projections.run_row import RunRow, list_item

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
_CURSOR = re.compile(r"^(\d{1,19})\.([0-9a-f]{32})$")
MAX_MICROS = 2**63 - 1
"""A cursor's time stands in a signed 64-bit column (microseconds since the epoch): none is later."""

StatusFilter = Annotated[
    list[Literal["CREATED", "RUNNING", "SUCCESS", "FAILED", "WAITING"]] | None,
    QueryParameter(required=False, description=(
        "only runs in these statuses (repeat the parameter for several); `WAITING`: the runs that wait for a "
        "person's answer (their status is RUNNING)"
    )),
]
ErrorCodeFilter = Annotated[
    list[FailureCode] | None,
    QueryParameter(name="errorCode", required=False, description=(
        "only failed runs with one of these failure categories (repeat the parameter for several)"
    )),
]
CreatedAfter = Annotated[str | None, QueryParameter(
    name="createdAfter", required=False, format="date-time", max_length=64,
    description="only runs created strictly after this time (ISO 8601 with an offset or Z)",
)]
CreatedBefore = Annotated[str | None, QueryParameter(
    name="createdBefore", required=False, format="date-time", max_length=64,
    description="only runs created strictly before this time (ISO 8601 with an offset or Z)",
)]
Limit = Annotated[int, QueryParameter(ge=1, le=MAX_LIMIT, description=f"runs per page (1..{MAX_LIMIT})")]
Cursor = Annotated[str | None, QueryParameter(
    required=False, max_length=128, description="`nextCursor` of the previous page (opaque)",
)]
WorkflowFilter = Annotated[str | None, QueryParameter(
    required=False, min_length=1, max_length=128, description="only runs of the workflow with this name",
)]


def parse_time(raw: str | None, name: str) -> int | None:
    """An ISO 8601 time with an offset (or Z), as microseconds since the epoch; 400 naming the parameter otherwise."""
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise validation_failed(f"{name} {raw[:64]!r} is not an ISO 8601 time") from None
    if at.tzinfo is None:
        raise validation_failed(f"{name} {raw[:64]!r} has no offset (add Z or +hh:mm)")
    return micros(at)


def encode_cursor(row: RunRow) -> str:
    """The opaque position after a row."""
    return base64.urlsafe_b64encode(f"{micros(row.created_at)}.{row.run_id}".encode()).decode().rstrip("=")


def parse_cursor(raw: str | None) -> tuple[int, str] | None:
    """The position a cursor stands for; 400 VALIDATION_FAILED for anything this service did not hand out."""
    if raw is None:
        return None
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        text = ""
    found = _CURSOR.match(text)
    if found is None or not raw.isascii() or int(found.group(1)) > MAX_MICROS:
        raise validation_failed(f"cursor {raw[:64]!r} is not a cursor this service handed out")
    return int(found.group(1)), found.group(2)


def visible_query(caller: ApiKey, *, limit: int, statuses: Sequence[str] | None, created_after: str | None,
                  created_before: str | None, cursor: str | None, workflow_id: int | None = None,
                  workflow_name: str | None = None, error_codes: Sequence[str] | None = None) -> RunQuery:
    """The query of one page: the key's scope, its own runs unless it sees all, and the filters."""
    if workflow_name is not None and "\x00" in workflow_name:
        raise validation_failed("workflow must not contain a NUL character (no workflow name does)")
    return RunQuery(
        limit=limit,
        owner_key_id=None if caller.sees_all_runs else caller.id,
        scope_names=tuple(caller.workflow_names),
        scope_ids=tuple(caller.workflow_ids),
        workflow_id=workflow_id,
        workflow_name=workflow_name,
        statuses=tuple(sorted(set(statuses or ()))),
        error_codes=tuple(sorted(set(error_codes or ()))),
        created_after_us=parse_time(created_after, "createdAfter"),
        created_before_us=parse_time(created_before, "createdBefore"),
        before=parse_cursor(cursor),
    )


async def run_page(read_model: ReadModel, query: RunQuery) -> Envelope[RunPage]:
    """One page and the cursor of the next (null on the last page)."""
    rows = await read_model.page(query)
    more = len(rows) > query.limit
    rows = rows[:query.limit]
    return ok(RunPage(items=[list_item(r) for r in rows], next_cursor=encode_cursor(rows[-1]) if more else None))


class RunListController(Controller):
    """Every run the key may see."""

    path = RUNS
    tags = ["runs"]

    @get(operation_id="listRuns", summary="List the runs this API key may see, newest first",
         responses=error_responses(400))
    async def list_runs(
        self, caller: Injected[ApiKey], read_model: Injected[ReadModel], status: StatusFilter = None,
        workflow: WorkflowFilter = None, created_after: CreatedAfter = None, created_before: CreatedBefore = None,
        limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None, error_code: ErrorCodeFilter = None,
    ) -> Envelope[RunPage]:
        """Runs in the key's scope (its own unless it sees all runs), filtered, one page at a time."""
        query = visible_query(caller, limit=limit, statuses=status, created_after=created_after,
                              created_before=created_before, cursor=cursor, workflow_name=workflow,
                              error_codes=error_code)
        return await run_page(read_model, query)


async def workflow_run_page(
    workflow_name: str, caller: ApiKey, catalogue: Catalogue, read_model: ReadModel, *, status: Sequence[str] | None,
    created_after: str | None, created_before: str | None, limit: int, cursor: str | None,
    error_code: Sequence[str] | None = None,
) -> Envelope[RunPage]:
    """One page of a workflow's runs (by name, else numeric id; WORKFLOW_NOT_FOUND outside the key's scope).

    Served by `api.runs.RunController` (the path's POST creates a run; one controller per path).
    """
    entry = visible_workflow(catalogue, caller, workflow_name)
    query = visible_query(caller, limit=limit, statuses=status, created_after=created_after,
                          created_before=created_before, cursor=cursor, workflow_id=entry.workflow_id,
                          error_codes=error_code)
    return await run_page(read_model, query)
