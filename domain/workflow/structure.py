"""The structure of a JSON value walked along a type: every unknown key and every value msgspec refuses.

msgspec stops at the first error and ignores unknown keys (so recorded versions keep decoding),
so publishing walks the document itself, key by key, along the workflow model's Structs.
"""

from __future__ import annotations

import re
import types
from functools import cache
from typing import Any, Union, get_args, get_origin

import msgspec

KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
AT_SUFFIX = re.compile(r" - at `\$[^`]*`$")


class Problem(msgspec.Struct, frozen=True):
    """One thing wrong with a definition, at the JSON path where it is (`$.nodes[2].data.promt`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def key_path(path: str, key: str) -> str:
    """The JSON path of a key inside the value at `path` (bracketed when it is no identifier)."""
    return f"{path}.{key}" if KEY_RE.match(key) else f"{path}[{msgspec.json.encode(key).decode()}]"


def _msgspec_problem(value: Any, kind: Any, path: str) -> list[Problem]:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError as error:
        return [Problem(path, AT_SUFFIX.sub("", str(error)))]
    return []


@cache
def _fields(kind: type[msgspec.Struct]) -> dict[str, msgspec.structs.FieldInfo]:
    """A Struct's fields by their JSON name (resolving annotations is slow, so once a type)."""
    return {field.encode_name: field for field in msgspec.structs.fields(kind)}


def _struct_problems(value: Any, kind: type[msgspec.Struct], path: str) -> list[Problem]:
    if not isinstance(value, dict):
        return _msgspec_problem(value, kind, path)
    fields = _fields(kind)
    tag_field = kind.__struct_config__.tag_field
    problems: list[Problem] = []
    for key, item in value.items():
        field = fields.get(key)
        if field is not None:
            problems += structure_problems(item, field.type, key_path(path, key))
        elif key != tag_field:
            problems.append(Problem(key_path(path, key), "unknown field"))
    for name, field in fields.items():
        if field.required and name not in value:
            problems.append(Problem(path, f"Object missing required field `{name}`"))
    return problems


def _tagged(members: tuple[Any, ...]) -> dict[Any, type[msgspec.Struct]]:
    return {
        member.__struct_config__.tag: member for member in members
        if isinstance(member, type) and issubclass(member, msgspec.Struct) and member.__struct_config__.tag_field
    }


def _union_problems(value: Any, kind: Any, path: str) -> list[Problem]:
    members = tuple(member for member in get_args(kind) if member is not msgspec.UnsetType)
    if value is None and type(None) in members:
        return []
    if Any in members:
        return []
    tagged = _tagged(members)
    if tagged and isinstance(value, dict):
        tag_field = str(next(iter(tagged.values())).__struct_config__.tag_field)
        if tag_field not in value:
            return [Problem(path, f"Object missing required field `{tag_field}`")]
        chosen = tagged.get(value[tag_field])
        if chosen is None:
            expected = ", ".join(str(tag) for tag in tagged)
            problem = f"unknown {tag_field} {value[tag_field]!r} (expected one of {expected})"
            return [Problem(key_path(path, tag_field), problem)]
        return _struct_problems(value, chosen, path)
    structs = [m for m in members if isinstance(m, type) and issubclass(m, msgspec.Struct)]
    if structs and isinstance(value, dict):
        return _struct_problems(value, structs[0], path)
    return _msgspec_problem(value, kind, path)


def structure_problems(value: Any, kind: Any, path: str = "$") -> list[Problem]:
    """Every unknown key and every value msgspec refuses, walking `value` along the type `kind`."""
    origin = get_origin(kind)
    if kind is Any:
        return []
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return _struct_problems(value, kind, path)
    if origin in (Union, types.UnionType):
        return _union_problems(value, kind, path)
    if origin is list and isinstance(value, list):
        (item_kind,) = get_args(kind)
        return [found for index, item in enumerate(value) for found in structure_problems(item, item_kind, f"{path}[{index}]")]
    return _msgspec_problem(value, kind, path)
