"""Which provider answers a visit: its own scripted provider, or a configured model from the registry."""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from domain.errors import MissingReference
from domain.templates import render_value
from domain.workflow import ModelData, NodeData
from engine.execution.errors import RunFailure, VisitFailure
from engine.llm import (
    DEFAULT_SCRIPT,
    SCRIPTED_ID,
    LlmProvider,
    ModelRegistry,
    ParsedScript,
    ScriptedProvider,
    parse_script,
)
from engine.llm.metered import metered
from engine.settings import EngineSettings


def build_registry(settings: EngineSettings) -> ModelRegistry:
    """The registry of configured OpenAI-compatible models plus `scripted`."""
    return ModelRegistry(settings.models, default_model_id=settings.default_model_id or None)


SCRIPTS_PARSED_ONCE = 32
"""The template-free scripts kept parsed for the visits that play them."""


def visit_script(script: Any, scope: dict[str, Any]) -> ParsedScript:
    """A visit's script rendered against its inputs and parsed (ValueError when it is invalid).

    A script without a `{{` reference renders to itself, so the catalogue's script object is parsed once for
    every visit that plays it: walking a script of 1,000 steps costs ~1.4 ms a visit.
    """
    script = DEFAULT_SCRIPT if script is None else script
    parsed = _template_free(_TheScript(script))
    return parsed if parsed is not None else parse_script(render_value(script, scope))


class _TheScript:
    """A script as a cache key: the very object (kept alive by the cache, so its id names no other)."""

    __slots__ = ("script",)

    def __init__(self, script: Any) -> None:
        self.script = script

    def __hash__(self) -> int:
        return id(self.script)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TheScript) and other.script is self.script


@functools.lru_cache(maxsize=SCRIPTS_PARSED_ONCE)
def _template_free(key: _TheScript) -> ParsedScript | None:
    """The script parsed, when it has no reference to render (JSON has `{{` only inside strings); else None."""
    if b"{{" in msgspec.json.encode(key.script):
        return None
    return parse_script(key.script)


def scripted_from(turns: ParsedScript, *, skip_turns: int, seed: str, pace_seconds: float) -> ScriptedProvider:
    """A scripted provider that starts after `skip_turns` node turns (a resumed visit goes on where it paused)."""
    if skip_turns <= 0:
        return ScriptedProvider(parsed=turns, pace_seconds=pace_seconds, seed=seed)
    node = turns["node"]
    rest = {**turns, "node": node[min(skip_turns, len(node) - 1):]}
    return ScriptedProvider(parsed=rest, pace_seconds=pace_seconds, seed=f"{seed}:after{skip_turns}")


class VisitModels:
    """The providers one visit talks to; the scripted one is built once, from the node's script.

    Strings in a script are templates too (`{{topic}}`), rendered against the visit's inputs.
    A node that talks to no model has no model settings: the defaults stand in.
    """

    def __init__(self, registry: ModelRegistry, data: NodeData, *, iter_seq: int, seed: str,
                 pace_seconds: float, skip_turns: int = 0, scope: dict[str, Any] | None = None) -> None:
        self.registry = registry
        self.scope = scope or {}
        self.data = data if isinstance(data, ModelData) else ModelData()
        self.iter_seq = iter_seq
        self.seed = seed
        self.pace_seconds = pace_seconds
        self.skip_turns = skip_turns
        self._scripted: ScriptedProvider | None = None

    def node_model_id(self) -> str:
        """The model the node names (`model_id`), else the default model."""
        return self.data.model_id or self.registry.default_model_id

    def reformat_model_id(self) -> str:
        """The model that re-formats the node's answers (`reformat_model_id`), else the default model."""
        return self.data.reformat_model_id or self.registry.default_model_id

    def provider(self, model_id: str) -> LlmProvider:
        """The provider for a model id (UnknownModel when none is configured under it)."""
        if model_id != SCRIPTED_ID:
            return self.registry.provider_for(model_id)
        if self._scripted is None:
            try:
                self._scripted = scripted_from(
                    visit_script(self.data.visit_script(self.iter_seq), self.scope), skip_turns=self.skip_turns,
                    seed=self.seed, pace_seconds=self.pace_seconds,
                )
            except MissingReference as error:
                raise VisitFailure(f"script: {error.message}") from None
            except ValueError as error:
                raise VisitFailure(f"the node's script is invalid: {error}") from None
        return self._scripted

    def node(self) -> LlmProvider:
        """The node's own model (its calls counted)."""
        model_id = self.node_model_id()
        return metered(self.provider(model_id), model_id)

    def reformat(self) -> LlmProvider:
        """The model that re-formats answers: `reformat_model_id`, else the default model (its calls counted)."""
        model_id = self.reformat_model_id()
        return metered(self.provider(model_id), model_id)


def scripted_planner(script: Any, *, skip_turns: int, seed: str, pace_seconds: float) -> ScriptedProvider:
    """A scripted planner whose turns (a list, one decision each) start after the decisions already made."""
    try:
        turns = parse_script({"planner": script if script is not None else []})["planner"]
    except ValueError as error:
        raise RunFailure(f"the planner's script is invalid: {error}") from None
    rest = turns[min(skip_turns, len(turns) - 1):]
    return ScriptedProvider({"planner": rest}, pace_seconds=pace_seconds, seed=f"{seed}:after{skip_turns}")
