"""A run's variables checked against the inputs its workflow declares (before anything is appended)."""

from __future__ import annotations

from typing import Any

from domain.errors import DomainError
from domain.workflow.lenient import WorkflowDefinition, workflow_inputs


class InvalidVariables(DomainError):
    """A run's variables miss a required input or hold a value of the wrong declared type."""

    code = "VALIDATION_FAILED"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("variables: " + "; ".join(problems), problems=problems)
        self.problems = problems


INPUT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "boolean": (bool,), "array": (list,), "object": (dict,),
    "filePath": (str,), "directoryPath": (str,), "file": (str,),
}
"""The JSON values a declared input type accepts."""


def _json_kind(value: Any) -> str:
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return kinds.get(type(value), type(value).__name__)


def _of_type(value: Any, declared: str) -> bool:
    accepted = INPUT_TYPES.get(declared)
    if accepted is None:
        return True  # a type recorded before types were checked: nothing to compare with
    return isinstance(value, accepted) and not (isinstance(value, bool) and bool not in accepted)


def variable_problems(defn: WorkflowDefinition, variables: dict[str, Any]) -> list[str]:
    """Required inputs not given (absent, null or "") and values not of their declared type."""
    declared = workflow_inputs(defn)
    missing = [item.name for item in declared if item.required and variables.get(item.name) in (None, "")]
    problems = [f"missing required input(s): {', '.join(missing)}"] if missing else []
    for item in declared:
        value = variables.get(item.name)
        if value is not None and not _of_type(value, item.type):
            problems.append(f"{item.name!r} must be of type {item.type}, got {_json_kind(value)}")
    return problems


def check_variables(defn: WorkflowDefinition, variables: dict[str, Any]) -> None:
    """Raise InvalidVariables (VALIDATION_FAILED) naming every missing or mistyped input."""
    problems = variable_problems(defn, variables)
    if problems:
        raise InvalidVariables(problems)
