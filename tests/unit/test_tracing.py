"""When tracing is on, and what the span helpers record: a span's outcome by category or type (never text), its
interruption, a run's span under its recorded parent rather than the current one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from uuid import uuid4

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from engine.config import SettingsError
from engine.observability import tracing
from engine.observability.tracing import (
    NOT_TRACED,
    gateway_call_span,
    run_span,
    trace_headers,
    trace_parent_now,
    tracing_wanted,
    visit_ended,
    visit_span,
)

ENDPOINT = "http://127.0.0.1:4318"
RECORDED_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test, its spans kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("test"))
    yield exporter
    provider.shutdown()


def a_visit(**options):
    return visit_span(uuid4(), "v-1", "research", "agent", 1, model=True, resumed=False, **options)


@pytest.mark.parametrize("environ", [
    {},
    {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
    {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "true"},
    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"},
    {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
])
def test_tracing_is_off_without_an_otlp_endpoint_or_when_switched_off(environ):
    assert tracing_wanted(environ) is False


@pytest.mark.parametrize("environ", [
    {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT},
    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces", "OTEL_TRACES_EXPORTER": "otlp"},
    {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
])
def test_an_otlp_endpoint_turns_tracing_on(environ):
    assert tracing_wanted(environ) is True


@pytest.mark.parametrize(("variable", "value"), [
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
    ("OTEL_TRACES_EXPORTER", "console"),
])
def test_a_protocol_or_exporter_flowtrail_has_not_is_refused_naming_the_variable(variable, value):
    with pytest.raises(SettingsError) as refused:
        tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, variable: value})
    assert refused.value.variable == variable
    assert str(refused.value).startswith(f"{variable}: {value!r} is not")


def test_while_off_every_helper_records_nothing():
    assert tracing._tracer is None
    with a_visit() as traced, gateway_call_span("g", "s") as other:
        assert traced is other is NOT_TRACED
        assert trace_parent_now() is None
        assert trace_headers() == {}
        visit_ended(traced, "FAILED", "NODE_TIMEOUT")
    assert not NOT_TRACED.span.is_recording()


def test_a_failure_the_block_left_unsaid_marks_the_span_by_the_exceptions_type_only(exported):
    with pytest.raises(ValueError), a_visit():
        raise ValueError("model at http://10.0.0.7:8000 said: key sk-123 refused")
    [span] = exported.get_finished_spans()
    assert span.attributes["error.type"] == "ValueError"
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "ValueError")
    assert span.events == ()


def test_an_outcome_the_engine_gave_is_not_overwritten_by_the_exception_that_follows(exported):
    with pytest.raises(RuntimeError), a_visit() as traced:
        visit_ended(traced, "CANCELLED")
        raise RuntimeError("the cancel halts the run")
    [span] = exported.get_finished_spans()
    assert span.attributes["flowtrail.visit.status"] == "CANCELLED"
    assert "error.type" not in span.attributes and span.status.status_code is StatusCode.UNSET


def test_a_failed_visit_carries_its_failure_category(exported):
    with a_visit() as traced:
        visit_ended(traced, "FAILED", "NODE_TIMEOUT")
    [span] = exported.get_finished_spans()
    assert span.attributes["error.type"] == "NODE_TIMEOUT" and span.status.status_code is StatusCode.ERROR


async def test_a_cancelled_block_marks_its_span_interrupted_not_failed(exported):
    async def visit() -> None:
        with a_visit():
            await asyncio.sleep(10)
    task = asyncio.ensure_future(visit())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [span] = exported.get_finished_spans()
    assert span.attributes["flowtrail.interrupted"] is True and span.status.status_code is StatusCode.UNSET


def test_a_run_span_starts_under_its_recorded_parent_never_under_the_current_span(exported):
    run_id = uuid4()
    with a_visit():
        with run_span(run_id, "w", 1, RECORDED_PARENT, continues=True):
            pass
        with run_span(run_id, "w", 1, None, continues=False):
            pass
    recorded, fresh, ambient = exported.get_finished_spans()
    assert recorded.name == "invoke_workflow w" and recorded.attributes["flowtrail.run.id"] == run_id.hex
    assert f"{recorded.context.trace_id:032x}" == RECORDED_PARENT.split("-")[1]
    assert f"{recorded.parent.span_id:016x}" == RECORDED_PARENT.split("-")[2]
    assert fresh.parent is None and fresh.context.trace_id != ambient.context.trace_id


def test_the_current_span_is_what_a_run_records_and_what_a_context_query_carries(exported):
    with a_visit() as traced:
        context = traced.span.get_span_context()
        parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        assert trace_parent_now() == parent
        assert trace_headers()["traceparent"] == parent


def test_a_gateway_call_is_a_genai_agent_invocation_of_the_gateway(exported):
    with gateway_call_span("research-gw", "flowtrail-abc-123"):
        pass
    [span] = exported.get_finished_spans()
    assert span.name == "invoke_agent research-gw" and span.kind.name == "CLIENT"
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "hermes", "gen_ai.system": "hermes",
        "gen_ai.agent.name": "research-gw", "gen_ai.conversation.id": "flowtrail-abc-123",
        "flowtrail.gateway.id": "research-gw",
    }
