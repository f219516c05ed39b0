"""Typed settings, read once and strictly from FLOWTRAIL_* environment variables.

Each field an operator may set says, in one place, its variable, its default and what it means:
`name: Annotated[type, setting("FLOWTRAIL_NAME", "one line")] = default`. msgspec converts and
checks every value (`strict=False` reads "8" as 8 and "true" as True, and refuses "ture"); an unknown
FLOWTRAIL_* variable is refused too. The README's table is generated from these fields
(`flowtrail config --reference`). The settings stay frozen dataclasses so that callers and tests
build and `dataclasses.replace` them with keyword arguments.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import ipaddress
import os
import re
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, TypeVar, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

import msgspec
from msgspec import Meta

from engine.llm.types import ModelConfig
from engine.store.location import parse_database_url

S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")

PREFIX = "FLOWTRAIL_"
FOREIGN_PREFIXES = ("FLOWTRAIL_TEST_", "FLOWTRAIL_BENCH_")
"""Variables the test suite and the benches read for themselves; the service leaves them alone."""
RESERVED_MODEL_IDS = frozenset({"scripted"})


class SettingsError(SystemExit):
    """A setting the service cannot run with, said in one line: the variable, the problem, what is accepted.

    `flowtrail` prints it on stderr and exits with status 2; anywhere else it ends the process as SystemExit does.
    """

    def __init__(self, variable: str, problem: str, accepted: str) -> None:
        super().__init__(f"{variable}: {problem}; accepted: {accepted}")
        self.variable = variable


def setting(env: str, description: str, *, secret: bool = False, accepts: str = "", **constraints: Any) -> Meta:
    """The metadata of one settable field: its variable, one-line description, msgspec constraints, secrecy,
    and what it accepts when the type alone does not say (a JSON list kept as text, a URL)."""
    return Meta(description=description, extra={"env": env, "secret": secret, "accepts": accepts}, **constraints)


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
    """The gateways in FLOWTRAIL_HERMES_GATEWAYS (a JSON list); anything else is a SettingsError saying what is wrong."""
    if not raw or not raw.strip():
        return ()
    gateways = decode_json_list("FLOWTRAIL_HERMES_GATEWAYS", raw, HermesGateway)
    _check_gateways(gateways)
    return gateways


def _check_gateways(gateways: tuple[HermesGateway, ...]) -> None:
    ids = [gateway.id for gateway in gateways]
    shared = sorted({i for i in ids if ids.count(i) > 1})
    if shared:
        raise SettingsError("FLOWTRAIL_HERMES_GATEWAYS", f"two gateways share the id {shared[0]!r}", "distinct gateway ids")


DEMO_KEY = ApiKey(key="demo-key", id="demo", sees_all_runs=True)


def decode_json_list(variable: str, raw: str, item: type[S]) -> tuple[S, ...]:
    """The JSON list of objects in a variable; anything else (an unknown field too) is a SettingsError naming it."""
    wanted: Any = tuple[item, ...]  # type: ignore[valid-type]  # the item type is the caller's
    try:
        decoded: tuple[S, ...] = msgspec.json.decode(raw.encode(), type=wanted)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        accepted = ", ".join(f.encode_name for f in msgspec.structs.fields(item))
        problem = str(exc).replace("Object contains unknown field", "unknown field").replace("\n", " ")
        raise SettingsError(variable, f"not a valid JSON list: {problem}",
                            f"a JSON list of objects (accepted fields: {accepted})") from None
    return decoded


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
        "reads and writes are retried this long, then it answers `503 STORE_UNAVAILABLE`", gt=0, le=60,
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
        "FLOWTRAIL_COALESCE_MS", "window in which stream chunks of a visit are merged and appended together", ge=0,
    )] = 40.0
    hot_buffer_messages: Annotated[int, setting(
        "FLOWTRAIL_HOT_BUFFER_MESSAGES", "SSE messages kept in memory per run; older ones come from the store",
        ge=5000,
    )] = 10_000
    hot_retention_seconds: Annotated[float, setting(
        "FLOWTRAIL_HOT_RETENTION_SECONDS", "how long an idle run's projections stay in memory", ge=0,
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
class LimitSettings:
    """What one API key, and one connection, may hold or ask of the service."""

    max_streams_per_key: Annotated[int, setting(
        "FLOWTRAIL_MAX_STREAMS_PER_KEY", "open SSE streams one API key may hold; one more is answered "
        "`429 TOO_MANY_STREAMS`", ge=1,
    )] = 500
    rate_limit_per_key: Annotated[float, setting(
        "FLOWTRAIL_RATE_LIMIT_PER_KEY", "requests per second one API key may make on average (0: no limit); beyond "
        "it `429 RATE_LIMITED` with `Retry-After`", ge=0,
    )] = 0.0
    rate_limit_burst: Annotated[int, setting(
        "FLOWTRAIL_RATE_LIMIT_BURST", "requests one API key may make at once above its rate (the bucket's size)", ge=1,
    )] = 100
    idle_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_IDLE_TIMEOUT_SECONDS", "a kept-alive HTTP connection with no new request this long after its last "
        "response is closed", gt=0,
    )] = 5.0
    header_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_HEADER_TIMEOUT_SECONDS", "a connection that has not sent a whole request head (request line and "
        "headers) this long after it opened or after its last response is closed", gt=0,
    )] = 10.0


@dataclass(frozen=True)
class DispatchSettings:
    """How replicas on one PostgreSQL share the runs (procrastinate jobs; unused on SQLite)."""

    worker_concurrency: Annotated[int, setting(
        "FLOWTRAIL_WORKER_CONCURRENCY", "runs one replica executes at once (the rest wait as queued jobs)", ge=1,
    )] = 100
    heartbeat_seconds: Annotated[float, setting(
        "FLOWTRAIL_WORKER_HEARTBEAT_SECONDS", "how often a replica's job worker says it is alive", gt=0,
    )] = 5.0
    stall_seconds: Annotated[float, setting(
        "FLOWTRAIL_WORKER_STALL_SECONDS", "a replica silent this long is taken for dead: its runs continue on "
        "another replica", gt=0,
    )] = 30.0
    pool_size: Annotated[int, setting(
        "FLOWTRAIL_WORKER_POOL_SIZE", "PostgreSQL connections of the job queue per replica (one more listens)", ge=2,
    )] = 3


@dataclass(frozen=True)
class EngineSettings:
    """Limits and models of the workflow engine."""

    models_json: Annotated[str, setting(
        "FLOWTRAIL_MODELS", "JSON list of OpenAI-compatible models `{\"id\", \"base_url\", \"model\", \"api_key_env\"}`; "
        "the key is read from the variable `api_key_env` names, never stored or logged",
        accepts="a JSON list of objects",
    )] = ""
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
        "\"profile\", \"model\", \"effort\", \"system_prompt\", \"auto_approve\", \"idle_timeout_seconds\"}` that agent "
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
    hot_retention_seconds: float = 1800.0
    """Answers come from memory while a run is live and this long after."""


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
class CommandSettings:
    """What the client commands (`flowtrail demo`, `audit`, `export`, `runs`) use; the server ignores them."""

    url: Annotated[str, setting(
        "FLOWTRAIL_URL", "base URL where the client commands find the service (empty: http://FLOWTRAIL_HOST:FLOWTRAIL_PORT)",
    )] = ""
    api_key: Annotated[str, setting(
        "FLOWTRAIL_API_KEY", "API key the client commands use when `--key` is not given", secret=True,
    )] = ""

    demo_key: Annotated[str, setting(
        "FLOWTRAIL_DEMO_KEY", "API key `flowtrail demo` uses (empty: the first configured key)", secret=True,
    )] = ""
    demo_workflow: Annotated[str, setting(
        "FLOWTRAIL_DEMO_WORKFLOW", "workflow `flowtrail demo` (and `./run`) starts when none is named",
    )] = "demo-report"
    audit_key: Annotated[str, setting(
        "FLOWTRAIL_AUDIT_KEY", "API key `flowtrail audit` uses (empty: the first configured key; it needs "
        "`seesAllRuns` to audit other keys' runs)", secret=True,
    )] = ""


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
        "FLOWTRAIL_API_KEYS", "JSON list of `{\"key\", \"id\", \"workflowNames\", \"workflowIds\", \"seesAllRuns\"}`: "
        "both lists empty = every workflow; a key uses only the runs it created unless `seesAllRuns`; `id` is the "
        "stable, non-secret name runs are recorded under (default: a hash of the key; ids must differ). "
        "Unset: the key `demo-key`, no scope limit, sees all runs", secret=True,
    )] = (DEMO_KEY,)
    demo_key_in_use: bool = True
    """True when FLOWTRAIL_API_KEYS was unset and `demo-key` was created."""
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
    commands: CommandSettings = field(default_factory=CommandSettings)
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
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Every setting from FLOWTRAIL_* variables (default: the process environment); SettingsError on any mistake."""
        env = os.environ if environ is None else environ
        settings = _section(cls, env)
        if not env.get("FLOWTRAIL_DATABASE_URL"):
            default_url = f"sqlite:///{settings.data_dir}/flowtrail.db"
            settings = dataclasses.replace(settings, store=dataclasses.replace(settings.store, database_url=default_url))
        settings = dataclasses.replace(settings, demo_key_in_use=not env.get("FLOWTRAIL_API_KEYS"))
        _check_api_keys(settings.api_keys)
        _check_demo_key_exposure(settings)
        _check_database_url(settings.store.database_url)
        _check_workflows_dir(settings.workflows_dir)
        models = _check_models(settings.engine)
        _check_gateways(settings.engine.hermes_gateways)
        key_variables = {m.api_key_env for m in models} | {g.api_key_env for g in settings.engine.hermes_gateways}
        _refuse_unknown_variables(env, allowed={name for name in key_variables if name})
        return settings


