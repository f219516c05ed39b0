"""Typed settings, filled once from environment variables."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec

S = TypeVar("S", bound=msgspec.Struct)


class ApiKey(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One external API key, the workflows it may use (both empty: no limit) and whose runs it sees."""

    key: str
    workflow_names: tuple[str, ...] = ()
    workflow_ids: tuple[int, ...] = ()
    id: str = ""
    sees_all_runs: bool = False
    """True: every run of its workflows (auditors, operators); false: only the runs this key created."""

    def key_id(self) -> str:
        """A stable, non-secret name for this key (stored with runs it creates)."""
        import hashlib

        return self.id or "key-" + hashlib.sha256(self.key.encode()).hexdigest()[:12]


_GATEWAY_PATH = re.compile(r"(/p/[A-Za-z0-9_.-]+)?/?")


class HermesGateway(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One remote Hermes Agent gateway; its bearer key is read from the variable `api_key_env`, never given inline."""

    id: str
    base_url: str
    api_key_env: str = "FLOWTRAIL_HERMES_API_KEY"
    profile: str = ""
    """An informative deployment label; not a credential and not used in URLs."""
    model: str = ""
    effort: str = ""
    system_prompt: str = ""
    auto_approve: bool = False
    idle_timeout_seconds: float = 600.0

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a gateway needs a non-empty id")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"gateway {self.id!r}: base_url must be an http(s) URL with a host")
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise ValueError(f"gateway {self.id!r}: base_url must carry no credentials, query or fragment")
        if not _GATEWAY_PATH.fullmatch(parts.path):
            raise ValueError(f"gateway {self.id!r}: base_url may only have the path /p/<profile>")
        if not self.api_key_env:
            raise ValueError(f"gateway {self.id!r}: api_key_env must name an environment variable")
        if self.idle_timeout_seconds <= 0:
            raise ValueError(f"gateway {self.id!r}: idle_timeout_seconds must be positive")


def parse_hermes_gateways(raw: str | None) -> tuple[HermesGateway, ...]:
    """The gateways in FLOWTRAIL_HERMES_GATEWAYS (a JSON list); anything else exits at start-up saying what is wrong."""
    if not raw or not raw.strip():
        return ()
    gateways = decode_json_list("FLOWTRAIL_HERMES_GATEWAYS", raw, HermesGateway)
    ids = [gateway.id for gateway in gateways]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"FLOWTRAIL_HERMES_GATEWAYS: two gateways share the id {sorted(i for i in ids if ids.count(i) > 1)[0]!r}")
    return gateways


DEMO_KEY = ApiKey(key="demo-key", id="demo", sees_all_runs=True)


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise SystemExit(f"{name} must be a number, got {raw!r}") from exc


def _int(name: str, default: int) -> int:
    return int(_float(name, default))


def _bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def decode_json_list(variable: str, raw: str, item: type[S]) -> tuple[S, ...]:
    """The JSON list of objects in a variable; anything else (an unknown field too) exits in one line naming it."""
    wanted: Any = tuple[item, ...]  # type: ignore[valid-type]  # the item type is the caller's
    try:
        decoded: tuple[S, ...] = msgspec.json.decode(raw.encode(), type=wanted)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        accepted = ", ".join(f.encode_name for f in msgspec.structs.fields(item))
        problem = str(exc).replace("Object contains unknown field", "unknown field").replace("\n", " ")
        raise SystemExit(f"{variable} is not a valid JSON list: {problem}; accepted fields: {accepted}") from None
    return decoded


def parse_api_keys(raw: str | None) -> tuple[tuple[ApiKey, ...], bool]:
    """Keys from the JSON list in FLOWTRAIL_API_KEYS; (keys, is_demo_default)."""
    if not raw:
        return (DEMO_KEY,), True
    keys = decode_json_list("FLOWTRAIL_API_KEYS", raw, ApiKey)
    if any(not k.key for k in keys):
        raise SystemExit("FLOWTRAIL_API_KEYS: every key needs a non-empty 'key'")
    ids = [k.key_id() for k in keys]
    if len(set(ids)) != len(ids):
        shared = sorted({i for i in ids if ids.count(i) > 1})
        raise SystemExit(f"FLOWTRAIL_API_KEYS: two keys share the id {shared[0]!r} (runs are owned by key id)")
    return keys, False


@dataclass(frozen=True)
class StoreSettings:
    """Where the event log lives."""

    database_url: str = "sqlite:///data/flowtrail.db"
    """sqlite:///path.db (default, under ./data/) or postgresql://user@host:port/db."""
    write_threads: int = 4
    """Worker threads that run the synchronous event-store writes."""


@dataclass(frozen=True)
class StreamSettings:
    """How run events reach SSE clients."""

    keepalive_seconds: float = 30.0
    """Seconds between `:keep-alive` comments on an idle stream."""
    coalesce_ms: float = 40.0
    """Window in which consecutive stream chunks of one visit are merged into one event."""
    hot_buffer_messages: int = 10_000
    """SSE messages kept in memory per hot run (the store serves older ones)."""
    hot_retention_seconds: float = 1800.0
    """How long a finished run's projections stay in memory with no client attached."""
    max_stream_seconds: float = 86_400.0
    """A stream connection is closed after this long (clients resume with Last-Event-ID)."""
    shutdown_grace_seconds: float = 3.0
    """On shutdown, open streams get this long before they are closed."""


@dataclass(frozen=True)
class EngineSettings:
    """Limits and models of the workflow engine."""

    models_json: str = ""
    """JSON list of OpenAI-compatible models: [{id, base_url, model, api_key_env}] (FLOWTRAIL_MODELS)."""
    default_model_id: str = ""
    """Model used when a node names none (default: the first configured, else `scripted`)."""
    scripted_pace_seconds: float = 0.0
    """Pause between chunks of the scripted provider (the demo sets a visible pace)."""
    node_timeout_seconds: float = 600.0
    """A visit running longer than this fails."""
    run_timeout_seconds: float = 86_400.0
    """A run (including time paused for an answer) running longer than this fails."""
    max_visits_per_node: int = 50
    """AGENTIC: visits of one node before the run fails."""
    max_visits_per_run: int = 200
    """AGENTIC: visits in one run before the run fails."""
    max_agent_iterations: int = 20
    """Model turns one agent visit may take."""
    hermes_gateways: tuple[HermesGateway, ...] = ()
    """Remote Hermes Agent gateways agent/smartAction nodes may run on (FLOWTRAIL_HERMES_GATEWAYS, a JSON list)."""


@dataclass(frozen=True)
class ContextSettings:
    """The internal context query API (seed internal-context-query-spec, v1.1.1)."""

    enabled: bool = True
    """When false, /internal/context/* answers 503, no tokens are issued and no tools are offered."""
    token_ttl_seconds: float = 120.0
    """Lifetime of a context token."""
    cleanup_interval_seconds: float = 60.0
    """How often expired tokens are swept."""
    max_tokens_per_visit: int = 4
    """Live tokens one visit may hold at once."""
    max_tool_calls_per_visit: int = 50
    """Context tool calls one visit may make."""
    hot_retention_seconds: float = 1800.0
    """Answers come from memory while a run is live and this long after."""


@dataclass(frozen=True)
class UploadSettings:
    """Run workspaces and uploaded files."""

    max_file_bytes: int = 50 * 1024 * 1024
    """Largest single uploaded file."""
    max_request_bytes: int = 200 * 1024 * 1024
    """Largest whole run-creation request."""
    default_ttl_hours: int = 720
    """Workspace retention when a run does not say."""
    sweep_interval_seconds: float = 3600.0
    """How often workspaces past their retention are deleted."""


@dataclass(frozen=True)
class Settings:
    """Everything the service is configured with."""

    host: str = "127.0.0.1"
    """Address the HTTP server binds."""
    port: int = 2438
    """Port the HTTP server listens on."""
    data_dir: Path = Path("data")
    """Directory for the SQLite file and run workspaces."""
    workflows_dir: Path | None = None
    """Extra workflow definitions (*.json) loaded at start-up beside the demos."""
    api_keys: tuple[ApiKey, ...] = (DEMO_KEY,)
    """External API keys with their scopes."""
    demo_key_in_use: bool = True
    """True when FLOWTRAIL_API_KEYS was unset and `demo-key` was created."""
    store: StoreSettings = field(default_factory=StoreSettings)
    stream: StreamSettings = field(default_factory=StreamSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    uploads: UploadSettings = field(default_factory=UploadSettings)
    load_demos: bool = True
    """Publish the shipped demo workflows at start-up."""

    @property
    def workspaces_dir(self) -> Path:
        """One directory per run lives here."""
        return self.data_dir / "workspaces"

    @classmethod
    def from_env(cls) -> Settings:
        """Read every setting from FLOWTRAIL_* environment variables."""
        data_dir = Path(_env("FLOWTRAIL_DATA_DIR", "data"))
        keys, demo = parse_api_keys(os.environ.get("FLOWTRAIL_API_KEYS"))
        workflows_dir = os.environ.get("FLOWTRAIL_WORKFLOWS_DIR")
        return cls(
            host=_env("FLOWTRAIL_HOST", "127.0.0.1"),
            port=_int("FLOWTRAIL_PORT", 2438),
            data_dir=data_dir,
            workflows_dir=Path(workflows_dir) if workflows_dir else None,
            api_keys=keys,
            demo_key_in_use=demo,
            store=StoreSettings(
                database_url=_env("FLOWTRAIL_DATABASE_URL", f"sqlite:///{data_dir}/flowtrail.db"),
                write_threads=_int("FLOWTRAIL_WRITE_THREADS", 4),
            ),
            stream=StreamSettings(
                keepalive_seconds=_float("FLOWTRAIL_KEEPALIVE_SECONDS", 30.0),
                coalesce_ms=_float("FLOWTRAIL_COALESCE_MS", 40.0),
                hot_buffer_messages=max(5000, _int("FLOWTRAIL_HOT_BUFFER_MESSAGES", 10_000)),
                hot_retention_seconds=_float("FLOWTRAIL_HOT_RETENTION_SECONDS", 1800.0),
                max_stream_seconds=_float("FLOWTRAIL_MAX_STREAM_SECONDS", 86_400.0),
            ),
            engine=EngineSettings(
                models_json=_env("FLOWTRAIL_MODELS", ""),
                default_model_id=_env("FLOWTRAIL_DEFAULT_MODEL", ""),
                scripted_pace_seconds=_float("FLOWTRAIL_SCRIPTED_PACE_SECONDS", 0.0),
                node_timeout_seconds=_float("FLOWTRAIL_NODE_TIMEOUT_SECONDS", 600.0),
                run_timeout_seconds=_float("FLOWTRAIL_RUN_TIMEOUT_SECONDS", 86_400.0),
                max_visits_per_node=_int("FLOWTRAIL_MAX_VISITS_PER_NODE", 50),
                max_visits_per_run=_int("FLOWTRAIL_MAX_VISITS_PER_RUN", 200),
                max_agent_iterations=_int("FLOWTRAIL_MAX_AGENT_ITERATIONS", 20),
                hermes_gateways=parse_hermes_gateways(os.environ.get("FLOWTRAIL_HERMES_GATEWAYS")),
            ),
            context=ContextSettings(
                enabled=_bool("FLOWTRAIL_CONTEXT_QUERY_ENABLED", True),
                token_ttl_seconds=_float("FLOWTRAIL_CONTEXT_TOKEN_TTL_SECONDS", 120.0),
                cleanup_interval_seconds=_float("FLOWTRAIL_CONTEXT_CLEANUP_INTERVAL_SECONDS", 60.0),
                max_tokens_per_visit=_int("FLOWTRAIL_CONTEXT_MAX_TOKENS_PER_VISIT", 4),
                max_tool_calls_per_visit=_int("FLOWTRAIL_CONTEXT_MAX_TOOL_CALLS", 50),
            ),
            uploads=UploadSettings(
                max_file_bytes=_int("FLOWTRAIL_MAX_UPLOAD_BYTES", 50 * 1024 * 1024),
                max_request_bytes=_int("FLOWTRAIL_MAX_REQUEST_BYTES", 200 * 1024 * 1024),
                sweep_interval_seconds=_float("FLOWTRAIL_WORKSPACE_SWEEP_SECONDS", 3600.0),
            ),
            load_demos=_bool("FLOWTRAIL_LOAD_DEMOS", True),
        )
