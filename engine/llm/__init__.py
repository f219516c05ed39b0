"""LLM providers: a deterministic scripted provider and an OpenAI-compatible streaming client."""

from engine.llm.config import ModelConfig
from engine.llm.openai import OpenAIProvider
from engine.llm.registry import SCRIPTED_ID, ModelRegistry, UnknownModel
from engine.llm.retry import Backoff, RetryBudget, retried
from engine.llm.scripted import DEFAULT_SCRIPT, ParsedScript, ScriptedProvider, parse_script
from engine.llm.types import (
    Chunk,
    ClarifyAsk,
    Completion,
    CompletionRequest,
    Finished,
    LlmCancelled,
    LlmError,
    LlmHttpError,
    LlmProvider,
    LlmRetriesExhausted,
    LlmStreamBroken,
    LlmTimeout,
    LlmUnreachable,
    Message,
    ReasoningDelta,
    StatusNote,
    TextDelta,
    TodoUpdate,
    ToolCall,
    ToolCallReady,
    ToolProgress,
    ToolSpec,
    Usage,
    collect,
)

__all__ = [
    "DEFAULT_SCRIPT", "SCRIPTED_ID", "Backoff", "Chunk", "ClarifyAsk", "Completion", "CompletionRequest", "Finished",
    "LlmCancelled", "LlmError", "LlmHttpError", "LlmProvider", "LlmRetriesExhausted", "LlmStreamBroken",
    "LlmTimeout", "LlmUnreachable", "RetryBudget", "retried",
    "Message", "ModelConfig", "ModelRegistry", "OpenAIProvider", "ParsedScript", "ReasoningDelta",
    "ScriptedProvider", "StatusNote", "TextDelta", "TodoUpdate", "ToolCall", "ToolCallReady",
    "ToolProgress", "ToolSpec", "UnknownModel", "Usage", "collect", "parse_script",
]
