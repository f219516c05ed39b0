"""One log format for the process, its settings, the model-call counter and the access log's key id."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from api.access_log import CALLER_KEY_ID, AccessLog
from engine.llm import CompletionRequest, LlmHttpError, Message, ScriptedProvider
from engine.llm.metered import MeteredProvider, metered
from engine.observability.logs import JsonFormatter, TextFormatter, configure_logging, formatter, uvicorn_logging
from engine.settings import Settings


def record(msg: str = "run %s", *args: object, exc: BaseException | None = None, **extra: object) -> logging.LogRecord:
    exc_info = None if exc is None else (type(exc), exc, exc.__traceback__)
    made = logging.LogRecord("flowtrail.runs", logging.INFO, __file__, 1, msg, args or ("created",), exc_info)
    made.__dict__.update(extra)
    return made


def test_a_json_line_has_ts_level_logger_msg_and_its_context_fields():
    line = json.loads(JsonFormatter().format(record(run_id="ab" * 16, duration_ms=12.5)))
    assert line["level"] == "INFO" and line["logger"] == "flowtrail.runs" and line["msg"] == "run created"
    assert line["ts"].endswith("+00:00")
    assert line["run_id"] == "ab" * 16 and line["duration_ms"] == 12.5
    assert set(line) == {"ts", "level", "logger", "msg", "run_id", "duration_ms"}


def test_a_json_line_carries_an_exception_as_one_field_and_stays_one_line():
    text = JsonFormatter().format(record(exc=ValueError("bad\nthing")))
    assert "\n" not in text
    assert "ValueError: bad" in json.loads(text)["exc"]


def test_a_value_json_cannot_encode_is_written_as_its_text():
    assert json.loads(JsonFormatter().format(record(path=object)))["path"] == str(object)


def test_a_text_line_puts_the_context_fields_after_the_message():
    text = TextFormatter().format(record(run_id="r1", version=2))
    assert text.endswith("INFO flowtrail.runs: run created run_id=r1 version=2")


def test_uvicorns_colour_message_is_not_a_context_field():
    assert "color_message" not in TextFormatter().format(record(color_message="\x1b[1mhi"))


@pytest.fixture
def restored_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_every_logger_of_the_process_writes_through_one_handler_in_the_chosen_format(restored_logging):
    configure_logging("json", "WARNING")
    root = logging.getLogger()
    assert len(root.handlers) == 1 and isinstance(root.handlers[0].formatter, JsonFormatter)
    assert root.level == logging.WARNING
    out = io.StringIO()
    root.handlers[0].setStream(out)
    for name in ("uvicorn.error", "litestar", "flowtrail.access"):
        logging.getLogger(name).warning("from %s", name)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["logger"] for line in lines] == ["uvicorn.error", "litestar", "flowtrail.access"]


def test_at_debug_the_http_clients_still_log_nothing_below_a_warning(restored_logging):
    configure_logging("text", "DEBUG")
    out = io.StringIO()
    logging.getLogger().handlers[0].setStream(out)
    logging.getLogger("httpcore.http11").debug("receive_response_headers.complete return_value=(b'x-secret', ...)")
    logging.getLogger("httpx").info("HTTP Request: POST http://model.internal/v1/chat/completions")
    logging.getLogger("flowtrail.engine").debug("our own debug line")
    assert out.getvalue().count("\n") == 1 and "our own debug line" in out.getvalue()


def test_uvicorn_keeps_the_process_logging_and_leaves_the_access_log_to_flowtrail():
    assert uvicorn_logging("DEBUG") == {"log_config": None, "access_log": False, "log_level": "debug"}
    assert isinstance(formatter("text"), TextFormatter) and isinstance(formatter("json"), JsonFormatter)


def test_the_log_format_and_level_come_from_their_variables(monkeypatch):
    monkeypatch.setenv("FLOWTRAIL_LOG_FORMAT", "json")
    monkeypatch.setenv("FLOWTRAIL_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("FLOWTRAIL_SHUTDOWN_GRACE_SECONDS", "7.5")
    settings = Settings.from_env()
    assert (settings.log_format, settings.log_level, settings.stream.shutdown_grace_seconds) == ("json", "DEBUG", 7.5)


@pytest.mark.parametrize("variable,value,accepted", [
    ("FLOWTRAIL_LOG_FORMAT", "yaml", "text, json"),
    ("FLOWTRAIL_LOG_LEVEL", "loud", "DEBUG, INFO, WARNING, ERROR, CRITICAL"),
])
def test_an_unknown_log_format_or_level_stops_the_start_up_in_one_line(monkeypatch, variable, value, accepted):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as stopped:
        Settings.from_env()
    assert str(stopped.value) == f"{variable}: got {value!r}; accepted: one of {accepted}"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def ask(purpose: str = "node") -> CompletionRequest:
    return CompletionRequest(messages=[Message("user", "go")], purpose=purpose)


async def test_a_metered_call_counts_once_with_the_tokens_the_model_reported():
    labels = {"model": "unit-ok", "purpose": "planner", "outcome": "ok"}
    before = sample("flowtrail_model_calls_total", **labels)
    provider = metered(ScriptedProvider({"planner": [[{"text": "one two three"}]]}), "unit-ok")
    answer = await provider.complete(ask("planner"))
    assert answer.text == "one two three"
    assert sample("flowtrail_model_calls_total", **labels) == before + 1
    assert sample("flowtrail_model_tokens_total", model="unit-ok", kind="completion") > 0
    assert sample("flowtrail_model_tokens_total", model="unit-ok", kind="prompt") > 0


async def test_a_failed_call_counts_as_an_error():
    labels = {"model": "unit-fail", "purpose": "node", "outcome": "error"}
    before = sample("flowtrail_model_calls_total", **labels)
    provider = metered(ScriptedProvider([[{"fail": "melted"}]]), "unit-fail")
    with pytest.raises(LlmHttpError):
        await provider.complete(ask())
    assert sample("flowtrail_model_calls_total", **labels) == before + 1


def test_a_provider_is_metered_once():
    provider = metered(ScriptedProvider(), "m")
    assert isinstance(provider, MeteredProvider) and metered(provider, "m") is provider


async def logged_key_id(scope_state: dict[str, str] | None, caplog: pytest.LogCaptureFixture) -> str:
    async def app(scope, receive, send):
        if scope_state is not None:
            scope["state"] = scope_state  # as the `caller` dependency leaves it
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message):
        return None

    async def receive() -> Any:
        return {}

    scope: Any = {"type": "http", "method": "GET", "path_template": "/api/v1/workflows", "headers": [(b"x-api-key", b"k")]}
    with caplog.at_level(logging.INFO, logger="flowtrail.access"):
        await AccessLog(app)(scope, receive, send)
    return caplog.records[-1].__dict__["key_id"]


async def test_the_access_log_names_the_key_the_caller_dependency_authenticated_and_never_authenticates_itself(caplog):
    assert await logged_key_id({CALLER_KEY_ID: "key-a"}, caplog) == "key-a"
    assert await logged_key_id({}, caplog) == "-"
    assert await logged_key_id(None, caplog) == "-"
