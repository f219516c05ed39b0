"""`--var name=value` and `--file PATH` of `flowtrail runs create`, checked against the workflow's declared inputs
before anything is sent, the way the service checks them (docs/workflows.md, "Run variables")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowtrail_client import WorkflowInputView, WorkflowView

JSON_TYPES = {"array": list, "object": dict}


class VariablesRefused(ValueError):
    """The variables do not fit the workflow's declared inputs; the message names every problem."""


def parse_pair(text: str) -> tuple[str, str]:
    """`name=value` (the value may be empty or hold `=`)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise VariablesRefused(f"--var {text!r} is not name=value")
    return name, value


def typed_value(declared: WorkflowInputView | None, name: str, text: str) -> Any:
    """The value of `--var name=text` as the input's declared type (text when undeclared or a string)."""
    kind = declared.type if declared is not None else "string"
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise VariablesRefused(f"{name}: {text!r} is not a number") from None
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise VariablesRefused(f"{name}: {text!r} is not true or false")
        return text.lower() == "true"
    if kind in JSON_TYPES:
        try:
            value = json.loads(text)
        except ValueError:
            raise VariablesRefused(f"{name}: {text!r} is not JSON (an {kind} is expected)") from None
        if not isinstance(value, JSON_TYPES[kind]):
            raise VariablesRefused(f"{name}: {text!r} is not a JSON {kind}")
        return value
    return text


def run_variables(workflow: WorkflowView, pairs: Sequence[str]) -> dict[str, Any]:
    """The variables of `--var` pairs, typed by the declared inputs; every problem named at once."""
    declared = {item.name: item for item in workflow.inputs}
    variables: dict[str, Any] = {}
    problems: list[str] = []
    for text in pairs:
        try:
            name, value = parse_pair(text)
            if declared and name not in declared:
                raise VariablesRefused(f"{name}: not an input of {workflow.workflow_name} "
                                       f"(its inputs: {', '.join(declared)})")
            variables[name] = typed_value(declared.get(name), name, value)
        except VariablesRefused as refused:
            problems.append(str(refused))
    missing = [item.name for item in workflow.inputs if item.required and variables.get(item.name) in (None, "")]
    if missing:
        problems.append(f"missing required input(s): {', '.join(missing)} (give each with --var NAME=VALUE)")
    if problems:
        raise VariablesRefused("; ".join(problems))
    return variables


def read_files(paths: Sequence[str]) -> list[tuple[str, bytes]]:
    """(name in the workspace, content) of each `--file` (its file name; a directory is refused)."""
    files = []
    for given in paths:
        path = Path(given)
        if not path.is_file():
            raise VariablesRefused(f"--file {given!r} is not a readable file")
        files.append((path.name, path.read_bytes()))
    return files
