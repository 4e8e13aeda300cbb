"""Held-out means new: no held-out instance of any shipped config repeats a train instance's instruction or
oracle commands, nor another held-out instance's; and the selection that makes it so, on hand-made cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from roll.config import load_config
from roll.pipeline.config import TrainConfig
from roll.rollout.terminal.config import TerminalDataConfig, TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError
from rome.data.families import FAMILIES, get_family
from rome.data.families.base import Family, FileSpec, Instance, Step
from rome.data.novelty import (
    NotEnoughNewInstances,
    SeenTasks,
    new_instances,
    normalised_instruction,
    oracle_key,
    overlap,
)
from rome.data.recipe import planned_instances

ROOT = Path(__file__).resolve().parents[3]
# Every shipped training config whose env generates its tasks (env.data).
SHIPPED = sorted(
    str(path.relative_to(ROOT))
    for path in [*ROOT.glob("configs/*.yaml"), *ROOT.glob("configs/rome/*.yaml")]
    if ((yaml.safe_load(path.read_text()) or {}).get("env") or {}).get("data")
)


def instance(seed: int, instruction: str, *commands: str) -> Instance:
    return Instance(
        family="toy",
        seed=seed,
        knobs={},
        instruction=instruction,
        files={"/app/x": FileSpec("x\n")},
        steps=[Step(command, "") for command in commands],
        check="",
        expected={},
        domain="toy",
    )


def test_the_keys_ignore_case_and_spacing_only() -> None:
    assert normalised_instruction("Count  the lines of\n`/app/A.txt`. ") == "count the lines of `/app/a.txt`."
    assert oracle_key(instance(0, "x", "wc -l  /app/a", " cat /app/a ")) == ("wc -l /app/a", "cat /app/a")
    assert oracle_key(instance(0, "x", "wc -l /app/a")) != oracle_key(instance(0, "x", "wc -l /app/b"))


def test_candidates_that_repeat_a_train_prompt_or_oracle_are_skipped() -> None:
    train = [instance(0, "Sum A.", "awk a"), instance(1, "Sum B.", "awk b")]
    seen = SeenTasks()
    for one in train:
        seen.add(one)
    candidates = {
        10: instance(10, "sum a.", "awk z"),  # the same prompt as train seed 0
        11: instance(11, "Sum C.", "awk b"),  # the same oracle as train seed 1
        12: instance(12, "Sum D.", "awk d"),  # new
        13: instance(13, "Sum  D.", "awk e"),  # repeats the held-out instance just chosen
        14: instance(14, "Sum E.", "awk e2"),  # new
    }
    chosen = new_instances(candidates.__getitem__, 10, 2, seen, max_seeds=5, what="toy")
    assert [one.seed for one in chosen] == [12, 14]
    assert overlap(train, chosen) == []
    assert overlap(train, [candidates[10], candidates[12], candidates[13]]) == ["toy-10", "toy-13"]
    with pytest.raises(NotEnoughNewInstances, match=r"toy: seeds 10\.\.14 give only 0 held-out instances"):
        new_instances(candidates.__getitem__, 10, 1, seen, max_seeds=5, what="toy")


@pytest.mark.parametrize("config_path", SHIPPED)
def test_no_shipped_config_evaluates_on_a_prompt_or_oracle_it_trained_on(config_path: str) -> None:
    config = load_config(TrainConfig, ROOT / config_path)
    assert isinstance(config.env, TerminalEnvConfig) and config.env.data is not None
    data = config.env.data
    planned = planned_instances(data)
    knobs = {**data.families, **data.out_of_family}

    def made(side: str) -> list[Instance]:
        out = []
        for task_id, (where, _) in planned.items():
            if where == side:
                name, seed = task_id.rsplit("-", 1)
                out.append(get_family(name).make(int(seed), dict(knobs[name])))
        return out

    train, rl, held_out, apart = made("train"), made("rl"), made("eval"), made("out-of-family")
    assert len(train) == data.train_per_family * len(data.families)
    assert len(rl) == data.rl_per_family * len(data.families)
    assert len(held_out) == data.eval_per_family * len(data.families)
    assert len(apart) == data.eval_per_family * len(data.out_of_family)
    assert overlap(train, rl) == []
    assert overlap(train + rl, held_out + apart) == []
    assert not {i.family for i in apart} & {i.family for i in train}


def test_the_main_jobs_have_an_out_of_family_set() -> None:
    for name in ("configs/ipa.yaml", "configs/grpo.yaml"):
        env = load_config(TrainConfig, ROOT / name).env
        assert isinstance(env, TerminalEnvConfig) and env.data is not None and env.data.out_of_family


class ThreePrompts(Family):
    """A family with three prompts in all (seed mod 3 picks the file): it cannot give many new held-out
    instances."""

    name = "three-prompts"
    domain = "toy"
    summary = "one of three files to count"

    def make(self, seed: int, raw_knobs: dict[str, Any] | None = None) -> Instance:
        path = f"/app/{'abc'[seed % 3]}.txt"
        made = instance(seed, f"Count the lines of {path}.", f"wc -l {path}")
        made.family = self.name
        return made


def test_a_family_that_cannot_give_enough_new_instances_stops_the_stage_with_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FAMILIES, ThreePrompts.name, ThreePrompts())
    data = TerminalDataConfig(families={"three-prompts": {}}, train_per_family=2, eval_per_family=2)
    with pytest.raises(
        DataStageError, match=r"env\.data\.families\.three-prompts: seeds 100000\.\.100099 give only"
    ):
        planned_instances(data)
    # Training took a and b (seeds 0, 1): seed 100000 (b) repeats, 100001 (c) is the one new prompt left.
    roomy = TerminalDataConfig(families={"three-prompts": {}}, train_per_family=2, eval_per_family=1)
    assert {t: side for t, (side, _) in planned_instances(roomy).items()} == {
        "three-prompts-0": "train",
        "three-prompts-1": "train",
        "three-prompts-100001": "eval",
    }


def test_rl_only_instances_are_new_to_sft_and_the_held_out_ones_new_to_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FAMILIES, ThreePrompts.name, ThreePrompts())
    # SFT takes a (seed 0), RL b (seed 1); held-out seed 100000 is b again, so 100001 (c) is taken.
    data = TerminalDataConfig(
        families={"three-prompts": {}}, train_per_family=1, rl_per_family=1, eval_per_family=1
    )
    assert {t: side for t, (side, _) in planned_instances(data).items()} == {
        "three-prompts-0": "train",
        "three-prompts-1": "rl",
        "three-prompts-100001": "eval",
    }
    # SFT takes a and b; of seeds 2..101 only c is new, and RL asked for two.
    short = TerminalDataConfig(families={"three-prompts": {}}, train_per_family=2, rl_per_family=2)
    with pytest.raises(
        DataStageError,
        match=r"env\.data\.families\.three-prompts: seeds 2\.\.101 give only 1 RL-only instances .* "
        r"lower rl_per_family",
    ):
        planned_instances(short)


def test_every_family_lists_its_distinct_instructions() -> None:
    from typer.testing import CliRunner

    from rome.cli import app

    result = CliRunner().invoke(app, ["data", "families", "--seeds", "300"])
    assert result.exit_code == 0, result.output
    for name in FAMILIES:
        line = next(line for line in result.output.splitlines() if line.startswith(name))
        counts = [int(part.split("=")[1]) for part in line.split() if part.startswith("L")]
        assert len(counts) == 3 and all(count > 1 for count in counts), line
