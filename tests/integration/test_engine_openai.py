"""An agent node through the OpenAI-compatible provider, against the fake server's real wire format."""

from __future__ import annotations

import msgspec
import pytest

from domain import events as ev
from domain.run import RunStatus
from engine.llm.config import ModelConfig
from tests.support.engine_runs import (
    chunks,
    edge,
    engine_settings,
    events_of,
    node,
    of_type,
    running,
    start,
    wait_until,
    workflow,
)

KEY_ENV = "FLOWTRAIL_TEST_ENGINE_KEY"
SECRET = "sk-engine-test-0123456789"


@pytest.fixture
async def openai_services(fake_openai, tmp_path, monkeypatch):
    """Started services whose models `fake` and `impatient` are the fake OpenAI server; `openai-flow` published."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    models = [{"id": "fake", "base_url": fake_openai.base_url, "model": "fake-model", "api_key_env": KEY_ENV,
               "timeout_seconds": 5, "first_token_timeout": 5},
              {"id": "impatient", "base_url": fake_openai.base_url, "model": "fake-model",
               "timeout_seconds": 0.3, "first_token_timeout": 0.3}]
    settings = engine_settings(f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data", load_demos=False,
                               models=msgspec.convert(models, tuple[ModelConfig, ...]))
    async with running(settings) as services:
        work = node("work", "agent", model_id="fake", tools=["web_search"], prompt="Research {{topic}}")
        out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
        inputs = node("input", "userInput", inputs=[{"name": "topic"}])
        await services.catalogue.publish(workflow("openai-flow", [inputs, work, out],
                                                  [edge("input", "work"), edge("work", "out")]))
        yield services


async def test_an_agent_visit_calls_a_tool_over_the_wire_and_answers(openai_services, fake_openai):
    fake_openai.will_call_tools(("call_a", "web_search", ['{"que', 'ry": "tides"}']))
    fake_openai.will_stream_text("Tides ", "are ", "predictable.", reasoning=("Reading ", "the results."))
    run_id = await start(openai_services, "openai-flow", {"topic": "tides"})
    run = await wait_until(openai_services, run_id)
    events = await events_of(openai_services, run_id)
    second = fake_openai.requests[1].body
    assert run.status is RunStatus.SUCCEEDED
    assert [(c.tool_name, c.content) for c in chunks(events, "tool_call", "work")] == [("web_search", '{"query": "tides"}')]
    assert "".join(c.content for c in chunks(events, "thinking", "work")) == "Reading the results."
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "Tides are predictable."}
    offered = [t["function"]["name"] for t in second["tools"]]
    assert offered[0] == "web_search" and {"get_predecessor_paths", "get_node_output", "get_node_meta"} <= set(offered)
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["tool_call_id"] == "call_a"
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert not any(SECRET in str(event) for event in events)


async def test_a_stream_that_keeps_breaking_over_the_wire_fails_the_visit_cleanly_once_retries_run_out(
        openai_services, fake_openai):
    fake_openai.will_break_after("Tides ", "are")
    run_id = await start(openai_services, "openai-flow", {"topic": "tides"})
    run = await wait_until(openai_services, run_id)
    events = await events_of(openai_services, run_id)
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error.startswith(
        "model retries exhausted after 11 attempt(s), the retry budget of 10 is spent: model stream broke")
    assert [call.error_code for call in of_type(events, ev.ModelCalled)] == ["STREAM_BROKEN"] * 11
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))


async def test_a_model_that_stops_answering_fails_the_visit_with_a_timeout_once_retries_run_out(
        openai_services, fake_openai):
    work = node("work", "llm", model_id="impatient", prompt="Say something")
    await openai_services.catalogue.publish(
        workflow("impatient-flow", [work, node("out", "output")], [edge("work", "out")]))
    fake_openai.will_hang_after("Tides ")
    run_id = await start(openai_services, "impatient-flow")
    await wait_until(openai_services, run_id)
    events = await events_of(openai_services, run_id)
    error = of_type(events, ev.VisitFailed)[0].error
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert error.startswith("model retries exhausted after 11 attempt(s), the retry budget of 10 is spent: model call timed out")
    assert statuses[-1] == f"error: {error}" and all(line.startswith("model call failed") for line in statuses[:-1])
    assert len(statuses) == 11


@pytest.mark.parametrize("type_,extra", [
    ("llm", {}), ("agent", {"tools": ["web_search"]}), ("smartAction", {"actions": ["short", "long"]}),
])
async def test_an_outer_retry_shows_the_node_its_own_answer_and_says_whose_answer_failed(
        openai_services, fake_openai, type_, extra):
    work = node("work", type_, model_id="fake", reformat_model_id="fake", prompt="Pick a title",
                runtimeMaxRetries=1, formatMaxRetries=1, outputs=[{"name": "title", "type": "string", "required": True}],
                **extra)
    await openai_services.catalogue.publish(workflow("retry-flow", [work, node("out", "output")], [edge("work", "out")]))
    for answer in ("My own prose answer.", "Still prose, sorry: no JSON here.",
                   "My second prose answer.", "Still prose, sorry: no JSON here."):
        fake_openai.will_stream_text(answer)
    run_id = await start(openai_services, "retry-flow")
    await wait_until(openai_services, run_id)
    events = await events_of(openai_services, run_id)
    told = fake_openai.requests[2].body["messages"][-1]["content"]
    statuses = [c.content for c in chunks(events, "status", "work")]
    error = of_type(events, ev.VisitFailed)[0].error
    assert [r.body["messages"][-1]["content"].startswith("你是结构化输出整理助手") for r in fake_openai.requests] == [
        False, True, False, True]
    assert told.startswith("Your answer did not pass validation: answer is not JSON: no JSON object found in 'My own prose answer.'")
    assert "Still prose" not in told
    assert fake_openai.requests[2].body["messages"][-2] == {"role": "assistant", "content": "My own prose answer."}
    assert statuses[0] == "node answer: output not valid JSON (answer is not JSON: no JSON object found in 'My own prose answer.'); re-formatting (1/1)"
    assert statuses[1] == (
        "re-format 1/1 answer: output not valid JSON (answer is not JSON: no JSON object found in 'Still prose, sorry: no JSON here.'); "
        "node answer: output not valid JSON (answer is not JSON: no JSON object found in 'My own prose answer.'); re-running the node (1/1)")
    assert statuses[2].startswith("node answer: output not valid JSON (answer is not JSON: no JSON object found in 'My second prose answer.')")
    assert error == (
        "node answer: output not valid JSON: answer is not JSON: no JSON object found in 'My second prose answer.'; "
        "re-format 1/1 answer: output not valid JSON: answer is not JSON: no JSON object found in 'Still prose, sorry: no JSON here.' "
        "(after 1 re-run(s) and 1 re-format(s) per answer)")
    assert statuses[-1] == f"error: {error}"
