"""Node input templates: `{{path}}` references resolved from a scope dict.

The scope maps run variables (`topic`) and node ids (`research`, holding that node's output
data) to values. A path walks it segment by segment: `{{research.summary}}` is a field,
`{{items.0}}` a list index, `{{a.b.c}}` any depth. A segment is any run of characters
other than `.`, `{`, `}` and whitespace, so node ids like `llm-1` and non-ASCII variable
names work. A missing path raises `MissingReference`; nothing is ever guessed or blanked.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from domain.errors import MissingReference

SEGMENT = r"[^.\s{}]+"
PATH_RE = re.compile(rf"^{SEGMENT}(?:\.{SEGMENT})*$")
REFERENCE_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


def split_path(path: str) -> list[str]:
    """The segments of a reference path; ValueError when it is malformed."""
    if not PATH_RE.match(path):
        raise ValueError(f"malformed reference path {path!r}: use dotted names like node.field or items.0")
    return path.split(".")


def resolve(path: str, scope: dict[str, Any]) -> Any:
    """The value a path points at; MissingReference names the first segment not found."""
    segments = split_path(path)
    head = segments[0]
    if head not in scope:
        raise MissingReference(path, f"no variable or node output named {head!r}")
    value = scope[head]
    walked = head
    for segment in segments[1:]:
        if isinstance(value, dict):
            if segment not in value:
                raise MissingReference(path, f"{walked!r} has no field {segment!r}")
            value = value[segment]
        elif isinstance(value, list):
            if not segment.isdigit() or int(segment) >= len(value):
                raise MissingReference(path, f"{walked!r} is a list of {len(value)} with no index {segment!r}")
            value = value[int(segment)]
        else:
            kind = "null" if value is None else type(value).__name__
            raise MissingReference(path, f"{walked!r} is a {kind}, not an object or list")
        walked = f"{walked}.{segment}"
    return value


def as_text(value: Any) -> str:
    """How a value reads inside a string: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def references(text: str) -> list[str]:
    """The distinct paths a template refers to, in order of first appearance."""
    seen: list[str] = []
    for match in REFERENCE_RE.finditer(text):
        if match.group(1) not in seen:
            seen.append(match.group(1))
    return seen


def check_template(text: str) -> list[str]:
    """Problems with a template's syntax (malformed paths), without resolving anything."""
    problems = []
    for path in references(text):
        try:
            split_path(path)
        except ValueError as error:
            problems.append(str(error))
    return problems


def check_templates(value: Any, where: str = "") -> list[str]:
    """Template problems in every string inside dicts and lists, each prefixed with where it is."""
    if isinstance(value, str):
        return [f"{where}: {problem}" if where else problem for problem in check_template(value)]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in check_templates(item, f"{where}.{key}".lstrip("."))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in check_templates(item, f"{where}[{index}]")]
    return []


def render_template(text: str, scope: dict[str, Any]) -> str:
    """The text with every `{{path}}` replaced by its value (non-strings JSON-encoded)."""
    return REFERENCE_RE.sub(lambda match: as_text(resolve(match.group(1), scope)), text)


def render_value(value: Any, scope: dict[str, Any]) -> Any:
    """Render strings inside dicts and lists; a string that is exactly one `{{path}}` keeps the value's type."""
    if isinstance(value, str):
        if "{{" not in value:
            return value  # no reference: nothing to render (a fast path for long scripts)
        whole = REFERENCE_RE.fullmatch(value)
        if whole:
            return resolve(whole.group(1), scope)
        return render_template(value, scope)
    if isinstance(value, dict):
        return {key: render_value(item, scope) for key, item in value.items()}
    if isinstance(value, list):
        return [render_value(item, scope) for item in value]
    return value
