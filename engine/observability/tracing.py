"""OpenTelemetry traces of runs: a span per run, per visit, per model or gateway call (docs/observability.md "Traces").

Tracing is on only when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
(and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`): `start_tracing` then builds the
SDK's tracer provider with a batch span processor and the OTLP/HTTP protobuf exporter, each reading its
own standard variables. Otherwise the SDK is never imported, no thread is started, and every helper here
returns at once with the API's invalid span (a no-op).

A run's trace is the one its creation request was served in: `trace_parent_now` gives that request's
W3C `traceparent`, which `RunCreated` records, so every later execution of the run (after a pause, a
restart, on another replica) starts its run span under the same parent. Spans carry ids, names, counts and
failure categories: never prompts, answers, variables or error texts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from domain.events import RunCreated
from engine.config import SettingsError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""Either one turns tracing on."""
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOL = "http/protobuf"
"""The one OTLP protocol flowtrail ships an exporter for."""
SERVICE_NAME = "flowtrail"
"""`service.name` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another."""
TRACER_NAME = "flowtrail"

_tracer: Tracer | None = None
"""The tracer of the process's provider while tracing is on; None: off (every helper is a no-op)."""
_W3C = TraceContextTextMapPropagator()


# ---- switching it on and off -------------------------------------------------------------


def tracing_wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """True when the standard variables ask for OTLP traces; SettingsError for a protocol or exporter it has not."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter == "none":
        return False
    if exporter != "otlp":
        raise SettingsError("OTEL_TRACES_EXPORTER", f"{exporter!r} is not an exporter flowtrail has", "otlp, none")
    for variable in PROTOCOL_VARIABLES:
        protocol = environ.get(variable, "").strip()
        if protocol and protocol != PROTOCOL:
            raise SettingsError(variable, f"{protocol!r} is not an OTLP protocol flowtrail exports with", PROTOCOL)
    return any(environ.get(variable, "").strip() for variable in ENDPOINT_VARIABLES)


def start_tracing(environ: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """When the variables ask for it, the process's tracer provider (also set as OpenTelemetry's global one);
    else None, and nothing is imported or started."""
    global _tracer
    if not tracing_wanted(environ):
        return None
    provider = _sdk_provider()
    trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer(TRACER_NAME, _version())
    return provider


def stop_tracing(provider: TracerProvider | None) -> None:
    """Export the spans still buffered and stop the exporter (the batch processor flushes on shutdown)."""
    global _tracer
    _tracer = None
    if provider is not None:
        provider.shutdown()


def _sdk_provider() -> TracerProvider:
    """The SDK's provider: resource, sampler, batch processor and exporter each read their standard variables."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.version": _version()})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def _version() -> str:
    try:
        return metadata.version("flowtrail")
    except metadata.PackageNotFoundError:
        return "0"


# ---- a run's trace -------------------------------------------------------------------------


