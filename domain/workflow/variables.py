"""A run's variables checked against the inputs its workflow declares (before anything is appended)."""

from __future__ import annotations

from typing import Any

from domain.errors import DomainError
from domain.workflow.declarations import json_kind, of_type
from domain.workflow.definition import WorkflowDefinition, workflow_inputs


class InvalidVariables(DomainError):
    """A run's variables miss a required input or hold a value of the wrong declared type."""

    code = "VALIDATION_FAILED"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("variables: " + "; ".join(problems), problems=problems)
        self.problems = problems


def variable_problems(defn: WorkflowDefinition, variables: dict[str, Any]) -> list[str]:
    """Required inputs not given (absent, null or "") and values not of their declared type."""
    declared = workflow_inputs(defn)
    missing = [item.name for item in declared if item.required and variables.get(item.name) in (None, "")]
    problems = [f"missing required input(s): {', '.join(missing)}"] if missing else []
    for item in declared:
        value = variables.get(item.name)
        if value is not None and not of_type(value, item.type):
            problems.append(f"{item.name!r} must be of type {item.type}, got {json_kind(value)}")
    return problems


def check_variables(defn: WorkflowDefinition, variables: dict[str, Any]) -> None:
    """Raise InvalidVariables (VALIDATION_FAILED) naming every missing or mistyped input."""
    problems = variable_problems(defn, variables)
    if problems:
        raise InvalidVariables(problems)
