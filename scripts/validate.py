"""`flowtrail validate FILE...`: every problem of workflow files, each with its JSON path, as publishing would find them."""

from __future__ import annotations

import sys
from pathlib import Path

from domain.workflow import workflow_schema_text
from engine.catalogue import check_files
from engine.llm import SCRIPTED_ID
from scripts.connect import server_settings


def configured_model_ids() -> list[str]:
    """The model ids a definition may name here: `scripted` and FLOWTRAIL_MODELS."""
    return [SCRIPTED_ID, *(model.id for model in server_settings().engine.models)]


def validate_files(files: list[str]) -> int:
    """Print `FILE: $.path: problem` for every problem; exit status 1 when there is any, else one OK line."""
    checked = check_files([Path(name) for name in files], configured_model_ids())
    problems = [(file.path, problem) for file in checked for problem in file.problems]
    for path, problem in problems:
        print(f"{path}: {problem}")
    if problems:
        bad = len({path for path, _ in problems})
        print(f"{len(problems)} problem(s) in {bad} of {len(checked)} file(s)", file=sys.stderr)
        return 1
    print(f"OK: {len(checked)} workflow file(s), no problems")
    return 0


def print_schema() -> int:
    """Write the JSON Schema of workflow definitions (docs/workflow.schema.json) to standard output."""
    sys.stdout.buffer.write(workflow_schema_text())
    return 0
