"""Model calls that survive real providers: retried within the visit's budget, each attempt recorded.

The model is the fake OpenAI-compatible server on loopback, speaking the real streaming wire
protocol; the runs are stored on both stores.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from domain import events as ev
from domain.run import RunStatus
from engine.bootstrap import Services
from engine.llm.config import ModelConfig
from projections.sse import render_all
from projections.summary import summarize
from tests.fakes.openai_server import FakeOpenAI
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

KEY_ENV = "FLOWTRAIL_TEST_MODEL_CALLS_KEY"
SECRET = "sk-model-calls-0123456789"
PROMPT = "Write one line about {{topic}}"


@pytest.fixture
async def model_services(fake_openai: FakeOpenAI, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   request: pytest.FixtureRequest) -> AsyncIterator[Services]:
    """Services on the test's store whose models `fake` and `impatient` (quick to time out) are the fake server.

    `pytest.mark.services(...)` overrides engine settings, as for the `services` fixture.
    """
    monkeypatch.setenv(KEY_ENV, SECRET)
    marker = request.node.get_closest_marker("services")
    models = [{"id": "fake", "base_url": fake_openai.base_url, "model": "fake-model", "api_key_env": KEY_ENV,
               "timeout_seconds": 5, "first_token_timeout": 5},
              {"id": "impatient", "base_url": fake_openai.base_url, "model": "fake-model",
               "timeout_seconds": 0.3, "first_token_timeout": 0.3}]
    settings = engine_settings(store, tmp_path / "data", load_demos=False, models=msgspec.convert(models, tuple[ModelConfig, ...]),
                               **(marker.kwargs if marker else {}))
    async with running(settings) as started:
        for model_id in ("fake", "impatient"):
            work = node("work", "llm", model_id=model_id, prompt=PROMPT)
            out = node("out", "output", outputs=[{"name": "line", "value": "{{work.text}}"}])
            asked = node("input", "userInput", inputs=[{"name": "topic"}])
            await started.catalogue.publish(workflow(
                f"{model_id}-flow", [asked, work, out], [edge("input", "work"), edge("work", "out")]))
        yield started


async def run_flow(services: Services, name: str = "fake-flow") -> tuple[RunStatus, list[ev.RunEvent]]:
    run_id = await start(services, name, {"topic": "tides"})
    run = await wait_until(services, run_id)
    return run.status, await events_of(services, run_id)


def attempts(events: list[ev.RunEvent]) -> list[tuple[int, str | None]]:
    return [(call.attempt, call.error_code) for call in of_type(events, ev.ModelCalled)]


def retry_lines(events: list[ev.RunEvent]) -> list[str]:
    return [c.content for c in chunks(events, "status", "work") if c.content.startswith("model call failed")]


@pytest.mark.services(model_retry_max_seconds=2)
async def test_a_429_with_retry_after_is_waited_out_and_the_run_succeeds(model_services, fake_openai):
    fake_openai.will_fail(429, "Rate limit reached for requests", "rate_limit_exceeded", retry_after="1")
    fake_openai.will_stream_text("Tides ", "turn.")
    status, events = await run_flow(model_services)
    assert status is RunStatus.SUCCEEDED
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"line": "Tides turn."}
    assert attempts(events) == [(1, "HTTP_429"), (2, None)]
    assert retry_lines(events) == [
        "model call failed (model endpoint answered 429: rate limited - Rate limit reached for requests); "
        "retrying in 1.00 s (attempt 2; 9 of 10 retries left in this visit)"]
    assert len(fake_openai.requests) == 2


@pytest.mark.services(model_retry_max_seconds=0.5)
async def test_a_retry_after_longer_than_the_longest_wait_fails_at_once_saying_so(model_services, fake_openai):
    fake_openai.will_fail(429, "Slow down", "rate_limit_exceeded", retry_after="120")
    status, events = await run_flow(model_services)
    assert status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error == (
        "model retries exhausted after 1 attempt(s), the endpoint asked to wait 120 s, more than the 0.5 s allowed: "
        "model endpoint answered 429: rate limited - Slow down")
    assert attempts(events) == [(1, "HTTP_429")] and len(fake_openai.requests) == 1


async def test_a_500_then_a_200_succeeds_and_both_calls_are_recorded_with_usage(model_services, fake_openai):
    fake_openai.will_fail(500, "The server had an error while processing your request.")
    fake_openai.will_stream_text("Tides ", "turn.")
    status, events = await run_flow(model_services)
    calls = of_type(events, ev.ModelCalled)
    assert status is RunStatus.SUCCEEDED
    assert [(c.model_id, c.purpose, c.node_id, c.attempt) for c in calls] == [("fake", "node", "work", 1),
                                                                              ("fake", "node", "work", 2)]
    assert [(c.prompt_tokens, c.completion_tokens, c.finish_reason, c.error_code) for c in calls] == [
        (0, 0, "", "HTTP_500"), (11, 7, "stop", None)]
    assert all(c.latency_ms > 0 for c in calls)
    assert calls[0].prompt_sha256 == calls[1].prompt_sha256 and len(calls[0].prompt_sha256) == 64
    assert fake_openai.requests[1].body["stream_options"] == {"include_usage": True}
    assert len(retry_lines(events)) == 1


async def test_a_model_that_hangs_is_timed_out_and_asked_again(model_services, fake_openai):
    fake_openai.will_hang_before_headers()
    fake_openai.will_stream_text("Awake ", "now.")
    status, events = await run_flow(model_services, "impatient-flow")
    assert status is RunStatus.SUCCEEDED
    assert attempts(events) == [(1, "TIMEOUT"), (2, None)]
    assert retry_lines(events)[0].startswith("model call failed (model call timed out: model 'impatient' sent no first token")


async def test_a_stream_broken_mid_way_is_asked_again_and_its_partial_text_is_dropped(model_services, fake_openai):
    fake_openai.will_break_after("Half ", "a ")
    fake_openai.will_stream_text("Tides ", "turn.")
    status, events = await run_flow(model_services)
    assert status is RunStatus.SUCCEEDED
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"line": "Tides turn."}
    assert attempts(events) == [(1, "STREAM_BROKEN"), (2, None)]


@pytest.mark.services(model_retry_budget=2)
async def test_a_spent_budget_fails_the_visit_with_a_retries_exhausted_error(model_services, fake_openai):
    fake_openai.will_fail(503, "overloaded")
    status, events = await run_flow(model_services)
    error = of_type(events, ev.VisitFailed)[0].error
    assert status is RunStatus.FAILED
    assert error == ("model retries exhausted after 3 attempt(s), the retry budget of 2 is spent: "
                     "model endpoint answered 503: service unavailable - overloaded")
    assert attempts(events) == [(1, "HTTP_503"), (2, "HTTP_503"), (3, "HTTP_503")]
    assert [line.split("(attempt ")[1] for line in retry_lines(events)] == [
        "2; 1 of 2 retries left in this visit)", "3; 0 of 2 retries left in this visit)"]
    assert of_type(events, ev.RunFailed)[0].error == f"node 'work' failed: {error}"


async def test_a_client_error_is_not_retried(model_services, fake_openai):
    fake_openai.will_fail(400, "messages must not be empty", "invalid_request_error")
    status, events = await run_flow(model_services)
    assert status is RunStatus.FAILED
    assert attempts(events) == [(1, "HTTP_400")] and retry_lines(events) == []


@pytest.mark.services(model_retry_budget=1)
async def test_model_call_retries_and_re_formats_spend_one_budget(model_services, fake_openai):
    work = node("work", "llm", model_id="fake", reformat_model_id="fake", prompt="Pick a title",
                runtimeMaxRetries=2, formatMaxRetries=2, outputs=[{"name": "title", "type": "string", "required": True}])
    await model_services.catalogue.publish(workflow("shared-flow", [work, node("out", "output")], [edge("work", "out")]))
    fake_openai.will_fail(500, "hiccup")
    fake_openai.will_stream_text("Prose, not JSON.")
    status, events = await run_flow(model_services, "shared-flow")
    assert status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error.startswith(
        "retry budget exhausted: the answer still fails validation, and the visit has spent all 1 of its retries")
    assert attempts(events) == [(1, "HTTP_500"), (2, None)]


async def test_model_calls_are_gaps_in_the_stream_ids_and_their_tokens_are_the_runs_totals(model_services, fake_openai):
    fake_openai.will_fail(500, "hiccup")
    fake_openai.will_stream_text("Tides ", "turn.")
    status, events = await run_flow(model_services)
    positions = {c.originator_version for c in of_type(events, ev.ModelCalled)}
    ids = [message.id for message in render_all(events)]
    summary = summarize(events)
    assert status is RunStatus.SUCCEEDED
    assert positions and not positions & set(ids)
    assert summary.last_sse_id == ids[-1] and summary.last_event_id == events[-1].originator_version
    assert (summary.prompt_tokens, summary.completion_tokens) == (11, 7)
    assert not any(SECRET in repr(event) or "Write one line" in repr(event) for event in of_type(events, ev.ModelCalled))
