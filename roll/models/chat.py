"""Chat templating with tools: OpenAI-style messages and tools to prompt token ids, and tool calls back out.

The model's own chat template renders the conversation. Where that template knows nothing about tools
(SmolLM2's does not), tools become a `<tools>` block in the system message, earlier tool calls become
`<tool_call>` text in the assistant turns and tool results become `<tool_response>` user turns, so any
template can carry them. The model answers a call as
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; `roll.models.tool_calls` reads that back while
keeping the exact generated token ids.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roll.models.tool_calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, AssistantOutput, parse_assistant_output

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>")

TOOLS_SYSTEM_BLOCK = """# Tools

You can call functions to help with the user's request. Their signatures, as JSON, are inside <tools></tools>:
<tools>
{tools}
</tools>

To call a function, answer with a JSON object of its name and arguments inside <tool_call></tool_call> tags:
<tool_call>
{{"name": "<function name>", "arguments": {{<arguments as a JSON object>}}}}
</tool_call>"""


class ChatTemplateError(ValueError):
    """Messages or tools that cannot be rendered: the message says what is wrong, `param` names the field."""

    def __init__(self, message: str, *, param: str = "messages") -> None:
        super().__init__(message)
        self.param = param


class FunctionSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSpec(BaseModel):
    """One OpenAI tool: `{"type": "function", "function": {"name", "description", "parameters"}}`."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["function"] = "function"
    function: FunctionSpec


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    """`{"type": "function", "function": {"name": ...}}`: the model must call exactly this tool."""

    type: Literal["function"] = "function"
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class ChatPrompt(BaseModel):
    """The generation prompt of a conversation.

    `forced_prefix` is the start of the assistant's answer that the prompt already holds (a forced tool call);
    it is part of `text` and `token_ids`; `parse_output` reads the generated text as its continuation.
    """

    token_ids: list[int]
    text: str
    forced_prefix: str = ""
    forced_tool: str | None = Field(
        None, description="The tool the answer must call, whose arguments it continues."
    )
    parse_tool_calls: bool = False
    stop: list[str] = Field(
        default_factory=list,
        description="Stop strings the prompt implies: a forced call ends at its closing tag.",
    )

    def parse_output(self, text: str, token_ids: list[int]) -> AssistantOutput:
        """Parse the text generated after this prompt (tool calls only where the prompt offered tools)."""
        if not self.parse_tool_calls:
            return AssistantOutput(content=text, tool_calls=[], token_ids=list(token_ids))
        return parse_assistant_output(
            text, token_ids, forced_prefix=self.forced_prefix, forced_tool=self.forced_tool
        )


def validate_tools(tools: list[dict[str, Any]] | None) -> list[ToolSpec]:
    """Check OpenAI-style tools; raises ChatTemplateError naming the bad tool."""
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools or []):
        try:
            specs.append(ToolSpec.model_validate(tool))
        except ValidationError as error:
            raise ChatTemplateError(
                f"tools[{index}] is not a valid tool: {_first_error(error)}. Expected "
                '{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}.',
                param="tools",
            ) from error
    names = [spec.function.name for spec in specs]
    if len(set(names)) != len(names):
        raise ChatTemplateError(f"tool names must be unique, got {names}.", param="tools")
    return specs


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: ToolChoice | dict[str, Any] = "auto",
) -> ChatPrompt:
    """The generation prompt for `messages` (and `tools`) in the tokenizer's chat template."""
    specs = validate_tools(tools)
    choice = _validate_tool_choice(tool_choice, specs)
    if choice == "none":
        specs = []
    template = tokenizer.chat_template
    if not template:
        raise ChatTemplateError(
            "this model's tokenizer has no chat template; use /v1/completions with raw text."
        )
    native_tools = "tools" in template
    conversation = _normalize_messages(messages, specs, native_tools)
    try:
        text = tokenizer.apply_chat_template(
            conversation,
            tools=[spec.model_dump(exclude_none=True) for spec in specs] if native_tools and specs else None,
            add_generation_prompt=True,
            tokenize=False,
        )
    except Exception as error:  # jinja raises many types for messages a template cannot handle
        raise ChatTemplateError(f"the chat template cannot render these messages: {error}") from error
    forced_tool = _forced_tool(choice, specs)
    forced_prefix = _forced_prefix(choice, forced_tool)
    text = str(text) + forced_prefix
    ids = tokenizer(text, add_special_tokens=False).input_ids
    return ChatPrompt(
        token_ids=ids,
        text=text,
        forced_prefix=forced_prefix,
        forced_tool=forced_tool,
        parse_tool_calls=bool(specs),
        stop=[TOOL_CALL_CLOSE] if forced_prefix else [],
    )


