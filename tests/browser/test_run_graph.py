"""The workflow's graph on a run's page: nodes and edges from the definition, coloured by the run, a click opens the cards."""

from __future__ import annotations

from typing import Any

from tests.browser.support import WAIT_MS, both_sizes, create_run, open_ended_run, open_run, shot, sign_in
from tests.support.server import RunningServer


async def test_a_finished_report_draws_every_node_and_edge_and_a_click_opens_the_nodes_card(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id, _ = await open_ended_run(page, viewer_server, "demo-report")
    graph = page.get_by_role("region", name="Workflow graph")
    await graph.locator('.node[data-node-id="report"][data-status="SUCCESS"]').wait_for(timeout=WAIT_MS)
    await both_sizes(page, "graph-report", store)

    nodes = await graph.locator(".node").evaluate_all("nodes => nodes.map(n => [n.dataset.nodeId, n.dataset.status])")
    assert nodes == [[n, "SUCCESS"] for n in ("input", "research", "summary", "key-points", "report")]
    assert await graph.locator(".edge.taken").count() == 5
    assert await graph.locator(".edge.back").count() == 0
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390

    await graph.locator('.node[data-node-id="summary"]').click()
    card = page.locator('.visit[data-node-id="summary"]')
    await page.locator('.visit.picked[data-node-id="summary"] details[open]').wait_for(timeout=WAIT_MS)
    assert await card.evaluate("c => { const r = c.getBoundingClientRect(); return r.top > -1 && r.top < innerHeight; }")
    assert await card.locator(".fields").count() == 1
    await shot(page, "graph-clicked-phone", store)


async def test_an_agentic_run_shows_revisits_its_loop_and_the_planners_path(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id, _ = await open_ended_run(page, viewer_server, "demo-agentic")
    graph = page.get_by_role("region", name="Workflow graph")
    draft = graph.locator('.node[data-node-id="draft"]')
    await graph.locator('.node[data-visits="2"]').wait_for(timeout=WAIT_MS)
    await both_sizes(page, "graph-agentic", store)

    assert await draft.get_attribute("data-visits") == "2"
    assert "×2" in await draft.locator(".node-count").text_content()
    assert await graph.locator(".edge.back").count() == 1
    path = await graph.get_by_role("list", name="The planner's path").locator("li[data-node-id]").all_inner_texts()
    assert path == ["1. Draft", "2. Review", "3. Draft", "4. finish"]
    await graph.get_by_role("button", name="3. Draft").click()
    cards = page.locator('.visit.picked[data-node-id="draft"]')
    assert await cards.count() == 2


async def test_the_node_waiting_for_an_answer_is_marked_live(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-clarify")
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    graph = page.get_by_role("region", name="Workflow graph")
    await graph.locator('.node.live[data-node-id="ask"][data-status="WAITING"]').wait_for(timeout=WAIT_MS)
    await both_sizes(page, "graph-waiting", store)
    assert await graph.locator('.node[data-node-id="result"]').get_attribute("data-status") == ""
    assert await graph.locator(".node.live").count() == 1
