"""Config of the GEM env manager and of episode sampling (pydantic, importable without torch)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from roll.config import StrictConfig


class GEMEnvConfig(StrictConfig):
    """Any GEM env id, played multi-turn: each observation becomes a user message of the chat."""

    type: Literal["gem"] = Field("gem", description="Env kind: gem (GEM text games).")
    env_id: str = Field(
        "game:GuessTheNumber-v0-easy", description="A gem-llm env id, e.g. game:Sudoku-v0-easy."
    )
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of gem.make (or of rock.make)."
    )
    rock_url: str | None = Field(
        None,
        description="Play the env on ROCK's env service at this URL (rock.make: each episode in its own "
        "sandbox), e.g. `rock admin serve`'s. Needed for terminal:<task dir> ids, where it is the ROCK "
        "admin that gives each episode its sandbox (bash actions, reward 1 when the task's tests pass "
        "after the action `finish`). None: gem.make in the rollout worker.",
    )
    system_prompt: str | None = Field(None, description="System message before the first observation.")
    max_turns: int = Field(8, ge=1, description="Episode limit: LLM calls per episode.")
    max_context_tokens: int = Field(2048, ge=16, description="Episode limit: the chat's length in tokens.")
    format_pattern: str | None = Field(
        None,
        description="Regex an action must contain to be well formed (e.g. '\\\\boxed\\{'); turns without "
        "it are counted as format errors. None: no format check.",
    )
    success_reward: float = Field(
        1.0, description="An episode succeeds when its last step's reward is at least this."
    )
    latency_s: float = Field(
        0.0, ge=0.0, description="Extra seconds every env step sleeps (to model a remote env; benchmarks)."
    )

    @model_validator(mode="after")
    def _terminal_needs_rock(self) -> GEMEnvConfig:
        if self.env_id.startswith("terminal:") and self.rock_url is None:
            raise ValueError(
                f"env_id {self.env_id!r} is a terminal task, which runs in a ROCK sandbox: set env.rock_url "
                "to a ROCK admin (e.g. http://127.0.0.1:8080 from `rock admin serve`)"
            )
        return self


class SamplingConfig(StrictConfig):
    """How the policy samples during rollout or evaluation."""

    temperature: float = Field(1.0, ge=0.0, description="0 is greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass, in (0, 1]; 1 is off.")
    top_k: int = Field(0, ge=0, description="Sample among the k likeliest tokens; 0 is off.")
    max_new_tokens: int = Field(64, ge=1, description="Most tokens per LLM call.")
    stop: list[str] = Field(
        default_factory=list,
        description="Stop strings: a call's answer ends at the first one it writes (its token ids are kept, "
        "the text ends before it), e.g. ['</tool_call>'] so an answer ends with its tool call.",
    )
