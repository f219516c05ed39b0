"""The layers keep their order: every import of our code, wherever it stands, obeys the house rules.

Imports are read with `ast`, wherever they stand: module level, inside functions, under
`if TYPE_CHECKING:`, inside `try:` blocks. No import is excused.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = "flowtrail_client"
CLIENT_HOME = ROOT / "clients" / "python"
"""The client is a distribution of its own (clients/python); its package is a layer like the others."""
LAYERS = ("domain", "projections", "engine", "api", "scripts", CLIENT)
COMPOSITION_ROOT = "engine.bootstrap"

@dataclass(frozen=True)
class Import:
    """One imported module, where the importing module names it."""

    importer: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.importer} imports {self.target}"


def module_name(path: Path) -> str:
    """The dotted name of one of our files."""
    parts = path.relative_to(CLIENT_HOME if path.is_relative_to(CLIENT_HOME) else ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def home_of(layer: str) -> Path:
    """The directory of a layer's package."""
    return (CLIENT_HOME if layer == CLIENT else ROOT) / layer


@cache
def our_modules() -> dict[str, Path]:
    """Every module of the layers, by dotted name."""
    paths = sorted(path for layer in LAYERS for path in home_of(layer).rglob("*.py"))
    return {module_name(path): path for path in paths}


def source_of(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name a `from ... import` reads from (leading dots resolved)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_in(module: str, path: Path) -> Iterator[Import]:
    """Every import in one file; `from package import module` imports that module."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, path, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = source_of(module, path, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield Import(module, submodule if submodule in our_modules() else source, path, node.lineno)


@cache
def every_import() -> tuple[Import, ...]:
    """Every import of every module of the layers."""
    return tuple(found for module, path in our_modules().items() for found in imports_in(module, path))


def top(name: str) -> str:
    return name.partition(".")[0]


def within(name: str, *packages: str) -> bool:
    """True when the module is one of the packages or inside one."""
    return any(name == package or name.startswith(package + ".") for package in packages)


def ours(found: Import) -> bool:
    return top(found.target) in LAYERS


def a_library_but_msgspec(found: Import) -> bool:
    return not ours(found) and top(found.target) not in sys.stdlib_module_names and top(found.target) != "msgspec"


@dataclass(frozen=True)
class Rule:
    """What the imports of some packages may not do."""

    says: str
    packages: tuple[str, ...]
    broken_by: Callable[[Import], bool]

    def breaking(self) -> list[Import]:
        """The imports that break the rule."""
        return [found for found in every_import() if within(found.importer, *self.packages) and self.broken_by(found)]


DOMAIN_KEEPS_TO_ITSELF = Rule(
    "the domain imports nothing of ours but the domain", ("domain",),
    lambda found: ours(found) and not within(found.target, "domain"),
)
DOMAIN_USES_ONLY_MSGSPEC = Rule(
    "the domain imports nothing outside the standard library but msgspec", ("domain",), a_library_but_msgspec,
)
PROJECTIONS_KEEP_TO_THE_DOMAIN = Rule(
    "projections import nothing of ours but the domain and projections", ("projections",),
    lambda found: ours(found) and not within(found.target, "domain", "projections"),
)
PROJECTIONS_USE_ONLY_MSGSPEC = Rule(
    "projections import nothing outside the standard library but msgspec", ("projections",), a_library_but_msgspec,
)
ENGINE_WITHOUT_LITESTAR = Rule(
    "the engine imports no litestar", ("engine",), lambda found: top(found.target) == "litestar",
)
API_AT_THE_TOP = Rule(
    "nothing but the api and the scripts imports the api", LAYERS,
    lambda found: within(found.target, "api") and not within(found.importer, "api", "scripts"),
)
COMPOSITION_ROOT_AT_THE_TOP = Rule(
    f"nothing but the api, the scripts and {COMPOSITION_ROOT} itself imports {COMPOSITION_ROOT}", LAYERS,
    lambda found: within(found.target, COMPOSITION_ROOT)
    and not (within(found.importer, "api", "scripts") or found.importer == COMPOSITION_ROOT),
)
EXECUTION_BEHIND_ITS_PORTS = Rule(
    "execution imports no context package (it uses the ports it declares)", ("engine.execution",),
    lambda found: within(found.target, "engine.context"),
)
ENGINE_FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"engine.clock", "engine.waiting", "engine.config", "engine.loopback", "engine.observability",
               "engine.limits"}),
    frozenset({"engine.access", "engine.store", "engine.llm", "engine.hermes", "engine.workspace"}),
    frozenset({"engine.settings", "engine.runs", "engine.catalogue", "engine.readmodel", "engine.dispatch",
               "engine.webhooks"}),
    frozenset({"engine.execution", "engine.context"}),
    frozenset({"engine.bootstrap"}),
)
"""The floors inside the engine, lowest first: leaves; the log, models, gateways and access; settings and a run's
write and read side; what executes runs and answers agents; the composition root. A package is on one floor."""


def floor_of(module: str) -> int | None:
    """The floor of an engine module (its package's), or None outside the engine."""
    for level, packages in enumerate(ENGINE_FLOORS):
        if within(module, *packages):
            return level
    return None


def imports_upstairs(found: Import) -> bool:
    """True when an engine module imports an engine module on a higher floor."""
    here, there = floor_of(found.importer), floor_of(found.target)
    return here is not None and there is not None and there > here


ENGINE_KEEPS_ITS_FLOORS = Rule(
    "an engine module imports engine modules only on its own floor or below", ("engine",), imports_upstairs,
)
CLIENT_STANDS_ALONE = Rule(
    "the client imports nothing of ours but the client (it speaks HTTP only)", (CLIENT,),
    lambda found: ours(found) and not within(found.target, CLIENT),
)
CLIENT_NEEDS_ONLY_ITS_THREE_LIBRARIES = Rule(
    "the client imports nothing outside the standard library but httpx, httpx-sse and msgspec", (CLIENT,),
    lambda found: not ours(found) and top(found.target) not in sys.stdlib_module_names
    and top(found.target) not in {"httpx", "httpx_sse", "msgspec"},
)
ONLY_THE_SCRIPTS_USE_THE_CLIENT = Rule(
    "nothing of the service but the scripts imports the client", LAYERS,
    lambda found: within(found.target, CLIENT) and not within(found.importer, CLIENT, "scripts"),
)
RULES = (
    DOMAIN_KEEPS_TO_ITSELF, DOMAIN_USES_ONLY_MSGSPEC, PROJECTIONS_KEEP_TO_THE_DOMAIN, PROJECTIONS_USE_ONLY_MSGSPEC,
    ENGINE_WITHOUT_LITESTAR, API_AT_THE_TOP, COMPOSITION_ROOT_AT_THE_TOP, EXECUTION_BEHIND_ITS_PORTS,
    ENGINE_KEEPS_ITS_FLOORS,
    CLIENT_STANDS_ALONE, CLIENT_NEEDS_ONLY_ITS_THREE_LIBRARIES, ONLY_THE_SCRIPTS_USE_THE_CLIENT,
)


def assert_kept(rule: Rule) -> None:
    """No import breaks the rule; each offender is named with its file and line."""
    found = rule.breaking()
    assert not found, f"{rule.says}, but:\n" + "\n".join(f"  {item}" for item in found)


def test_the_domain_imports_nothing_of_ours_but_the_domain():
    assert_kept(DOMAIN_KEEPS_TO_ITSELF)


def test_the_domain_imports_no_io_library():
    assert_kept(DOMAIN_USES_ONLY_MSGSPEC)


def test_projections_import_nothing_of_ours_but_the_domain_and_each_other():
    assert_kept(PROJECTIONS_KEEP_TO_THE_DOMAIN)


def test_projections_import_no_io_library():
    assert_kept(PROJECTIONS_USE_ONLY_MSGSPEC)


def test_the_engine_imports_no_litestar():
    assert_kept(ENGINE_WITHOUT_LITESTAR)


def test_only_the_api_and_the_scripts_import_the_api():
    assert_kept(API_AT_THE_TOP)


def test_nothing_below_the_composition_root_imports_it():
    assert_kept(COMPOSITION_ROOT_AT_THE_TOP)


def test_execution_reaches_the_context_tools_only_through_its_ports():
    assert_kept(EXECUTION_BEHIND_ITS_PORTS)


def test_the_engine_keeps_its_floors():
    assert_kept(ENGINE_KEEPS_ITS_FLOORS)


def test_every_engine_module_stands_on_a_floor():
    engine_modules = [module for module in our_modules() if within(module, "engine") and module != "engine"]
    assert [module for module in engine_modules if floor_of(module) is None] == []


def test_a_package_stands_on_one_floor_only():
    placed = [package for packages in ENGINE_FLOORS for package in packages]
    assert len(placed) == len(set(placed))
    assert not [(a, b) for a in placed for b in placed if a != b and within(a, b)]


def test_the_client_imports_nothing_of_the_service():
    assert_kept(CLIENT_STANDS_ALONE)


def test_the_client_needs_only_httpx_httpx_sse_and_msgspec():
    assert_kept(CLIENT_NEEDS_ONLY_ITS_THREE_LIBRARIES)


def test_only_the_scripts_use_the_client():
    assert_kept(ONLY_THE_SCRIPTS_USE_THE_CLIENT)


# -- cycles -------------------------------------------------------------------------------

Graph = dict[str, dict[str, Import]]


def module_graph() -> Graph:
    """Module -> module of ours it imports -> the first such import, counting every kind of import."""
    graph: Graph = defaultdict(dict)
    for found in every_import():
        if found.target in our_modules():
            graph[found.importer].setdefault(found.target, found)
    return graph


def way_between(graph: Graph, start: str, goal: str) -> list[Import]:
    """The fewest imports leading from `start` to `goal`; empty when there is no way."""
    came_by: dict[str, Import] = {}
    frontier = [start]
    while frontier and goal not in came_by:
        following = []
        for module in frontier:
            for target, found in graph.get(module, {}).items():
                if target != start and target not in came_by:
                    came_by[target] = found
                    following.append(target)
        frontier = following
    way, module = [], goal
    while module in came_by:
        way.append(came_by[module])
        module = came_by[module].importer
    return way[::-1]


def cycle_closed_by(graph: Graph, found: Import) -> list[Import]:
    """The cycle `found` closes: the way back from what it imports to its importer, then itself; or empty."""
    if found.target == found.importer:
        return [found]
    back = way_between(graph, found.target, found.importer)
    return [*back, found] if back else []


def some_cycle(graph: Graph) -> list[Import]:
    """The imports of one cycle of the graph; empty when it has none."""
    for module in sorted(graph):
        for found in graph[module].values():
            if cycle := cycle_closed_by(graph, found):
                return cycle
    return []


def describe(cycle: list[Import]) -> str:
    modules = " -> ".join([cycle[0].importer, *(step.target for step in cycle)])
    return modules + "\n" + "\n".join(f"  {step}" for step in cycle)


def test_our_modules_import_one_another_without_a_cycle():
    cycle = some_cycle(module_graph())
    assert not cycle, "our modules import one another in a cycle: " + describe(cycle)


def test_imports_in_functions_type_checking_blocks_and_try_blocks_are_seen(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from domain import run\n"
        "try:\n    import engine.clock\nexcept ImportError:\n    pass\n"
        "def late():\n    from .store import mapper\n    from . import settings\n",
        encoding="utf-8",
    )
    found = sorted(found.target for found in imports_in("engine.sample", sample))
    assert found == ["domain.run", "engine.clock", "engine.settings", "engine.store.mapper", "typing"]
