"""The agent's context tools against the real service over loopback."""

from __future__ import annotations

import json

from engine.context.tools import ContextToolbox
from tests.support.context_runs import back_edge_run


async def call(box: ContextToolbox, name: str, **arguments) -> dict:
    return json.loads(await box.call(name, arguments))


async def test_the_tools_read_earlier_visits_from_the_real_service_over_loopback(server):
    example = await back_edge_run(server.services)
    token = server.services.tokens.issue(example.run_id, example.asker)
    box = server.services.context_tools.toolbox(example.run_id, example.asker, token)
    try:
        paths = await call(box, "get_predecessor_paths")
        output = await call(box, "get_node_output", node_id="C")
        meta = await call(box, "get_node_meta", visit_uuid="v3", kind="THINKING")
        later = await call(box, "get_node_output", node_id="C", iter_seq=2)
    finally:
        await box.aclose()
    assert paths["backtrackEdgeKeys"] == ["G->C"] and paths["paths"][0]["sequence"] == ["A", "B", "G", "C"]
    assert (output["visitUuid"], output["data"]) == ("c1", {"node": "C"})
    assert meta == {"nodeId": "G", "iterSeq": 1, "visitUuid": "v3", "thinking": ""}
    assert later == {"error": "context query answered 404: node C has no visit with iterSeq 2"}
