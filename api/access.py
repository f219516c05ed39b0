"""Per-request identity and run access: checked on every request, for every run read."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Request
from litestar.di import NamedDependency

from api.errors import ApiError
from engine.access import may_use
from engine.bootstrap import Services
from engine.runs.service import RunNotFound
from engine.settings import ApiKey
from engine.streams.hot import HotRun


async def caller_key(request: Request[Any, Any, Any], services: NamedDependency[Services]) -> ApiKey:
    """The caller's API key, from the X-API-Key header only."""
    return services.keys.authenticate(request.headers.get("x-api-key"))


def parse_run_id(raw: str) -> UUID:
    """A run id is 32 hex characters (a UUID); anything else is a 400."""
    try:
        if len(raw) not in (32, 36):
            raise ValueError(raw)
        return UUID(hex=raw)
    except ValueError:
        raise ApiError(400, "VALIDATION_FAILED", f"runId {raw[:64]!r} is not a valid run id (32 hex characters)") from None


async def visible_run(
    services: Services, key: ApiKey, run_id: str, workflow: str | None, *, first_page: bool = False
) -> HotRun:
    """The run, if it exists, is in the key's scope and (when given) belongs to that workflow.

    With `first_page`, a cold run is returned while it is still being loaded (for streams).
    """
    hot = await services.runs.hot(parse_run_id(run_id), first_page=first_page)
    summary = hot.summary
    if not may_use(key, summary.workflow_name, summary.workflow_id):
        raise RunNotFound(run_id)
    if workflow is not None and workflow not in (summary.workflow_name, str(summary.workflow_id)):
        raise RunNotFound(run_id)
    return hot
