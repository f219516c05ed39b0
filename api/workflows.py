"""GET /api/v1/workflows and /workflows/{workflowName}: the workflows the caller's key may use."""

from __future__ import annotations

from litestar import Controller, get

from api.dependencies import Injected, visible_workflow
from api.envelope import Envelope, ok
from api.openapi import error_responses
from api.paths import WORKFLOWS
from api.schemas import (
    GraphEdgeView,
    GraphNodeView,
    WorkflowGraph,
    WorkflowInputView,
    WorkflowNameInPath,
    WorkflowOutputView,
    WorkflowView,
)
from domain.catalogue import WorkflowEntry
from domain.workflow import workflow_inputs, workflow_outputs
from engine.access import ApiKey, may_use
from engine.catalogue import Catalogue


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


def graph_view(entry: WorkflowEntry) -> WorkflowGraph:
    """The workflow's nodes and edges as the run viewer draws them."""
    definition = entry.definition
    return WorkflowGraph(
        workflow_name=entry.name,
        version=entry.version,
        mode=definition.mode,
        start_node_id=definition.start_node_id,
        nodes=[GraphNodeView(id=n.id, type=n.type, label=n.label or n.id) for n in definition.nodes],
        edges=[GraphEdgeView(source=e.source, target=e.target, condition=e.condition) for e in definition.edges],
    )


class WorkflowController(Controller):
    """The workflow catalogue as one key sees it."""

    path = WORKFLOWS
    tags = ["workflows"]

    @get(
        operation_id="listWorkflows",
        summary="List the workflows this API key may use",
        responses=error_responses(),
    )
    async def list_workflows(
        self, caller: Injected[ApiKey], catalogue: Injected[Catalogue]
    ) -> Envelope[list[WorkflowView]]:
        """Every workflow in the key's scope, with its declared inputs and outputs."""
        entries = [e for e in catalogue.all() if may_use(caller, e.name, e.workflow_id)]
        return ok([workflow_view(e) for e in entries])

    @get(
        "/{workflowName:str}",
        operation_id="getWorkflow",
        summary="One workflow this API key may use",
        responses=error_responses(404),
    )
    async def get_workflow(
        self, workflow_name: WorkflowNameInPath, caller: Injected[ApiKey], catalogue: Injected[Catalogue]
    ) -> Envelope[WorkflowView]:
        """The workflow by name, else numeric id, as listWorkflows shows it; 404 WORKFLOW_NOT_FOUND outside the key's scope."""
        return ok(workflow_view(visible_workflow(catalogue, caller, workflow_name)))

    @get(
        "/{workflowName:str}/graph",
        operation_id="getWorkflowGraph",
        summary="The nodes and edges of a workflow this API key may use",
        responses=error_responses(404),
    )
    async def get_workflow_graph(
        self, workflow_name: WorkflowNameInPath, caller: Injected[ApiKey], catalogue: Injected[Catalogue]
    ) -> Envelope[WorkflowGraph]:
        """The current version's graph (what the run viewer draws); 404 WORKFLOW_NOT_FOUND outside the key's scope."""
        return ok(graph_view(visible_workflow(catalogue, caller, workflow_name)))
