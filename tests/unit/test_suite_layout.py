"""The suite keeps its shape: tests live in one of its areas, and each fixture is defined once."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
AREAS = ("unit", "integration", "e2e", "browser")


def is_fixture(decorator: ast.expr) -> bool:
    """True for `@pytest.fixture`, `@pytest.fixture(...)` and pytest_asyncio's."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def fixture_name(function: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr) -> str:
    """The name the fixture is requested by (`name=` wins over the function's name)."""
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return function.name


def fixtures_in(path: Path) -> Iterator[tuple[str, int]]:
    """(fixture name, line) of every fixture a file defines."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                if is_fixture(decorator):
                    yield fixture_name(node, decorator), node.lineno


def test_no_fixture_is_defined_more_than_once():
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for name, line in fixtures_in(path):
            places[name].append(f"{path.relative_to(ROOT)}:{line}")
    twice = {name: where for name, where in places.items() if len(where) > 1}
    assert not twice, "fixtures defined more than once (define each in one conftest):\n" + "\n".join(
        f"  {name}: {', '.join(where)}" for name, where in sorted(twice.items()))


def test_every_test_module_lives_in_one_of_the_areas():
    astray = [str(path.relative_to(ROOT)) for path in sorted(TESTS.rglob("test_*.py"))
              if path.relative_to(TESTS).parts[0] not in AREAS]
    assert not astray, f"test modules outside tests/{{{','.join(AREAS)}}}/: {', '.join(astray)}"
