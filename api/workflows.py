"""GET /api/v1/workflows: the workflows the caller's key may use."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency

from api.envelope import Envelope, ok
from api.schemas import WorkflowInputView, WorkflowOutputView, WorkflowView, error_responses
from domain.catalogue import WorkflowEntry
from domain.workflow import workflow_inputs, workflow_outputs
from engine.access import may_use
from engine.bootstrap import Services
from engine.catalogue import WorkflowNotFound
from engine.settings import ApiKey


def visible_workflow(services: Services, key: ApiKey, name_or_id: str) -> WorkflowEntry:
    """The workflow by name, then numeric id, if the key may use it; WorkflowNotFound otherwise."""
    entry = services.catalogue.find(name_or_id)
    if not may_use(key, entry.name, entry.workflow_id):
        raise WorkflowNotFound(name_or_id)
    return entry


def workflow_view(entry: WorkflowEntry) -> WorkflowView:
    """One catalogue entry as the API lists it."""
    definition = entry.definition
    return WorkflowView(
        workflow_id=entry.workflow_id,
        workflow_name=entry.name,
        display_name=definition.display_name,
        description=definition.description,
        version=entry.version,
        inputs=[
            WorkflowInputView(name=i.name, type=i.type, required=i.required, description=i.description)
            for i in workflow_inputs(definition)
        ],
        outputs=[
            WorkflowOutputView(name=o.name, type=o.type, description=o.description)
            for o in workflow_outputs(definition)
        ],
    )


class WorkflowController(Controller):
    """The workflow catalogue as one key sees it."""

    path = "/api/v1/workflows"
    tags = ["workflows"]

    @get(
        operation_id="listWorkflows",
        summary="List the workflows this API key may use",
        responses=error_responses(),
    )
    async def list_workflows(
        self, caller: NamedDependency[ApiKey], services: NamedDependency[Services]
    ) -> Envelope[list[WorkflowView]]:
        """Every workflow in the key's scope, with its declared inputs and outputs."""
        entries = [e for e in services.catalogue.all() if may_use(caller, e.name, e.workflow_id)]
        return ok([workflow_view(e) for e in entries])