def chat_stop_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids that end an assistant turn in chat: the eos and the template's end-of-turn tokens."""
    ids = []
    for token in END_OF_TURN_TOKENS:
        token_id = tokenizer.convert_tokens_to_ids(token)
        # Unknown tokens map to the unk id; the round trip tells them apart without building the whole vocab.
        if isinstance(token_id, int) and tokenizer.convert_ids_to_tokens(token_id) == token:
            ids.append(token_id)
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return sorted(set(ids))


def _validate_tool_choice(tool_choice: ToolChoice | dict[str, Any], specs: list[ToolSpec]) -> ToolChoice:
    if isinstance(tool_choice, dict):
        try:
            tool_choice = NamedToolChoice.model_validate(tool_choice)
        except ValidationError as error:
            raise ChatTemplateError(
                f"tool_choice is not valid: {_first_error(error)}. Use 'none', 'auto', 'required' or "
                '{"type": "function", "function": {"name": ...}}.',
                param="tool_choice",
            ) from error
    if isinstance(tool_choice, NamedToolChoice):
        names = [spec.function.name for spec in specs]
        if tool_choice.function.name not in names:
            raise ChatTemplateError(
                f"tool_choice names {tool_choice.function.name!r}, which is not among the tools {names}.",
                param="tool_choice",
            )
    elif tool_choice not in ("none", "auto", "required"):
        raise ChatTemplateError(
            f"tool_choice {tool_choice!r} is not one of 'none', 'auto', 'required'.", param="tool_choice"
        )
    elif tool_choice == "required" and not specs:
        raise ChatTemplateError(
            "tool_choice 'required' needs at least one tool in `tools`.", param="tool_choice"
        )
    return tool_choice


def _forced_tool(choice: ToolChoice, specs: list[ToolSpec]) -> str | None:
    if isinstance(choice, NamedToolChoice):
        return choice.function.name
    if choice == "required" and len(specs) == 1:
        return specs[0].function.name
    return None


def _forced_prefix(choice: ToolChoice, forced_tool: str | None) -> str:
    if forced_tool is not None:
        return f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(forced_tool)}, "arguments": '
    if choice == "required":
        return f'{TOOL_CALL_OPEN}\n{{"name": "'
    return ""


def _normalize_messages(
    messages: list[dict[str, Any]], specs: list[ToolSpec], native_tools: bool
) -> list[dict[str, Any]]:
    if not messages:
        raise ChatTemplateError("messages must hold at least one message.")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ChatTemplateError(f"messages[{index}] needs a string 'role'.")
        role = "system" if message["role"] == "developer" else message["role"]
        if role not in ("system", "user", "assistant", "tool"):
            raise ChatTemplateError(
                f"messages[{index}].role {role!r} is not one of system, developer, user, assistant, tool."
            )
        content = _text_content(message.get("content"), index)
        tool_calls = (message.get("tool_calls") or []) if role == "assistant" else []
        if native_tools:
            out.append(_native_message(role, content, tool_calls, message, index))
        elif role == "tool":
            response = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1].get("_tool_responses"):
                out[-1]["content"] += "\n" + response
            else:
                out.append({"role": "user", "content": response, "_tool_responses": True})
        else:
            calls_text = [_tool_call_text(call, index) for call in tool_calls]
            out.append({"role": role, "content": "\n".join(part for part in [content, *calls_text] if part)})
    for message in out:
        message.pop("_tool_responses", None)
    if specs and not native_tools:
        block = TOOLS_SYSTEM_BLOCK.format(
            tools="\n".join(
                json.dumps(spec.model_dump(exclude_none=True), ensure_ascii=False) for spec in specs
            )
        )
        if out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{block}" if out[0]["content"] else block
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def _native_message(
    role: str, content: str, tool_calls: list[Any], message: dict[str, Any], index: int
) -> dict[str, Any]:
    rendered: dict[str, Any] = {"role": role, "content": content}
    if tool_calls:
        rendered["tool_calls"] = [
            {"type": "function", "function": {"name": name, "arguments": arguments}}
            for name, arguments in (_call_parts(call, index) for call in tool_calls)
        ]
    if role == "tool" and message.get("tool_call_id"):
        rendered["tool_call_id"] = message["tool_call_id"]
    return rendered


def _tool_call_text(call: Any, index: int) -> str:
    name, arguments = _call_parts(call, index)
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def _call_parts(call: Any, index: int) -> tuple[str, dict[str, Any]]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ChatTemplateError(
            f"messages[{index}].tool_calls needs entries with function.name and arguments."
        )
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise ChatTemplateError(
                f"messages[{index}].tool_calls: arguments of {function['name']!r} are not JSON ({error})."
            ) from error
    if not isinstance(arguments, dict):
        raise ChatTemplateError(f"messages[{index}].tool_calls: arguments must be a JSON object.")
    return function["name"], arguments


def _text_content(content: Any, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise ChatTemplateError(f"messages[{index}].content: only text parts are supported.")
            texts.append(part["text"])
        return "".join(texts)
    raise ChatTemplateError(f"messages[{index}].content must be a string or a list of text parts.")


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "value"
    return f"{where}: {first['msg']}"
