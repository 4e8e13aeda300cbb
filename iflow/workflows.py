"""Workflows: sub-agent definitions (`.iflow/agents/*.md`) and slash commands (`.iflow/commands/*.md`).

Both are Markdown files with optional YAML front matter between `---` lines. They are found in the global
folder (`$IFLOW_HOME/agents`, `$IFLOW_HOME/commands`) and in `.iflow/` of every folder from the project root
down to the working directory; a later (more specific) definition replaces an earlier one of the same name.

Agent front matter: `name` (default: the file name), `description` (required: when to use the agent),
`tools` (allowlist, a list or a comma-separated string; default: all tools), `model`, `max_turns`. The body
is the sub-agent's system prompt.

Command front matter: `description`, `argument-hint`. A command's name is its path under `commands/` without
`.md`, folders joined by `:` (`git/commit.md` is `/git:commit`). The body is the prompt; `$ARGUMENTS` (or
`{{args}}`) becomes everything typed after the command, `$1` ... `$9` its shell-style words; when the body
has no placeholder, the arguments are appended after a blank line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from iflow.settings import iflow_home, project_root

FRONT_MATTER_END = re.compile(r"^---[ \t]*$", re.MULTILINE)
POSITIONAL = re.compile(r"\$([1-9])")
ALL_ARGUMENTS = ("$ARGUMENTS", "{{args}}")


class WorkflowError(ValueError):
    """A workflow file that cannot be used; the message names the file and what to fix."""


class AgentDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[\w.-]+$")
    description: str = Field(min_length=1)
    tools: tuple[str, ...] | None = None
    model: str | None = None
    max_turns: int | None = Field(None, gt=0)
    system_prompt: str = ""
    path: Path | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _split_tools(cls, value: Any) -> Any:
        return [t.strip() for t in value.split(",") if t.strip()] if isinstance(value, str) else value


class SlashCommand(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str
    description: str = ""
    argument_hint: str = Field("", alias="argument-hint")
    template: str = ""
    path: Path | None = None

    def render(self, arguments: str) -> str:
        """The prompt for `/name arguments`."""
        arguments = arguments.strip()
        has_placeholder = any(p in self.template for p in ALL_ARGUMENTS) or POSITIONAL.search(self.template)
        if not has_placeholder:
            return f"{self.template.rstrip()}\n\n{arguments}" if arguments else self.template
        try:
            words = shlex.split(arguments)
        except ValueError:
            words = arguments.split()
        text = POSITIONAL.sub(
            lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "", self.template
        )
        for placeholder in ALL_ARGUMENTS:
            text = text.replace(placeholder, arguments)
        return text


def split_front_matter(path: Path) -> tuple[dict[str, Any], str]:
    """The YAML front matter (empty when there is none) and the body of a Markdown file."""
    text = path.read_text()
    if not text.startswith("---\n"):
        return {}, text
    closing = FRONT_MATTER_END.search(text, 4)
    if closing is None:
        raise WorkflowError(
            f"{path}: front matter opened with '---' is never closed; add a '---' line after it"
        )
    try:
        data = yaml.safe_load(text[4 : closing.start()]) or {}
    except yaml.YAMLError as error:
        raise WorkflowError(f"{path}: front matter is not valid YAML ({error}); fix the YAML") from error
    if not isinstance(data, dict):
        raise WorkflowError(
            f"{path}: front matter must be YAML keys (name: value), not {type(data).__name__}"
        )
    return data, text[closing.end() :].removeprefix("\n")


def _validated(model: type[BaseModel], data: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        allowed = ", ".join(
            f.alias or n for n, f in model.model_fields.items() if n not in ("path", "template")
        )
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise WorkflowError(f"{path}: {problems} (front matter keys: {allowed})") from error


def parse_agent(path: Path) -> AgentDefinition:
    front, body = split_front_matter(path)
    if "system_prompt" in front or "path" in front:
        raise WorkflowError(
            f"{path}: the body is the system prompt; remove system_prompt/path from the front matter"
        )
    data = {"name": path.stem, **front, "system_prompt": body.strip(), "path": path}
    return _validated(AgentDefinition, data, path)


def parse_command(path: Path, commands_dir: Path) -> SlashCommand:
    front, body = split_front_matter(path)
    if "template" in front or "path" in front or "name" in front:
        raise WorkflowError(
            f"{path}: name comes from the file's path and the body is the prompt; "
            "keep only description and argument-hint in the front matter"
        )
    name = ":".join(path.relative_to(commands_dir).with_suffix("").parts)
    return _validated(SlashCommand, {**front, "name": name, "template": body.strip(), "path": path}, path)


def workflow_dirs(kind: str, cwd: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The `kind` folders ("agents" or "commands") that apply in `cwd`, least specific first."""
    cwd = cwd.resolve()
    root = project_root(cwd)
    chain = [cwd]
    while chain[-1] != root:
        chain.append(chain[-1].parent)
    dirs = [iflow_home(env) / kind, *(folder / ".iflow" / kind for folder in reversed(chain))]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def load_agents(cwd: Path, env: Mapping[str, str] | None = None) -> dict[str, AgentDefinition]:
    agents: dict[str, AgentDefinition] = {}
    for folder in workflow_dirs("agents", cwd, env):
        for path in sorted(folder.glob("*.md")):
            agent = parse_agent(path)
            agents[agent.name] = agent
    return agents


def load_commands(cwd: Path, env: Mapping[str, str] | None = None) -> dict[str, SlashCommand]:
    commands: dict[str, SlashCommand] = {}
    for folder in workflow_dirs("commands", cwd, env):
        for path in sorted(folder.rglob("*.md")):
            command = parse_command(path, folder)
            commands[command.name] = command
    return commands
