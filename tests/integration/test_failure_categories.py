"""A failed run records the category of its failure, on both stores: one code of a closed list for each way a run
fails, on the run's `RunFailed` and the visit's `VisitFailed`, and the failure's text names no address."""

from __future__ import annotations

import pytest

from domain import events as ev
from domain.failures import FAILURE_CODES
from domain.run import RunStatus
from engine.llm.config import ModelConfig
from tests.support.engine_runs import (
    edge,
    engine_settings,
    events_of,
    node,
    running,
    start,
    text_turn,
    wait_until,
    workflow,
)
from tests.support.server import free_port

pytestmark = pytest.mark.services(load_demos=False, node_timeout_seconds=5, max_agent_iterations=2)

OUT = node("out", "output", outputs=[{"name": "result", "value": "{{work.text}}"}])


async def failed_with(services, work: dict, *, out: dict = OUT) -> tuple[ev.RunFailed, list[ev.VisitFailed]]:
    """Run input -> work -> out to its end; its RunFailed and its VisitFailed events."""
    await services.catalogue.publish(workflow("one-node", [node("input", "userInput"), work, out],
                                              [edge("input", work["id"]), edge(work["id"], out["id"])]))
    run_id = await start(services, "one-node", {"topic": "tides"})
    assert (await wait_until(services, run_id)).status is RunStatus.FAILED
    events = await events_of(services, run_id)
    return next(e for e in events if isinstance(e, ev.RunFailed)), [e for e in events if isinstance(e, ev.VisitFailed)]


@pytest.mark.parametrize(("work", "code"), [
    (node("work", "llm", model_id="scripted", prompt="Use {{input.summary}}"), "VALIDATION_FAILED"),
    (node("work", "llm", model_id="scripted", runtimeMaxRetries=0, formatMaxRetries=0,
          outputs=[{"name": "title", "type": "string", "required": True}], script=[text_turn("prose")]), "OUTPUT_INVALID"),
    (node("work", "agent", model_id="scripted", script=[[{"fail": "upstream exploded"}]]), "MODEL_UNAVAILABLE"),
    (node("work", "agent", model_id="scripted", timeoutSeconds=0.2, script=[[{"hang": None}]]), "NODE_TIMEOUT"),
    (node("work", "agent", model_id="scripted", tools=["web_search"],
          script=[[{"tool_call": {"name": "web_search", "arguments": {"query": "x"}}}]] * 3), "BUDGET_EXHAUSTED"),
])
async def test_each_way_a_visit_fails_gives_the_run_and_the_visit_its_own_code(services, work, code):
    failed, visits = await failed_with(services, work)
    assert (failed.error_code, [v.error_code for v in visits]) == (code, [code])


async def test_a_run_whose_output_nodes_were_all_skipped_fails_as_EMPTY_RESULT(services):
    await services.catalogue.publish(workflow("skipped", [
        node("input", "userInput"), node("out", "output", outputs=[{"name": "x", "value": "1"}]),
    ], [edge("input", "out", condition="1 == 2")]))
    run_id = await start(services, "skipped")
    await wait_until(services, run_id)
    [failed] = [e for e in await events_of(services, run_id) if isinstance(e, ev.RunFailed)]
    assert (failed.error, failed.error_code) == ("no output node ran (every output node was skipped)", "EMPTY_RESULT")


async def test_a_run_past_its_time_limit_fails_as_RUN_TIMEOUT_and_its_open_visit_too(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data", load_demos=False, run_timeout_seconds=1.0)
    async with running(settings) as services:
        failed, visits = await failed_with(services, node("work", "llm", model_id="scripted", script=[[{"hang": None}]]))
    assert (failed.error_code, [v.error_code for v in visits]) == ("RUN_TIMEOUT", ["RUN_TIMEOUT"])


async def test_a_model_that_cannot_be_reached_fails_as_MODEL_UNAVAILABLE_without_naming_its_address(store, tmp_path):
    port = free_port()
    model = ModelConfig(id="gone", base_url=f"http://127.0.0.1:{port}/v1", model="m")
    settings = engine_settings(store, tmp_path / "data", load_demos=False, models=(model,), model_retry_budget=0)
    async with running(settings) as services:
        failed, visits = await failed_with(services, node("work", "llm", model_id="gone"))
    assert failed.error_code == "MODEL_UNAVAILABLE"
    assert "could not reach model 'gone' at [address] (ConnectError)" in failed.error
    assert all("127.0.0.1" not in text and str(port) not in text for text in [failed.error, visits[0].error])


def test_the_closed_list_holds_the_categories_the_issue_and_the_seed_name():
    assert set(FAILURE_CODES) == {
        "VALIDATION_FAILED", "OUTPUT_INVALID", "MODEL_UNAVAILABLE", "BUDGET_EXHAUSTED", "NODE_TIMEOUT", "RUN_TIMEOUT",
        "REMOTE_FAILED", "REMOTE_OUTCOME_UNKNOWN", "INTERRUPTED", "EMPTY_RESULT", "STORE_UNAVAILABLE", "RUN_CANCELLED",
        "INTERNAL_ERROR", "RUN_FAILED",
    }


async def test_a_run_table_of_an_earlier_version_gets_the_new_column_and_its_rows_rebuilt_at_start(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data", load_demos=False)
    async with running(settings) as services:
        failed, _ = await failed_with(services, node("work", "llm", model_id="scripted", prompt="Use {{input.x}}"))
        rows = services.read_model.rows
        with rows.recorder.datastore.transaction(commit=True) as curs:  # the table as an earlier version left it
            curs.execute(f"ALTER TABLE {rows.table} DROP COLUMN waiting_us")
            curs.execute(f"UPDATE {rows.table} SET error_code = 'RUN_FAILED'")
    async with running(settings) as services:
        row = await services.read_model.row(failed.originator_id)
    assert row is not None and row.error_code == "VALIDATION_FAILED"
