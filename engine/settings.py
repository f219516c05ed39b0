"""The service's settings, grouped, each read once and strictly from its FLOWTRAIL_* variable.

Each field an operator may set says, in one place, its variable, its default and what it means
(`engine.config.setting`). An unknown FLOWTRAIL_* variable is refused. The README's table is generated
from these fields (`flowtrail config --reference`). The settings stay frozen dataclasses so that callers and
tests build and `dataclasses.replace` them with keyword arguments. The shapes inside the JSON-list settings
belong to their packages: `ApiKey` to engine.access, `ModelConfig` to engine.llm, `HermesGateway` to
engine.hermes; so does the job queue's group, `DispatchSettings`, to engine.dispatch.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from engine.access import DEMO_KEY, ApiKey, check_api_keys, read_key_file
from engine.config import SettingsError, read_field, read_section, refuse_unknown_variables, setting, variables
from engine.dispatch.settings import DispatchSettings
from engine.hermes.gateways import HermesGateway, check_gateways
from engine.limits import LimitSettings
from engine.llm.config import RESERVED_MODEL_IDS, ModelConfig, ModelPrice
from engine.loopback import is_loopback
from engine.store.url import parse_database_url
from engine.webhooks.settings import WebhookSettings
from engine.webhooks.signing import parse_secret


@dataclass(frozen=True)
class StoreSettings:
    """Where the event log lives."""

    database_url: Annotated[str, setting(
        "FLOWTRAIL_DATABASE_URL", "the event log: `sqlite:///path.db` (default: under FLOWTRAIL_DATA_DIR) or "
        "`postgresql://user[:password]@host[:port]/db` (optional `?schema=name`)", secret=True,
        accepts="a sqlite:/// or postgresql:// URL",
    )] = "sqlite:///data/flowtrail.db"
    write_threads: Annotated[int, setting(
        "FLOWTRAIL_WRITE_THREADS", "worker threads for the (synchronous) event-store writes", ge=1,
    )] = 4
    request_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_STORE_REQUEST_TIMEOUT_SECONDS", "while the store is away (down, restarting, disk full), a request's "
        "reads and writes are retried this long, then it answers `503 STORE_UNAVAILABLE` (a streamed body's reads, "
        "once its answer has begun, are retried as long as a run's writes)", gt=0, le=60,
    )] = 1.0
    write_retry_seconds: Annotated[float, setting(
        "FLOWTRAIL_STORE_WRITE_RETRY_SECONDS", "outside requests (runs executing), how long a read or write is retried "
        "while the store is away before it fails", gt=0,
    )] = 30.0


@dataclass(frozen=True)
class StreamSettings:
    """How run events reach SSE clients."""

    keepalive_seconds: Annotated[float, setting(
        "FLOWTRAIL_KEEPALIVE_SECONDS", "`: keep-alive` comment interval on idle streams", gt=0,
    )] = 30.0
    coalesce_ms: Annotated[float, setting(
        "FLOWTRAIL_COALESCE_MS", "window in which thinking chunks of a visit are merged and appended together "
        "(other chunks are appended as soon as the run's append before them is stored)", ge=0,
    )] = 40.0
    turn_ms: Annotated[float, setting(
        "FLOWTRAIL_STREAM_TURN_MS", "how long one run's stream chunks may hold the event loop before they yield it "
        "to other runs, streams and requests (0: after every chunk)", ge=0,
    )] = 2.0
    ahead_chunks: Annotated[int, setting(
        "FLOWTRAIL_STREAM_AHEAD_CHUNKS", "stream chunks the runs of this process may buffer ahead of the store, shared "
        "by the runs streaming at once (each may buffer at least a 32nd of it, at most 32); a run at its share waits "
        "for the store; smaller: earlier first events, fewer events/s", ge=32,
    )] = 1024
    run_ahead_chunks: Annotated[int, setting(
        "FLOWTRAIL_STREAM_RUN_AHEAD_CHUNKS", "the most stream chunks one run may buffer ahead of the store, even when "
        "it streams alone (its chunks' delay is about two appends of that many); larger: more events/s for one "
        "fast run, longer delays", ge=1,
    )] = 384
    hot_buffer_messages: Annotated[int, setting(
        "FLOWTRAIL_HOT_BUFFER_MESSAGES", "SSE messages kept in memory per run; older ones come from the store",
        ge=5000,
    )] = 10_000
    hot_retention_seconds: Annotated[float, setting(
        "FLOWTRAIL_HOT_RETENTION_SECONDS", "how long an idle run's projections stay in memory (a finished run leaves "
        "as soon as no stream reads it and no writer holds it; this applies to one loaded again by a read)", ge=0,
    )] = 1800.0
    max_stream_seconds: Annotated[float, setting(
        "FLOWTRAIL_MAX_STREAM_SECONDS", "a stream connection is closed after this long (resume with `Last-Event-ID`)",
        gt=0,
    )] = 86_400.0
    shutdown_grace_seconds: Annotated[float, setting(
        "FLOWTRAIL_SHUTDOWN_GRACE_SECONDS", "on SIGTERM/SIGINT, open responses get this long to end before the process "
        "stops (streams end at once with a reconnect hint)", ge=0,
    )] = 3.0
    stuck_seconds: Annotated[float, setting(
        "FLOWTRAIL_STREAM_STUCK_SECONDS", "a client that takes no bytes for this long while its response waits to be "
        "sent (the connection's write buffer full) is disconnected", gt=0,
    )] = 60.0


@dataclass(frozen=True)
class EngineSettings:
    """Limits and models of the workflow engine."""

    models: Annotated[tuple[ModelConfig, ...], setting(
        "FLOWTRAIL_MODELS", "JSON list of OpenAI-compatible models `{\"id\", \"base_url\", \"model\", \"api_key_env\"}`; "
        "the key is read from the variable `api_key_env` names, never stored or logged",
    )] = ()
    model_prices: Annotated[tuple[ModelPrice, ...], setting(
        "FLOWTRAIL_MODEL_PRICES", "JSON list of `{\"model\", \"input_per_1k\", \"output_per_1k\", \"currency\"}`: what a "
        "model's (or a Hermes gateway's) tokens cost, per 1,000; the viewer and `GET /runs/{runId}/timeline` show costs",
    )] = ()
    default_model_id: Annotated[str, setting(
        "FLOWTRAIL_DEFAULT_MODEL", "model for nodes that name none (empty: the first configured model, else `scripted`)",
        accepts="an id from FLOWTRAIL_MODELS, or `scripted`",
    )] = ""
    scripted_pace_seconds: Annotated[float, setting(
        "FLOWTRAIL_SCRIPTED_PACE_SECONDS", "pause between chunks of the scripted provider (`./run`: 0.05)", ge=0,
    )] = 0.0
    node_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_NODE_TIMEOUT_SECONDS", "a visit running longer than this fails", gt=0,
    )] = 600.0
    run_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_RUN_TIMEOUT_SECONDS", "a run (time paused for an answer included) running longer than this fails",
        gt=0,
    )] = 86_400.0
    max_visits_per_node: Annotated[int, setting(
        "FLOWTRAIL_MAX_VISITS_PER_NODE", "AGENTIC: visits of one node before the run fails", ge=1,
    )] = 50
    max_visits_per_run: Annotated[int, setting(
        "FLOWTRAIL_MAX_VISITS_PER_RUN", "AGENTIC: visits in one run before the run fails", ge=1,
    )] = 200
    max_agent_iterations: Annotated[int, setting(
        "FLOWTRAIL_MAX_AGENT_ITERATIONS", "model turns one agent visit may take", ge=1,
    )] = 20
    model_retry_budget: Annotated[int, setting(
        "FLOWTRAIL_MODEL_RETRY_BUDGET", "retries one visit may make over every layer together: model-call retries "
        "(429, 5xx, timeouts, broken streams, no connection), re-formats and re-runs", ge=0,
    )] = 10
    model_retry_base_seconds: Annotated[float, setting(
        "FLOWTRAIL_MODEL_RETRY_BASE_SECONDS", "first backoff window before a model call is retried; it doubles each "
        "retry (full jitter)", ge=0,
    )] = 1.0
    model_retry_max_seconds: Annotated[float, setting(
        "FLOWTRAIL_MODEL_RETRY_MAX_SECONDS", "longest wait before a retry; a `Retry-After` asking for more is not retried",
        ge=0,
    )] = 30.0
    model_call_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_MODEL_CALL_TIMEOUT_SECONDS", "one model call (one attempt) taking longer than this is cut and counts "
        "as a timeout", gt=0,
    )] = 300.0
    hermes_gateways: Annotated[tuple[HermesGateway, ...], setting(
        "FLOWTRAIL_HERMES_GATEWAYS", "JSON list of remote Hermes Agent gateways `{\"id\", \"base_url\", \"api_key_env\", "
        "\"profile\", \"model\", \"effort\", \"system_prompt\", \"auto_approve\", \"idle_timeout_seconds\", \"enabled\", "
        "\"stop_confirm_seconds\", \"status_retry_seconds\"}` that agent "
        "and smartAction nodes may run on (docs/hermes.md); the key is read from the variable `api_key_env` names",
        accepts="a JSON list of objects",
    )] = ()


@dataclass(frozen=True)
class ContextSettings:
    """The internal context query API (seed internal-context-query-spec, v1.1.1)."""

    enabled: Annotated[bool, setting(
        "FLOWTRAIL_CONTEXT_QUERY_ENABLED", "the internal context API and the agents' context tools "
        "(false: /internal/context/* answers 503, no tokens, no tools)",
    )] = True
    token_ttl_seconds: Annotated[float, setting(
        "FLOWTRAIL_CONTEXT_TOKEN_TTL_SECONDS", "context token lifetime", gt=0,
    )] = 120.0
    cleanup_interval_seconds: Annotated[float, setting(
        "FLOWTRAIL_CONTEXT_CLEANUP_INTERVAL_SECONDS", "how often expired context tokens are swept", gt=0,
    )] = 60.0
    max_tokens_per_visit: Annotated[int, setting(
        "FLOWTRAIL_CONTEXT_MAX_TOKENS_PER_VISIT", "live context tokens one visit may hold", ge=1,
    )] = 4
    max_tool_calls_per_visit: Annotated[int, setting(
        "FLOWTRAIL_CONTEXT_MAX_TOOL_CALLS", "context tool calls one visit may make", ge=0,
    )] = 50
    section_max_bytes: Annotated[int, setting(
        "FLOWTRAIL_CONTEXT_SECTION_MAX_BYTES", "the largest context section (predecessors' paths, outputs and meta) "
        "a remote Hermes visit's prompt carries, in bytes of JSON (0: none; docs/hermes.md)", ge=0,
    )] = 65536


@dataclass(frozen=True)
class UploadSettings:
    """Run workspaces and uploaded files."""

    max_file_bytes: Annotated[int, setting(
        "FLOWTRAIL_MAX_UPLOAD_BYTES", "largest single uploaded file, in bytes", ge=1,
    )] = 50 * 1024 * 1024
    max_request_bytes: Annotated[int, setting(
        "FLOWTRAIL_MAX_REQUEST_BYTES", "largest whole run-creation request, in bytes", ge=1,
    )] = 200 * 1024 * 1024
    default_ttl_hours: int = 720
    """Workspace retention when a run does not say."""
    sweep_interval_seconds: Annotated[float, setting(
        "FLOWTRAIL_WORKSPACE_SWEEP_SECONDS", "how often workspaces past their run's `ttlHours` are deleted, and "
        "upload folders whose run was never created (after an hour without change)", gt=0,
    )] = 3600.0


@dataclass(frozen=True)
class RetentionSettings:
    """How long ended runs keep their content (docs/history.md, "Retention")."""

    days: Annotated[float, setting(
        "FLOWTRAIL_RETENTION_DAYS", "erase the content of runs that ended more than this many days ago (fractions "
        "allowed: 0.5 is 12 hours), as `DELETE` of the run would; 0: never", ge=0,
    )] = 0.0
    sweep_seconds: Annotated[float, setting(
        "FLOWTRAIL_RETENTION_SWEEP_SECONDS", "how often retention looks for runs to erase (one replica at a time)", gt=0,
    )] = 300.0
    batch: Annotated[int, setting(
        "FLOWTRAIL_RETENTION_BATCH", "at most this many runs erased by one sweep, the longest ended first", ge=1,
    )] = 100


@dataclass(frozen=True)
class Settings:
    """Everything the service is configured with."""

    host: Annotated[str, setting(
        "FLOWTRAIL_HOST", "address the HTTP server binds (not loopback: see FLOWTRAIL_ALLOW_DEMO_KEY_ON_NETWORK)",
    )] = "127.0.0.1"
    port: Annotated[int, setting("FLOWTRAIL_PORT", "port the HTTP server listens on", ge=0, le=65535)] = 2438
    data_dir: Annotated[Path, setting("FLOWTRAIL_DATA_DIR", "directory of the SQLite file and the run workspaces")] = (
        Path("data")
    )
    workflows_dir: Annotated[Path | None, setting(
        "FLOWTRAIL_WORKFLOWS_DIR", "directory of workflow definitions (`*.json`) published at start-up beside the demos",
    )] = None
    api_keys: Annotated[tuple[ApiKey, ...], setting(
        "FLOWTRAIL_API_KEYS", "JSON list of `{\"key\", \"id\", \"workflowNames\", \"workflowIds\", \"seesAllRuns\", \"mayErase\", \"webhooks\"}`: "
        "both lists empty = every workflow; a key uses only the runs it created unless `seesAllRuns`; `id` "
        "(required, distinct) is the stable, non-secret name its runs are recorded under; `mayErase` lets it erase any "
        "run it sees (an owner may always erase its own); `webhooks` lists URLs every run the key creates sends its "
        "webhooks to (docs/api.md, \"Webhooks\"). "
        "Unset: the key `demo-key`, no scope limit, sees all runs", secret=True,
    )] = (DEMO_KEY,)
    api_keys_file: Annotated[Path | None, setting(
        "FLOWTRAIL_API_KEYS_FILE", "a file holding the keys, in FLOWTRAIL_API_KEYS's JSON shape (set one of the two): "
        "re-read on SIGHUP and when it changes, so keys are added, changed and revoked without a restart "
        "(docs/operations.md, \"API keys\")",
    )] = None
    api_keys_poll_seconds: Annotated[float, setting(
        "FLOWTRAIL_API_KEYS_FILE_POLL_SECONDS", "how often the key file is read to see whether it changed", gt=0,
    )] = 5.0
    demo_key_in_use: bool = True
    """True when no keys were configured and `demo-key` was created."""
    allow_demo_key_on_network: Annotated[bool, setting(
        "FLOWTRAIL_ALLOW_DEMO_KEY_ON_NETWORK", "serve a non-loopback FLOWTRAIL_HOST with the generated `demo-key` "
        "(FLOWTRAIL_API_KEYS unset); false: `flowtrail serve` refuses to",
    )] = False
    load_demos: Annotated[bool, setting("FLOWTRAIL_LOAD_DEMOS", "publish the shipped demo workflows at start-up")] = True
    store: StoreSettings = field(default_factory=StoreSettings)
    stream: StreamSettings = field(default_factory=StreamSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    dispatch: DispatchSettings = field(default_factory=DispatchSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    uploads: UploadSettings = field(default_factory=UploadSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    log_format: Annotated[Literal["text", "json"], setting(
        "FLOWTRAIL_LOG_FORMAT", "`text` (one readable line per record) or `json` (one JSON object per line: ts, level, "
        "logger, msg and context fields) for every logger of the process",
    )] = "text"
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], setting(
        "FLOWTRAIL_LOG_LEVEL", "the least severe level logged",
    )] = "INFO"

    @property
    def workspaces_dir(self) -> Path:
        """One directory per run lives here."""
        return self.data_dir / "workspaces"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, also_known: Iterable[str] = ()) -> Settings:
        """Every setting from FLOWTRAIL_* variables (default: the process environment); SettingsError on any mistake.

        `also_known` names the variables other readers in the process take (the client commands'), so that they
        are not refused as typos.
        """
        env = os.environ if environ is None else environ
        settings = read_section(cls, env)
        if not env.get("FLOWTRAIL_DATABASE_URL"):
            default_url = f"sqlite:///{settings.data_dir}/flowtrail.db"
            settings = dataclasses.replace(settings, store=dataclasses.replace(settings.store, database_url=default_url))
        settings = dataclasses.replace(settings, api_keys=configured_keys(env), demo_key_in_use=(
            not env.get("FLOWTRAIL_API_KEYS") and settings.api_keys_file is None))
        _check_demo_key_exposure(settings)
        _check_database_url(settings.store.database_url)
        _check_workflows_dir(settings.workflows_dir)
        _check_models(settings.engine)
        check_gateways(settings.engine.hermes_gateways)
        if secret := env.get(settings.webhooks.secret_env):
            parse_secret(settings.webhooks.secret_env, secret)
        key_variables = {m.api_key_env for m in settings.engine.models} | {
            g.api_key_env for g in settings.engine.hermes_gateways
        }
        key_variables.add(settings.webhooks.secret_env)
        known = {v.name for v in variables(cls)} | set(also_known) | {name for name in key_variables if name}
        refuse_unknown_variables(env, known=known)
        return settings


def configured_keys(env: Mapping[str, str]) -> tuple[ApiKey, ...]:
    """The checked API keys a service started with this environment serves: its key file's, else FLOWTRAIL_API_KEYS's,
    else `demo-key`."""
    path: Path | None = read_field(Settings, "api_keys_file", env)
    if path is None:
        keys: tuple[ApiKey, ...] = read_field(Settings, "api_keys", env)
        check_api_keys(keys)
        return keys
    if env.get("FLOWTRAIL_API_KEYS"):
        raise SettingsError("FLOWTRAIL_API_KEYS_FILE", "FLOWTRAIL_API_KEYS is set too",
                            "the keys in one place: FLOWTRAIL_API_KEYS or FLOWTRAIL_API_KEYS_FILE")
    return read_key_file(path)


def _check_demo_key_exposure(settings: Settings) -> None:
    if settings.demo_key_in_use and not settings.allow_demo_key_on_network and not is_loopback(settings.host):
        raise SettingsError(
            "FLOWTRAIL_HOST", f"{settings.host!r} is not a loopback address and FLOWTRAIL_API_KEYS is unset, "
            "so anyone on the network could use the generated `demo-key`",
            "a loopback address, or FLOWTRAIL_API_KEYS (or FLOWTRAIL_API_KEYS_FILE) set, or "
            "FLOWTRAIL_ALLOW_DEMO_KEY_ON_NETWORK=true",
        )


def _check_database_url(url: str) -> None:
    try:
        parse_database_url(url)
    except ValueError as error:
        scheme = urlsplit(url).scheme
        if scheme not in {"sqlite", "postgresql", "postgres"}:
            problem = f"the scheme {scheme!r} is neither sqlite nor postgresql"
        else:
            problem = "it names no SQLite file" if scheme == "sqlite" else str(error)
        raise SettingsError(
            "FLOWTRAIL_DATABASE_URL", problem,
            "sqlite:///path.db or postgresql://user[:password]@host[:port]/db[?schema=name]",
        ) from None


def _check_workflows_dir(directory: Path | None) -> None:
    if directory is not None and not directory.is_dir():
        raise SettingsError("FLOWTRAIL_WORKFLOWS_DIR", f"{str(directory)!r} is not a directory",
                            "an existing directory of workflow definitions (*.json)")


def _check_models(engine: EngineSettings) -> None:
    """The configured models' ids are distinct and not reserved, and the default is one of them (or `scripted`)."""
    ids = [m.id for m in engine.models]
    taken = sorted({i for i in ids if ids.count(i) > 1 or i in RESERVED_MODEL_IDS})
    if taken:
        raise SettingsError("FLOWTRAIL_MODELS", f"the model id {taken[0]!r} is reserved or configured twice",
                            "distinct ids other than `scripted`")
    if engine.default_model_id and engine.default_model_id not in {*ids, *RESERVED_MODEL_IDS}:
        raise SettingsError("FLOWTRAIL_DEFAULT_MODEL", f"{engine.default_model_id!r} is not a configured model",
                            "one of " + ", ".join(repr(i) for i in [*ids, *sorted(RESERVED_MODEL_IDS)]))
