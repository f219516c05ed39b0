"""The FLOWTRAIL_* reader: how a settings dataclass declares its variables and how their text is converted.

Each field an operator may set says, in one place, its variable, its default and what it means:
`name: Annotated[type, setting("FLOWTRAIL_NAME", "one line")] = default`. msgspec converts and
checks every value (`strict=False` reads "8" as 8 and "true" as True, and refuses "ture"). The groups
themselves live with their owners (engine/settings.py for the service, scripts/connect.py for the client
commands); this module knows no group.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
    get_args,
    get_origin,
    get_type_hints,
)

import msgspec
from msgspec import Meta


class SettingsGroup(Protocol):
    """A settings dataclass (what `dataclasses.fields` takes)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T", bound=SettingsGroup)

PREFIX = "FLOWTRAIL_"
FOREIGN_PREFIXES = ("FLOWTRAIL_TEST_", "FLOWTRAIL_BENCH_")
"""Variables the test suite and the benches read for themselves; the service leaves them alone."""


class SettingsError(SystemExit):
    """A setting the service cannot run with, said in one line: the variable, the problem, what is accepted.

    `flowtrail` prints it on stderr and exits with status 2; anywhere else it ends the process as SystemExit does.
    """

    def __init__(self, variable: str, problem: str, accepted: str) -> None:
        super().__init__(f"{variable}: {problem}; accepted: {accepted}")
        self.variable = variable


def setting(env: str, description: str, *, secret: bool = False, accepts: str = "", **constraints: Any) -> Meta:
    """The metadata of one settable field: its variable, one-line description, msgspec constraints, secrecy,
    and what it accepts when the type alone does not say (a URL, an id from another list)."""
    return Meta(description=description, extra={"env": env, "secret": secret, "accepts": accepts}, **constraints)


def decode_json_list(variable: str, raw: str, item: type[S]) -> tuple[S, ...]:
    """The JSON list of objects in a variable; anything else (an unknown field too) is a SettingsError naming it."""
    wanted = types.GenericAlias(tuple, (item, ...))
    try:
        decoded: tuple[S, ...] = msgspec.json.decode(raw.encode(), type=wanted)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        accepted = ", ".join(f.encode_name for f in msgspec.structs.fields(item))
        problem = str(exc).replace("Object contains unknown field", "unknown field").replace("\n", " ")
        raise SettingsError(variable, f"not a valid JSON list: {problem}",
                            f"a JSON list of objects (accepted fields: {accepted})") from None
    return decoded


@dataclass(frozen=True)
class Variable:
    """One environment variable of a settings group: the field it fills, its type, default and description."""

    name: str
    path: tuple[str, ...]
    hint: Any
    default: Any
    description: str
    secret: bool


def variables(cls: type[Any], path: tuple[str, ...] = ()) -> Iterator[Variable]:
    """Every variable a settings dataclass reads, in field order (sub-settings in place)."""
    hints = get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from variables(hint, (*path, f.name))
            continue
        tag = _tag_of(hint)
        if tag is not None:
            yield Variable(tag.env, (*path, f.name), hint, _default_of(f), tag.description, tag.secret)


def value_at(settings: Any, path: tuple[str, ...]) -> Any:
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


def read_section(cls: type[T], env: Mapping[str, str]) -> T:
    """One settings dataclass filled from the variables that are set (empty counts as unset)."""
    hints = get_type_hints(cls, include_extras=True)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            values[f.name] = read_section(hint, env)
            continue
        value = _value_set(hint, env)
        if value is not _UNSET:
            values[f.name] = value
    return cls(**values)


def read_field(cls: type[Any], name: str, env: Mapping[str, str]) -> Any:
    """One field of a settings dataclass from its own variable alone (its default when unset)."""
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    value = _value_set(get_type_hints(cls, include_extras=True)[name], env)
    return _default_of(field) if value is _UNSET else value


_UNSET: Any = object()


def _value_set(hint: Any, env: Mapping[str, str]) -> Any:
    """The converted value of the field's variable, or _UNSET when it is not set (empty counts as unset)."""
    tag = _tag_of(hint)
    raw = env.get(tag.env, "") if tag is not None else ""
    if tag is None or raw == "":
        return _UNSET
    return convert(tag.env, raw, hint, secret=tag.secret)


def _default_of(field: dataclasses.Field[Any]) -> Any:
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def convert(variable: str, raw: str, hint: Any, *, secret: bool) -> Any:
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


def refuse_unknown_variables(env: Mapping[str, str], *, known: Iterable[str]) -> None:
    """A FLOWTRAIL_* variable no settings group reads is a typo (or a setting that does not exist)."""
    names = set(known)
    unknown = sorted(
        name for name in env if name.startswith(PREFIX) and name not in names and not name.startswith(FOREIGN_PREFIXES)
    )
    if unknown:
        close = difflib.get_close_matches(unknown[0], names, n=1)
        problem = "no such setting" if len(unknown) == 1 else "no such settings"
        raise SettingsError(", ".join(unknown), problem + (f" (did you mean {close[0]}?)" if close else ""),
                            "the variables `flowtrail config` lists (README: Configuration)")


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