@dataclass(frozen=True)
class Variable:
    """One environment variable of the model: the field it fills, its type, default and description."""

    name: str
    path: tuple[str, ...]
    hint: Any
    default: Any
    description: str
    secret: bool


def variables(cls: type[Any] = Settings, path: tuple[str, ...] = ()) -> Iterator[Variable]:
    """Every variable the settings read, in field order (sub-settings in place)."""
    hints = get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from variables(hint, (*path, f.name))
            continue
        tag = _tag_of(hint)
        if tag is not None:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            yield Variable(tag.env, (*path, f.name), hint, default, tag.description, tag.secret)


def value_at(settings: Settings, path: tuple[str, ...]) -> Any:
    """The value of the field at `path` (e.g. ("store", "database_url"))."""
    value: Any = settings
    for name in path:
        value = getattr(value, name)
    return value


def accepted_values(hint: Any) -> str:
    """What a variable of this type accepts, in words."""
    base, meta = _split(hint)
    if meta is not None and meta.extra and meta.extra.get("accepts"):
        return str(meta.extra["accepts"])
    if _is_json_list(base):
        return "a JSON list of objects"
    if get_origin(base) is Literal:
        return "one of " + ", ".join(str(choice) for choice in get_args(base))
    words = {bool: "true or false (or 1, 0)", int: "a whole number", float: "a number", Path: "a path",
             str: "text"}.get(base, str(base))
    bounds = [f"{sign} {getattr(meta, name):g}" for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
              if meta is not None and getattr(meta, name) is not None]
    return " ".join([words, " and ".join(bounds)]).strip()


