"""The OpenAI-compatible provider against a fake server speaking the real streaming wire format."""

import asyncio
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from engine.llm import (
    CompletionRequest,
    Finished,
    LlmCancelled,
    LlmError,
    LlmHttpError,
    LlmStreamBroken,
    LlmTimeout,
    LlmUnreachable,
    Message,
    ModelConfig,
    ModelRegistry,
    OpenAIProvider,
    ReasoningDelta,
    ScriptedProvider,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    UnknownModel,
    Usage,
)
from tests.fakes.openai_server import Reply, chunk_frame, text_frames

KEY_ENV = "FLOWTRAIL_TEST_OPENAI_KEY"
SECRET = "sk-test-0123456789abcdef"
SEARCH = ToolSpec("search", "Search the workspace.", {"type": "object", "properties": {"q": {"type": "string"}}})


@pytest.fixture
async def connect(fake_openai, monkeypatch):
    """Build providers pointed at the fake server; all are closed after the test."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    made: list[OpenAIProvider] = []

    def build(**overrides) -> OpenAIProvider:
        fields = dict(id="fake", base_url=fake_openai.base_url, model="fake-model",
                      api_key_env=KEY_ENV, timeout_seconds=5, first_token_timeout=5)
        made.append(OpenAIProvider(ModelConfig(**{**fields, **overrides})))
        return made[-1]

    yield build
    for provider in made:
        await provider.aclose()


def ask(*, tools=(), **kw) -> CompletionRequest:
    return CompletionRequest(messages=[Message("user", "hello")], tools=list(tools), **kw)


async def chunks_of(provider, request=None, **kw) -> list:
    return [chunk async for chunk in provider.stream(request or ask(), **kw)]


async def test_text_arrives_piece_by_piece_then_usage_then_finished_stop(fake_openai, connect):
    fake_openai.will_stream_text("Hel", "lo, ", "world")
    chunks = await chunks_of(connect())
    assert chunks == [TextDelta("Hel"), TextDelta("lo, "), TextDelta("world"),
                      Usage(prompt_tokens=11, completion_tokens=7), Finished("stop")]


async def test_reasoning_content_arrives_as_reasoning_deltas(fake_openai, connect):
    fake_openai.will_stream_text("42", reasoning=("Let me ", "think."))
    chunks = await chunks_of(connect())
    assert chunks[:3] == [ReasoningDelta("Let me "), ReasoningDelta("think."), TextDelta("42")]


async def test_tool_call_fragments_are_assembled_into_whole_calls(fake_openai, connect):
    fake_openai.will_call_tools(
        ("call_a", "search", ['{"q":', ' "inv', 'oices"}']),
        ("call_b", "search", ['{"q": "receipts"}']),
    )
    chunks = await chunks_of(connect(), ask(tools=[SEARCH]))
    assert [c for c in chunks if isinstance(c, ToolCallReady)] == [
        ToolCallReady(ToolCall("call_a", "search", '{"q": "invoices"}')),
        ToolCallReady(ToolCall("call_b", "search", '{"q": "receipts"}')),
    ]
    assert chunks[-1] == Finished("tool_calls")


async def test_complete_collects_the_stream(fake_openai, connect):
    fake_openai.will_stream_text("all ", "of ", "it")
    completion = await connect().complete(ask())
    assert (completion.text, completion.finish_reason) == ("all of it", "stop")
    assert completion.usage == Usage(11, 7)


async def test_the_request_is_a_streaming_chat_completion_in_openai_form(fake_openai, connect):
    fake_openai.will_stream_text("ok")
    request = CompletionRequest(
        messages=[
            Message("system", "be brief"),
            Message("assistant", None, tool_calls=[ToolCall("call_1", "search", '{"q":"x"}')]),
            Message("tool", "found x", tool_call_id="call_1"),
        ],
        tools=[SEARCH], temperature=0.2, max_tokens=64, response_format_json=True,
    )
    await connect().complete(request)
    sent = fake_openai.requests[-1]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.body["model"] == "fake-model"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["tools"] == [{"type": "function", "function": {
        "name": "search", "description": "Search the workspace.", "parameters": SEARCH.parameters}}]
    assert sent.body["messages"][1]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}]
    assert sent.body["messages"][2] == {"role": "tool", "content": "found x", "tool_call_id": "call_1"}
    assert (sent.body["temperature"], sent.body["max_tokens"]) == (0.2, 64)
    assert sent.body["response_format"] == {"type": "json_object"}


async def test_a_request_model_overrides_the_configured_model_name(fake_openai, connect):
    await connect().complete(ask(model="other-model"))
    assert fake_openai.requests[-1].body["model"] == "other-model"


async def test_authorization_uses_the_env_var_value_read_at_call_time(fake_openai, connect, monkeypatch):
    provider = connect()
    await provider.complete(ask())
    monkeypatch.setenv(KEY_ENV, "sk-rotated-key-9999")
    await provider.complete(ask())
    assert [r.headers["authorization"] for r in fake_openai.requests] == [
        f"Bearer {SECRET}", "Bearer sk-rotated-key-9999"]


async def test_the_key_never_appears_in_repr_or_in_error_messages(fake_openai, connect):
    provider = connect(base_url=fake_openai.base_url.replace("http://", "http://user:pw@"))
    fake_openai.will_fail(401, f"Incorrect API key provided: {SECRET}.", "invalid_request_error")
    with pytest.raises(LlmHttpError) as failure:
        await provider.complete(ask())
    for text in (repr(provider), str(failure.value), failure.value.body_excerpt, repr(failure.value)):
        assert SECRET not in text and "pw" not in text
    assert "model endpoint answered 401" in str(failure.value)


async def test_a_missing_key_variable_is_named_in_a_clear_error(connect, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LlmError, match=KEY_ENV):
        await connect().complete(ask())


async def test_a_429_is_a_retryable_client_error_saying_rate_limited(fake_openai, connect):
    fake_openai.will_fail(429, "Rate limit reached for requests", "rate_limit_exceeded")
    with pytest.raises(LlmHttpError) as failure:
        await connect().complete(ask())
    error = failure.value
    assert (error.status, error.is_client_error, error.is_server_error, error.retryable) == (429, True, False, True)
    assert str(error) == "model endpoint answered 429: rate limited - Rate limit reached for requests"


async def test_a_400_is_a_client_error_not_worth_retrying(fake_openai, connect):
    fake_openai.will_fail(400, "messages must not be empty", "invalid_request_error")
    with pytest.raises(LlmHttpError) as failure:
        await connect().complete(ask())
    assert failure.value.is_client_error and not failure.value.retryable
    assert "messages must not be empty" in str(failure.value)


async def test_a_500_is_a_server_error_with_the_body_excerpt(fake_openai, connect):
    fake_openai.will_fail(500, "The server had an error while processing your request.")
    with pytest.raises(LlmHttpError) as failure:
        await connect().complete(ask())
    assert failure.value.is_server_error and failure.value.retryable
    assert str(failure.value).startswith("model endpoint answered 500: server error - The server had")


async def test_a_wrong_base_url_answers_404_with_a_hint(fake_openai, connect):
    with pytest.raises(LlmHttpError, match="404: not found .check base_url and model."):
        await connect(base_url=fake_openai.base_url + "/oops").complete(ask())


async def test_no_first_token_in_time_is_a_timeout(fake_openai, connect):
    fake_openai.will_hang_before_headers()
    started = time.monotonic()
    with pytest.raises(LlmTimeout, match="no first token within 0.3s"):
        await connect(first_token_timeout=0.3).complete(ask())
    assert time.monotonic() - started < 2


async def test_a_stream_that_goes_silent_is_a_timeout(fake_openai, connect):
    fake_openai.will_hang_after("partial ")
    seen = []
    with pytest.raises(LlmTimeout):
        async for chunk in connect(timeout_seconds=0.3).stream(ask()):
            seen.append(chunk)
    assert seen == [TextDelta("partial ")]


async def test_a_dropped_connection_mid_stream_is_a_broken_stream(fake_openai, connect):
    fake_openai.will_break_after("half ", "an ")
    seen = []
    with pytest.raises(LlmStreamBroken):
        async for chunk in connect().stream(ask()):
            seen.append(chunk)
    assert seen == [TextDelta("half "), TextDelta("an ")]


async def test_a_body_that_ends_without_done_or_finish_is_a_broken_stream(fake_openai, connect):
    fake_openai.will_end_without_done("cut ", "short")
    with pytest.raises(LlmStreamBroken, match=r"without \[DONE\] or a finish_reason"):
        await connect().complete(ask())


async def test_a_lost_done_after_the_finish_reason_still_completes(fake_openai, connect):
    fake_openai.will_reply(Reply(text_frames("complete") + [chunk_frame({}, "stop")], ending="break"))
    completion = await connect().complete(ask())
    assert (completion.text, completion.finish_reason) == ("complete", "stop")


async def test_a_garbage_frame_is_a_broken_stream(fake_openai, connect):
    fake_openai.will_send_garbage_after("fine so far")
    with pytest.raises(LlmStreamBroken, match="malformed frame"):
        await connect().complete(ask())


async def test_an_error_frame_mid_stream_is_an_http_error(fake_openai, connect):
    error = {"error": {"message": "context length exceeded", "code": 400}}
    fake_openai.will_reply(Reply(text_frames("a") + [error]))
    with pytest.raises(LlmHttpError, match="400: bad request - context length exceeded"):
        await connect().complete(ask())


async def test_cancel_between_chunks_stops_the_stream(fake_openai, connect):
    fake_openai.will_stream_text("one ", "two ", "three")
    cancel = asyncio.Event()
    seen = []
    with pytest.raises(LlmCancelled):
        async for chunk in connect().stream(ask(), cancel=cancel):
            seen.append(chunk)
            cancel.set()
    assert seen == [TextDelta("one ")]


async def test_cancel_while_the_server_is_silent_ends_the_stream_promptly(fake_openai, connect):
    fake_openai.will_hang_after("waiting ")
    cancel = asyncio.Event()
    seen = []
    started = time.monotonic()
    with pytest.raises(LlmCancelled):
        async for chunk in connect().stream(ask(), cancel=cancel):
            seen.append(chunk)
            asyncio.get_running_loop().call_later(0.1, cancel.set)
    assert time.monotonic() - started < 2
    assert seen == [TextDelta("waiting ")]
    assert not asyncio.current_task().cancelling()


async def test_an_already_set_cancel_sends_no_request(fake_openai, connect):
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(LlmCancelled):
        await connect().complete(ask(), cancel=cancel)
    assert fake_openai.requests == []


async def test_the_provider_still_works_after_a_cancelled_stream(fake_openai, connect):
    provider = connect()
    fake_openai.will_hang_after("x")
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, cancel.set)
    with pytest.raises(LlmCancelled):
        await provider.complete(ask(), cancel=cancel)
    fake_openai.will_stream_text("again")
    assert (await provider.complete(ask())).text == "again"


async def test_an_unreachable_endpoint_is_a_clear_retryable_error(connect):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(LlmUnreachable, match="could not reach model 'fake'") as failure:
        await connect(base_url=f"http://127.0.0.1:{port}/v1").complete(ask())
    assert (failure.value.retryable, failure.value.code) == (True, "CONNECTION")


@pytest.mark.parametrize(("header", "seconds"), [("7", 7.0), (None, None), ("soon", None)])
async def test_a_429_carries_the_wait_its_retry_after_header_asks_for(fake_openai, connect, header, seconds):
    fake_openai.will_fail(429, "Rate limit reached for requests", "rate_limit_exceeded", retry_after=header)
    with pytest.raises(LlmHttpError) as failure:
        await connect().complete(ask())
    assert (failure.value.retry_after, failure.value.code) == (seconds, "HTTP_429")


async def test_a_retry_after_given_as_an_http_date_is_the_seconds_until_then(fake_openai, connect):
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    fake_openai.will_fail(503, "overloaded", retry_after=when)
    with pytest.raises(LlmHttpError) as failure:
        await connect().complete(ask())
    assert failure.value.retry_after is not None and 25 <= failure.value.retry_after <= 30


# ---- the registry ----------------------------------------------------------------------


async def test_the_registry_always_offers_scripted_and_defaults_to_it_when_nothing_is_configured():
    registry = ModelRegistry()
    assert registry.model_ids == ["scripted"]
    assert registry.default_model_id == "scripted"
    assert isinstance(registry.provider_for(), ScriptedProvider)


async def test_the_registry_serves_configured_models_and_defaults_to_the_first(fake_openai, connect):
    configs = [ModelConfig("fast", fake_openai.base_url, "m1"), ModelConfig("slow", fake_openai.base_url, "m2")]
    registry = ModelRegistry(configs)
    try:
        assert registry.default_model_id == "fast"
        assert isinstance(registry.provider_for("slow"), OpenAIProvider)
        assert isinstance(registry.provider_for("scripted"), ScriptedProvider)
        assert (await registry.provider_for().complete(ask())).text == "ok"
        assert fake_openai.requests[-1].body["model"] == "m1"
        with pytest.raises(UnknownModel, match="'nope'"):
            registry.provider_for("nope")
    finally:
        await registry.aclose()


async def test_the_registry_refuses_duplicate_reserved_or_unknown_default_ids():
    config = ModelConfig("a", "http://127.0.0.1:9/v1", "m")
    with pytest.raises(ValueError):
        ModelRegistry([config, config])
    with pytest.raises(ValueError):
        ModelRegistry([ModelConfig("scripted", "http://127.0.0.1:9/v1", "m")])
    with pytest.raises(ValueError):
        ModelRegistry([config], default_model_id="b")
