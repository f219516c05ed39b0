"""Without the OTLP variables, building the service as `flowtrail serve` does sets up no tracing at all: the SDK and
its exporter are not imported, no span processor thread runs, the app has no tracing middleware. With an endpoint
set, all three are there (so the check would see them). (Litestar itself imports its OpenTelemetry plugin module
when creating any app, whenever the instrumentation is installed: that import is not ours to skip.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.process import ROOT

PROBE = """
import json, sys, threading
from pathlib import Path
from api.app import create_app
from api.sse import encode_frame
from engine.bootstrap import build_services
from engine.observability.tracing import start_tracing, stop_tracing
from tests.support.server import server_settings

provider = start_tracing()
app = create_app(build_services(server_settings(sys.argv[1], Path(sys.argv[2])), encode_frame=encode_frame),
                 tracer_provider=provider)
try:
    app.plugins.get("OpenTelemetryPlugin")
    plugin = True
except KeyError:
    plugin = False
print(json.dumps({
    "provider": provider is not None, "plugin": plugin, "threads": [t.name for t in threading.enumerate()],
    "resource": dict(provider.resource.attributes) if provider is not None else None,
    "modules": sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))),
}))
stop_tracing(provider)
"""


def built_as_serve_does(tmp_path: Path, **otel: str) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")} | otel
    done = subprocess.run(
        [sys.executable, "-c", PROBE, f"sqlite:///{tmp_path}/events.sqlite", str(tmp_path / "data")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    found: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_without_the_variables_no_sdk_is_imported_no_thread_started_no_middleware_installed(tmp_path):
    found = built_as_serve_does(tmp_path, OTEL_SERVICE_NAME="flowtrail")
    assert found == {"provider": False, "plugin": False, "threads": ["MainThread"], "modules": [], "resource": None}


def test_with_an_endpoint_the_sdk_its_batch_thread_the_http_middleware_and_the_resource_are_there(tmp_path):
    found = built_as_serve_does(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
                                OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
    assert found["provider"] and found["plugin"]
    assert found["resource"]["service.name"] == "flowtrail"
    assert found["resource"]["service.version"] and found["resource"]["deployment.environment"] == "test"
    assert "OtelBatchSpanRecordProcessor" in found["threads"]
    assert "opentelemetry.sdk.trace" in found["modules"]
    assert "opentelemetry.exporter.otlp.proto.http.trace_exporter" in found["modules"]