class _Tag(NamedTuple):
    """What `setting(...)` put on a field: its variable, description and secrecy."""

    env: str
    description: str
    secret: bool


def _meta_of(hint: Any) -> Meta | None:
    return next((m for m in get_args(hint)[1:] if isinstance(m, Meta) and m.extra and "env" in m.extra), None)


def _tag_of(hint: Any) -> _Tag | None:
    meta = _meta_of(hint)
    if meta is None or meta.extra is None:
        return None
    return _Tag(meta.extra["env"], meta.description or "", meta.extra["secret"])


def _split(hint: Any) -> tuple[Any, Meta | None]:
    """The bare type under Annotated (None dropped from an optional) and its setting metadata."""
    base = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    if isinstance(base, types.UnionType):
        base = next(arg for arg in get_args(base) if arg is not type(None))
    return base, _meta_of(hint)


def _is_json_list(base: Any) -> bool:
    args = get_args(base)
    return get_origin(base) is tuple and bool(args) and isinstance(args[0], type) and issubclass(args[0], msgspec.Struct)


def _section(cls: type[T], env: Mapping[str, str]) -> T:
    """One settings dataclass filled from the variables that are set (empty counts as unset)."""
    hints = get_type_hints(cls, include_extras=True)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # T is always one of the settings dataclasses
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            values[f.name] = _section(hint, env)  # type: ignore[arg-type]  # a settings dataclass
            continue
        tag = _tag_of(hint)
        raw = env.get(tag.env, "") if tag is not None else ""
        if tag is not None and raw != "":
            values[f.name] = _convert(tag.env, raw, hint, secret=tag.secret)
    return cls(**values)


