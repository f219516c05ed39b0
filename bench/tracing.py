"""Tracing: the CPU time the span helpers cost a visit that makes one model call, with tracing off and on.

Off is what a process without OTEL_EXPORTER_OTLP_* runs (every helper returns a shared no-op handle).
On is the SDK's tracer provider with its batch span processor, whose exporter encodes each batch
into the OTLP protobuf request as the real one does and then drops it (no network in the figure).
CPU time, not wall time: the calling thread's (`thread_time`: what a visit pays), and the whole process's
(`process_time`: the batch thread's encoding included). Printed, never asserted.

    python -m bench.tracing [--visits 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from uuid import uuid4

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from engine.observability import tracing
from engine.observability.tracing import model_call_span, model_finished, model_usage, visit_ended, visit_span

RUN_ID = uuid4()


class EncodeAndDrop(SpanExporter):
    """Encodes each batch as the OTLP exporter does, sends nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializePartialToString()
        return SpanExportResult.SUCCESS


def one_visit() -> None:
    """What the engine calls for a model node's visit with one model call."""
    with visit_span(RUN_ID, "visit-uuid", "research", "agent", 1, model=True, resumed=False) as visit:
        with model_call_span("openai", "gpt-4o-mini", "default", "node", temperature=None, max_tokens=None) as call:
            model_usage(call, 120, 40)
            model_finished(call, "stop")
        visit_ended(visit, "SUCCESS")


def cpu_per_visit(visits: int) -> float:
    """Microseconds of the calling thread's CPU per visit."""
    began = time.thread_time()
    for _ in range(visits):
        one_visit()
    return (time.thread_time() - began) / visits * 1e6


def main(visits: int) -> None:
    off = cpu_per_visit(visits)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(EncodeAndDrop(), max_queue_size=2 * visits + 1))
    tracing._tracer = provider.get_tracer("bench")
    began = time.process_time()
    on = cpu_per_visit(visits)
    provider.shutdown()
    on_in_all = (time.process_time() - began) / visits * 1e6
    tracing._tracer = None
    print(f"tracing off: {off:.2f} us CPU per visit with one model call (2 span helpers, 3 attribute calls)")
    print(f"tracing on: {on:.1f} us on the calling thread (2 spans), {on_in_all:.1f} us in all threads "
          f"(the batch thread's OTLP encoding of every span included)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=20_000)
    main(parser.parse_args().visits)
