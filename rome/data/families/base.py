"""What a task family is: knobs in, one generated task instance out, deterministic in its seed.

A family's `make(seed, knobs)` returns an `Instance`: the instruction, the files of the task's environment,
the oracle as a list of shell steps (what `solution/solve.sh` runs, and what the oracle teacher replays one
tool call at a time), realistic mistakes the teacher may make on the way, and the outcome check the tests run.
Knobs left unset are drawn from the seed, so a family's default output mixes difficulties.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

LEVELS = (1, 2, 3)
DIFFICULTY = {1: "easy", 2: "medium", 3: "hard"}


class UnknownFamily(ValueError):
    """No family has that name; the message lists the ones there are."""


class KnobError(ValueError):
    """A knob that the family does not have or a value it does not take; the message says which are valid."""


class Knobs(BaseModel):
    """Difficulty knobs of a family. `level` 1 is one or two commands; 3 needs several and some care."""

    model_config = ConfigDict(extra="forbid")

    level: int | None = Field(None, ge=1, le=3, description="1-3, 1 is one or two commands")


@dataclass(frozen=True)
class Step:
    """One oracle step: a shell command the agent runs through its shell tool, and why."""

    command: str
    description: str


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong command made just before oracle step `before`; it must fail (non-zero exit) and
    change nothing, so the steps after it still solve the task."""

    before: int
    command: str
    description: str


@dataclass(frozen=True)
class FileSpec:
    content: str
    mode: int = 0o644


@dataclass
class Instance:
    """One generated task. `files` are image paths (under /app, or elsewhere for tools the family installs);
    `check` is the body of the outcome check run by the tests, with `EXPECTED` bound to `expected`;
    `variant` names the operation the instruction asks for (numeric's statistic, file-ops' operation, ...),
    so the data stage can spread a family's train instances over its operations (env.data.balance_train)."""

    family: str
    seed: int
    knobs: dict[str, Any]
    instruction: str
    files: dict[str, FileSpec]
    steps: list[Step]
    check: str
    expected: dict[str, Any]
    domain: str
    tags: list[str] = field(default_factory=list)
    mistakes: list[Mistake] = field(default_factory=list)
    final_message: str = "The task is done."
    variant: str = ""

    @property
    def task_id(self) -> str:
        return f"{self.family}-{self.seed}"

    @property
    def difficulty(self) -> str:
        return DIFFICULTY.get(int(self.knobs.get("level", 2)), "medium")


class Family:
    """Subclasses set `name`, `domain`, `summary`, `knobs` (a `Knobs` model) and implement `build`."""

    name: ClassVar[str]
    domain: ClassVar[str]
    summary: ClassVar[str]
    knobs: ClassVar[type[Knobs]] = Knobs

    def parse_knobs(self, raw: dict[str, Any]) -> Knobs:
        try:
            return self.knobs.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "knobs"
            raise KnobError(
                f"family {self.name}: knob {where}: {first['msg']}; its knobs are {self.knob_help()}"
            ) from error

    def knob_help(self) -> str:
        parts = []
        for name, info in self.knobs.model_fields.items():
            parts.append(f"{name}: {info.description}")
        return ", ".join(parts)

    def make(self, seed: int, raw_knobs: dict[str, Any] | None = None) -> Instance:
        """The instance for `seed`; knobs left unset are drawn from the seed's own random stream."""
        rng = random.Random(f"{self.name}/{seed}")
        knobs = self.parse_knobs(raw_knobs or {})
        resolved = self.resolve(knobs, rng)
        instance = self.build(rng, resolved)
        instance.seed = seed
        instance.knobs = resolved.model_dump()
        return instance

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        """Fill unset knobs from the seed (level first, so a level's other defaults can depend on it)."""
        level = knobs.level if knobs.level is not None else rng.choice(LEVELS)
        return knobs.model_copy(update={"level": level})

    def build(self, rng: random.Random, knobs: Any) -> Instance:
        raise NotImplementedError
