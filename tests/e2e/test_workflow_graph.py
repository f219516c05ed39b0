"""GET /workflows/{workflowName}/graph: the nodes and edges of a workflow the key may use, as the viewer draws them."""

from __future__ import annotations

import pytest

from tests.support.api import DEMO_KEY, SCOPED_KEY


async def test_a_workflows_graph_lists_its_nodes_and_edges_in_definition_order(api):
    definition = api.services.catalogue.find("report-pipeline").definition
    async with api.client(key=DEMO_KEY) as client:
        response = await client.get("/api/v1/workflows/report-pipeline/graph")
    assert response.status_code == 200, response.text
    graph = response.json()["data"]
    assert (graph["workflowName"], graph["mode"], graph["startNodeId"]) == ("report-pipeline", definition.mode,
                                                                            definition.start_node_id)
    assert [(n["id"], n["type"], n["label"]) for n in graph["nodes"]] == [
        (n.id, n.type, n.label or n.id) for n in definition.nodes]
    assert [(e["source"], e["target"], e["condition"]) for e in graph["edges"]] == [
        (e.source, e.target, e.condition) for e in definition.edges]


@pytest.mark.parametrize("workflow", ["military-analyze-agent", "no-such-workflow"])
async def test_the_graph_of_a_workflow_outside_the_keys_scope_is_not_found(api, workflow):
    async with api.client(key=SCOPED_KEY) as client:
        response = await client.get(f"/api/v1/workflows/{workflow}/graph")
    assert (response.status_code, response.json()["code"]) == (404, "WORKFLOW_NOT_FOUND")