def trace_parent_now() -> str | None:
    """The W3C `traceparent` of the span being served now (the creation request's), None when not tracing."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


def trace_headers() -> dict[str, str]:
    """Headers carrying the current span to a service a visit calls (the context API: its server span then joins
    the run's trace), in OTEL_PROPAGATORS' formats; none when not tracing."""
    carrier: dict[str, str] = {}
    if _tracer is not None:
        propagate.inject(carrier)
    return carrier


def with_trace_parent(created: RunCreated) -> RunCreated:
    """`RunCreated` with the trace it was created in (as it is when not tracing)."""
    trace_parent = trace_parent_now()
    return created if trace_parent is None else msgspec.structs.replace(created, trace_parent=trace_parent)


def _parent(trace_parent: str | None) -> Context:
    """The context a run's span starts under: its recorded parent, else none (a new trace; never the ambient one)."""
    return _W3C.extract({"traceparent": trace_parent}) if trace_parent else Context()


class Traced:
    """A span, and whether the code around it said how it ended (then an exception does not say it again)."""

    __slots__ = ("settled", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.settled = False

    def set(self, key: str, value: Any) -> None:
        """Set one attribute."""
        self.span.set_attribute(key, value)


NOT_TRACED = Traced(INVALID_SPAN)
"""What every helper gives while tracing is off: its span records nothing."""
_OFF = contextlib.nullcontext(NOT_TRACED)
"""What every span helper returns while tracing is off (reusable: it does nothing)."""


@contextlib.contextmanager
def _span(name: str, attributes: Mapping[str, Any], *, kind: SpanKind = SpanKind.INTERNAL,
          parent: Context | None = None, current: bool = True) -> Iterator[Traced]:
    """A span around the block (current inside it unless `current` is False). An exception the block did not
    account for marks it failed by its type (never its text); a cancellation marks it interrupted."""
    assert _tracer is not None, "the helpers return _OFF while tracing is off"
    span = _tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
    traced = Traced(span)
    try:
        if current:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                yield traced
        else:
            yield traced
    except (asyncio.CancelledError, GeneratorExit):
        span.set_attribute("flowtrail.interrupted", True)
        raise
    except Exception as error:
        if not traced.settled:
            failed(traced, type(error).__name__)
        raise
    finally:
        span.end()


def failed(traced: Traced, error_type: str) -> None:
    """Mark a span failed with `error_type` (a failure category or an exception's type; never its text)."""
    traced.settled = True
    traced.set("error.type", error_type)
    traced.span.set_status(Status(StatusCode.ERROR, error_type))


def run_span(run_id: UUID, workflow: str, version: int, trace_parent: str | None, *,
             continues: bool) -> contextlib.AbstractContextManager[Traced]:
    """The span of one execution of a run (until it ends, pauses or this process stops), under its recorded parent;
    `continues`: the run had begun visits before (an answer, a restart or a takeover)."""
    if _tracer is None:
        return _OFF
    return _span(f"invoke_workflow {workflow}", {
        "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": workflow,
        "flowtrail.run.id": run_id.hex, "flowtrail.workflow.version": version, "flowtrail.run.continues": continues,
    }, parent=_parent(trace_parent))


def run_ended(traced: Traced, status: str, error_code: str | None) -> None:
    """Say where the run stands after its execution: `status` (succeeded, failed, paused...), and a failure's code."""
    traced.settled = True
    traced.set("flowtrail.run.status", status)
    if error_code is not None and status == "failed":
        failed(traced, error_code)


def run_handed_over(traced: Traced) -> None:
    """Say the run's execution here stopped at a visit boundary because the process stops (it goes on elsewhere)."""
    traced.settled = True
    traced.set("flowtrail.interrupted", True)


def visit_span(run_id: UUID, visit_uuid: str, node_id: str, node_type: str, iter_seq: int, *,
               model: bool, resumed: bool) -> contextlib.AbstractContextManager[Traced]:
    """The span of one visit's execution; a `model` node's visit is also a GenAI agent invocation."""
    if _tracer is None:
        return _OFF
    attributes: dict[str, Any] = {
        "flowtrail.run.id": run_id.hex, "flowtrail.visit.id": visit_uuid, "flowtrail.node.id": node_id,
        "flowtrail.node.type": node_type, "flowtrail.visit.iter_seq": iter_seq, "flowtrail.visit.resumed": resumed,
    }
    if model:
        attributes.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": node_id})
    return _span(f"visit {node_id}", attributes)


def visit_ended(traced: Traced, status: str, error_code: str | None = None) -> None:
    """Say how the visit's execution ended: SUCCESS, FAILED (with its code), PAUSED (waiting for an answer) or
    CANCELLED (the run's cancel stopped it)."""
    traced.settled = True
    traced.set("flowtrail.visit.status", status)
    if error_code is not None:
        failed(traced, error_code)


def model_call_span(system: str, model: str, model_id: str, purpose: str, *,
                    temperature: float | None, max_tokens: int | None) -> contextlib.AbstractContextManager[Traced]:
    """The span of one model call (GenAI `chat`), not made current: its stream is read across awaits."""
    if _tracer is None:
        return _OFF
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": system, "gen_ai.system": system,
        "gen_ai.request.model": model, "flowtrail.model.id": model_id, "flowtrail.model.purpose": purpose,
    }
    if temperature is not None:
        attributes["gen_ai.request.temperature"] = temperature
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    return _span(f"chat {model}", attributes, kind=SpanKind.CLIENT, current=False)


def model_usage(traced: Traced, input_tokens: int, output_tokens: int) -> None:
    """The tokens the model reported for the call."""
    traced.set("gen_ai.usage.input_tokens", input_tokens)
    traced.set("gen_ai.usage.output_tokens", output_tokens)


def model_finished(traced: Traced, finish_reason: str | None) -> None:
    """The model ended its answer (with this reason)."""
    if finish_reason:
        traced.set("gen_ai.response.finish_reasons", (finish_reason,))


def gateway_call_span(gateway_id: str, session_id: str) -> contextlib.AbstractContextManager[Traced]:
    """The span of one prompt run on a Hermes gateway (a GenAI agent invocation of a remote agent)."""
    if _tracer is None:
        return _OFF
    return _span(f"invoke_agent {gateway_id}", {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "hermes", "gen_ai.system": "hermes",
        "gen_ai.agent.name": gateway_id, "gen_ai.conversation.id": session_id, "flowtrail.gateway.id": gateway_id,
    }, kind=SpanKind.CLIENT)