def _convert(variable: str, raw: str, hint: Any, *, secret: bool) -> Any:
    """One variable's text as its field's type, or a SettingsError saying what the variable accepts."""
    base, _ = _split(hint)
    if _is_json_list(base):
        return decode_json_list(variable, raw, get_args(base)[0])
    if base is Path:
        return Path(raw)
    try:
        return msgspec.convert(raw, type=hint, strict=False)
    except msgspec.ValidationError:
        shown = "an unusable value" if secret else repr(raw)
        raise SettingsError(variable, f"got {shown}", accepted_values(hint)) from None


def _check_api_keys(keys: tuple[ApiKey, ...]) -> None:
    variable, accepted = "FLOWTRAIL_API_KEYS", "a non-empty JSON list of keys with distinct ids (unset: `demo-key`)"
    if not keys:
        raise SettingsError(variable, "the list is empty, so no caller could use the service", accepted)
    if any(not k.key for k in keys):
        raise SettingsError(variable, "a key has an empty `key`", accepted)
    ids = [k.key_id() for k in keys]
    if len(set(ids)) != len(ids):
        shared = sorted({i for i in ids if ids.count(i) > 1})
        raise SettingsError(variable, f"two keys share the id {shared[0]!r} (runs are owned by key id)", accepted)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1): only this machine reaches them."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_demo_key_exposure(settings: Settings) -> None:
    if settings.demo_key_in_use and not settings.allow_demo_key_on_network and not is_loopback(settings.host):
        raise SettingsError(
            "FLOWTRAIL_HOST", f"{settings.host!r} is not a loopback address and FLOWTRAIL_API_KEYS is unset, "
            "so anyone on the network could use the generated `demo-key`",
            "a loopback address, or FLOWTRAIL_API_KEYS set, or FLOWTRAIL_ALLOW_DEMO_KEY_ON_NETWORK=true",
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


def _check_models(engine: EngineSettings) -> tuple[ModelConfig, ...]:
    """The configured models; ids distinct and not reserved, the default one of them (or `scripted`)."""
    models = decode_json_list("FLOWTRAIL_MODELS", engine.models_json, ModelConfig) if engine.models_json.strip() else ()
    ids = [m.id for m in models]
    taken = sorted({i for i in ids if ids.count(i) > 1 or i in RESERVED_MODEL_IDS})
    if taken:
        raise SettingsError("FLOWTRAIL_MODELS", f"the model id {taken[0]!r} is reserved or configured twice",
                            "distinct ids other than `scripted`")
    if engine.default_model_id and engine.default_model_id not in {*ids, *RESERVED_MODEL_IDS}:
        raise SettingsError("FLOWTRAIL_DEFAULT_MODEL", f"{engine.default_model_id!r} is not a configured model",
                            "one of " + ", ".join(repr(i) for i in [*ids, *sorted(RESERVED_MODEL_IDS)]))
    return models


def _refuse_unknown_variables(env: Mapping[str, str], *, allowed: set[str]) -> None:
    """A FLOWTRAIL_* variable the settings do not read is a typo (or a setting that does not exist)."""
    known = {v.name for v in variables()}
    unknown = sorted(
        name for name in env
        if name.startswith(PREFIX) and name not in known | allowed and not name.startswith(FOREIGN_PREFIXES)
    )
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        problem = "no such setting" if len(unknown) == 1 else "no such settings"
        raise SettingsError(", ".join(unknown), problem + (f" (did you mean {close[0]}?)" if close else ""),
                            "the variables `flowtrail config` lists (README: Configuration)")
