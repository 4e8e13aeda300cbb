"""Model registry (builtin and on-disk models, loaded with their tokenizer) and chat templating with tools."""

from roll.models.cache import model_cache_dir
from roll.models.chat import ChatPrompt, ChatTemplateError, chat_stop_token_ids, render_chat
from roll.models.registry import (
    LoadedModel,
    ModelNotFoundError,
    available_models,
    load_model,
    resolve_model_path,
)
from roll.models.tool_calls import AssistantOutput, parse_assistant_output

__all__ = [
    "AssistantOutput",
    "ChatPrompt",
    "ChatTemplateError",
    "LoadedModel",
    "ModelNotFoundError",
    "available_models",
    "chat_stop_token_ids",
    "load_model",
    "model_cache_dir",
    "parse_assistant_output",
    "render_chat",
    "resolve_model_path",
]
