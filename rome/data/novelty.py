"""Held-out means new: what makes two generated instances the same task to an agent, and choosing held-out
instances that share nothing with training.

An agent sees only the instruction, so two instances with the same instruction (up to case and spacing) are
one prompt; two with the same oracle command sequence are one solution. A held-out instance that repeats
either of a train instance tests memory, not generalization. Pure functions: instances in, keys and choices
out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rome.data.families.base import Family, Instance

_SPACE = re.compile(r"\s+")


def normalised_instruction(text: str) -> str:
    """The instruction as the agent reads it: case and runs of whitespace do not make a new prompt."""
    return _SPACE.sub(" ", text).strip().lower()


def oracle_key(instance: Instance) -> tuple[str, ...]:
    """The oracle's command sequence, each command with its whitespace normalised."""
    return tuple(_SPACE.sub(" ", step.command).strip() for step in instance.steps)


@dataclass
class SeenTasks:
    """Instructions and oracle sequences already taken (by training, or by held-out instances chosen)."""

    instructions: set[str] = field(default_factory=set)
    oracles: set[tuple[str, ...]] = field(default_factory=set)

    def add(self, instance: Instance) -> None:
        self.instructions.add(normalised_instruction(instance.instruction))
        self.oracles.add(oracle_key(instance))

    def repeats(self, instance: Instance) -> bool:
        return (
            normalised_instruction(instance.instruction) in self.instructions
            or oracle_key(instance) in self.oracles
        )


class NotEnoughNewInstances(ValueError):
    """The seeds tried could not give as many new held-out instances as asked; the message says how many."""


def new_instances(
    make: Callable[[int], Instance],
    first_seed: int,
    count: int,
    seen: SeenTasks,
    max_seeds: int,
    what: str,
    kind: str = "held-out",
    knob: str = "eval_per_family",
) -> list[Instance]:
    """`count` instances from seeds `first_seed, first_seed + 1, ...`, each repeating no instruction or oracle
    in `seen` nor one chosen before it (chosen ones are added to `seen`). A seed that repeats is skipped;
    after `max_seeds` seeds without enough, it stops with a message naming `what`, the `kind` of instance
    asked for and the `knob` that asks for them."""
    chosen: list[Instance] = []
    for seed in range(first_seed, first_seed + max_seeds):
        instance = make(seed)
        if seen.repeats(instance):
            continue
        seen.add(instance)
        chosen.append(instance)
        if len(chosen) == count:
            return chosen
    raise NotEnoughNewInstances(
        f"{what}: seeds {first_seed}..{first_seed + max_seeds - 1} give only {len(chosen)} {kind} "
        f"instances that repeat no train instruction or oracle and no other {kind} one, {count} asked; "
        f"lower {knob} or train_per_family, or pick a level or family with more distinct "
        "instructions (`rome data families` lists them)"
    )


def distinct_instructions(family: Family, knobs: dict[str, object], seeds: Iterable[int]) -> int:
    """How many distinct (normalised) instructions `family` makes with `knobs` over `seeds`."""
    return len({normalised_instruction(family.make(seed, dict(knobs)).instruction) for seed in seeds})


def overlap(train: Iterable[Instance], held_out: Iterable[Instance]) -> list[str]:
    """Task ids of held-out instances that repeat a train instance's instruction or oracle, or an earlier
    held-out instance's: empty when held-out means new."""
    seen = SeenTasks()
    for instance in train:
        seen.add(instance)
    repeated = []
    for instance in held_out:
        if seen.repeats(instance):
            repeated.append(instance.task_id)
        seen.add(instance)
    return repeated
