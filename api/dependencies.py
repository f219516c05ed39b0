"""What handlers receive, by name: the service parts they use, the caller's key (counted against its
request rate), the visible run, the per-key limits.

Handlers name the one piece they need (`runs`, `catalogue`, `engine`, ...); none receives the
whole `Services`. A run in the path is resolved and checked against the caller's key here, once.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias, TypeVar
from uuid import UUID

from litestar import Request
from litestar.di import Dependency, Provide
from litestar.params import PathParameter, SkipValidationMarker

from api.access_log import CALLER_KEY_ID
from api.errors import ApiError
from api.limits import KeyLimits
from api.schemas import RUN_ID_DESCRIPTION, WORKFLOW_NAME_DESCRIPTION
from domain.catalogue import WorkflowEntry
from engine.access import ApiKey, KeyRing, may_use, reaches
from engine.bootstrap import Services
from engine.catalogue import Catalogue, WorkflowNotFound, numeric_id
from engine.execution import RunExecutor
from engine.runs.hot import HotRun
from engine.runs.service import RunNotFound, RunService

T = TypeVar("T")
Injected: TypeAlias = Annotated[T, SkipValidationMarker(), Dependency(kind="named")]
"""A service part injected by its parameter's name; not validated (it is ours, and may be a test's stand-in)."""


def parse_run_id(raw: str) -> UUID:
    """A run id is 32 hex characters (a UUID); anything else is a 400."""
    try:
        if len(raw) not in (32, 36):
            raise ValueError(raw)
        return UUID(hex=raw)
    except ValueError:
        raise ApiError("VALIDATION_FAILED", f"runId {raw[:64]!r} is not a valid run id (32 hex characters)") from None


def require_engine(engine: RunExecutor | None) -> RunExecutor:
    """The engine that executes runs; 503 when this server has none."""
    if engine is None:
        raise ApiError("ENGINE_UNAVAILABLE", "this server does not execute runs; try again later")
    return engine


class RunAccess:
    """Finds runs for a caller: only runs in the key's scope that it created (or it sees all), and (when named) of the path's workflow."""

    def __init__(self, runs: RunService, catalogue: Catalogue) -> None:
        self.runs = runs
        self.catalogue = catalogue

    async def visible(self, key: ApiKey, run_id: str, workflow: str | None, *, first_page: bool = False) -> HotRun:
        """The run, if it exists, is in the key's scope, is the key's own (or the key sees all runs) and
        (when given) belongs to that workflow.

        The workflow segment is resolved as on create (name first, then a pure-digit id) and the
        resolved workflow is compared with the run's, never the path's text.
        With `first_page`, a cold run is returned while it is still being loaded (for streams).
        """
        hot = await self.runs.hot(parse_run_id(run_id), first_page=first_page)
        created = hot.summary.created
        if not reaches(key, created):
            raise RunNotFound(run_id)
        if workflow is not None and not self._names(workflow, created.workflow_name, created.workflow_id):
            raise RunNotFound(run_id)
        return hot

    def _names(self, segment: str, run_workflow: str, run_workflow_id: int | None) -> bool:
        """True when the segment resolves to the run's workflow: a name first, then a pure-digit id.

        The names are the catalogue's and the run's own (a workflow another process published).
        """
        published = self.catalogue.named(segment)
        if published is not None:
            return published.workflow_id == run_workflow_id
        if segment == run_workflow:
            return True
        return run_workflow_id is not None and numeric_id(segment) == run_workflow_id


def visible_workflow(catalogue: Catalogue, key: ApiKey, name_or_id: str) -> WorkflowEntry:
    """The workflow by name, then numeric id, if the key may use it; WorkflowNotFound otherwise."""
    entry = catalogue.find(name_or_id)
    if not may_use(key, entry.name, entry.workflow_id):
        raise WorkflowNotFound(name_or_id)
    return entry


# Litestar counts a dependency's path parameter as consumed only when its name is the path's own
# (an alias given with PathParameter(name=...) is documented twice), hence the camelCase names.
RunIdSegment = Annotated[str, PathParameter(description=RUN_ID_DESCRIPTION)]
WorkflowNameSegment = Annotated[str, PathParameter(description=WORKFLOW_NAME_DESCRIPTION)]


async def run_in_workflow(
    caller: Injected[ApiKey], run_access: Injected[RunAccess], workflowName: WorkflowNameSegment, runId: RunIdSegment,
) -> HotRun:
    """`{workflowName}/runs/{runId}`: the run, visible to the caller and of that workflow."""
    return await run_access.visible(caller, runId, workflowName)


async def run_by_id(caller: Injected[ApiKey], run_access: Injected[RunAccess], runId: RunIdSegment) -> HotRun:
    """`/runs/{runId}`: the run, visible to the caller (run ids are global)."""
    return await run_access.visible(caller, runId, None)


def service_dependencies(services: Services) -> dict[str, Provide]:
    """The app-wide dependencies over one set of services."""

    def engine() -> RunExecutor:
        return require_engine(services.engine)

    def optional_engine() -> RunExecutor | None:
        return services.engine

    async def caller(request: Request[Any, Any, Any]) -> ApiKey:
        key = keys.authenticate(request.headers.get("x-api-key"))
        request.state[CALLER_KEY_ID] = key.id  # the access log's key id, so it need not authenticate again
        limits.admit(key)
        return key

    keys: KeyRing = services.keys
    limits = KeyLimits(services.settings.limits)
    access = RunAccess(services.runs, services.catalogue)
    parts: dict[str, Any] = {
        "settings": services.settings, "runs": services.runs, "catalogue": services.catalogue, "keys": keys,
        "workspace": services.workspace, "context": services.context, "tokens": services.tokens,
        "store_kind": services.store.location.kind, "run_access": access,
        "read_model": services.read_model, "limits": limits, "eraser": services.eraser,
        "webhooks": services.webhooks,
    }
    provided = {name: Provide(_constant(value), use_cache=True, sync_to_thread=False) for name, value in parts.items()}
    provided["engine"] = Provide(engine, sync_to_thread=False)
    provided["optional_engine"] = Provide(optional_engine, sync_to_thread=False)
    provided["caller"] = Provide(caller)
    return provided


def _constant(value: Any) -> Any:
    def provide() -> Any:
        return value

    return provide
