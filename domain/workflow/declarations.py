"""Declared values: a run input or a model node's answer field (`Declaration`), a run result (`Result`).

The type names they use are one vocabulary with one map to the JSON values each accepts;
run creation checks variables with it and the output check converts answers along it.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

OutputType = Literal["string", "number", "boolean", "array", "object", "filePath", "directoryPath", "file"]
PATH_TYPES = ("filePath", "directoryPath", "file")

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "boolean": (bool,), "array": (list,), "object": (dict,),
    "filePath": (str,), "directoryPath": (str,), "file": (str,),
}
"""The JSON values (as Python types) each declared type accepts as they are."""

_KINDS = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def of_type(value: Any, declared: OutputType) -> bool:
    """True when a JSON value is of the declared type as it is (a boolean is no number)."""
    accepted = JSON_TYPES[declared]
    return isinstance(value, accepted) and not (isinstance(value, bool) and bool not in accepted)


def json_kind(value: Any) -> str:
    """The JSON type name of a value (`number`, `array`, …)."""
    return _KINDS.get(type(value), type(value).__name__)


class Declaration(msgspec.Struct, frozen=True):
    """A run variable the workflow asks for, or a field a model node must answer with (its answer is then strict JSON).

    Run creation refuses a missing required input or one of the wrong type.
    """

    name: str
    type: OutputType = "string"
    required: bool = False
    description: str = ""


class Result(msgspec.Struct, frozen=True):
    """A result of the run; `value` is a template (default `{{name}}`)."""

    name: str
    type: OutputType = "string"
    description: str = ""
    value: Any | msgspec.UnsetType = msgspec.UNSET

    @property
    def template(self) -> Any:
        """What the result is rendered from: its `value`, else `{{name}}` (an explicit null stays null)."""
        return "{{" + self.name + "}}" if self.value is msgspec.UNSET else self.value
