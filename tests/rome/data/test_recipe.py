"""The data stage of `roll train` (rome.data.recipe): what it plans, how its cache is keyed, and one real run
at a small size that a second call then reuses without a sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import atif
import pytest

from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError
from roll.rollout.terminal.resampling.expert import recorded_experts
from rome.data import recipe
from rome.data.families import get_family
from rome.terminal_tasks.sandbox import SandboxProvider

DATA = {"families": {"file-ops": {"level": 1}, "numeric": {"level": 1}}, "train_per_family": 2}


def env(**data: object) -> TerminalEnvConfig:
    return TerminalEnvConfig(data={**DATA, "eval_per_family": 1, **data}, agent={"prompt_profile": "compact"})


def test_the_plan_puts_each_seed_range_on_its_side() -> None:
    planned = recipe.planned_instances(env(train_seed=3, eval_seed=50).data)  # type: ignore[arg-type]
    sides = {task_id: side for task_id, (side, _) in planned.items()}
    assert sides == {
        "file-ops-3": "train",
        "file-ops-4": "train",
        "file-ops-50": "eval",
        "numeric-3": "train",
        "numeric-4": "train",
        "numeric-50": "eval",
    }


def test_rl_only_instances_take_the_seeds_after_the_train_ones() -> None:
    planned = recipe.planned_instances(env(train_seed=3, eval_seed=500, rl_per_family=1).data)  # type: ignore[arg-type]
    assert [(task_id, side) for task_id, (side, _) in planned.items()] == [
        ("file-ops-3", "train"),
        ("numeric-3", "train"),
        ("file-ops-4", "train"),
        ("numeric-4", "train"),
        ("file-ops-5", "rl"),
        ("numeric-5", "rl"),
        ("file-ops-500", "eval"),
        ("numeric-500", "eval"),
    ]


def test_a_balanced_train_set_takes_turns_over_each_familys_operations() -> None:
    data = env(families={"numeric": {"level": 1}}, train_per_family=5, balance_train=True).data
    assert data is not None
    planned = recipe.planned_instances(data)
    train = [task_id for task_id, (side, _) in planned.items() if side == "train"]
    # Seeds 0..7 ask sum, mean, sum, sum, sum, mean, max, sum (the shipped recipe's train set): with five
    # turns, the five statistics in name order (above, max, mean, min, sum) each take their first seed.
    asked = [get_family("numeric").make(int(t.rsplit("-", 1)[1]), {"level": 1}).variant for t in train]
    assert sorted(asked) == ["above", "max", "mean", "min", "sum"]
    assert train == sorted(train, key=lambda t: int(t.rsplit("-", 1)[1]))
    # RL-only candidates start past every seed a balanced train set may take (16 per train instance).
    with_rl = env(families={"numeric": {"level": 1}}, train_per_family=1, rl_per_family=1, balance_train=True)
    assert with_rl.data is not None
    rl = [t for t, (side, _) in recipe.planned_instances(with_rl.data).items() if side == "rl"]
    assert [int(t.rsplit("-", 1)[1]) >= 16 for t in rl] == [True]


def test_the_cache_key_follows_what_changes_the_data_and_nothing_else() -> None:
    def key(config: TerminalEnvConfig) -> str:
        assert config.data is not None
        return recipe.dataset_key(config, recipe.planned_instances(config.data))

    base = key(env())
    assert key(env()) == base
    assert key(env(concurrency=1)) == base  # how fast, not what
    assert key(env(mistake_rate=0.5)) != base
    assert key(env(rl_per_family=1)) != base
    assert key(env(balance_train=True)) != base
    assert key(env(families={"file-ops": {"level": 2}, "numeric": {"level": 1}})) != base
    compact = env()
    full = compact.model_copy(update={"agent": compact.agent.model_copy(update={"prompt_profile": "full"})})
    assert key(full) != base
    # the teacher's prompts state the run's fixed date and OS, so other ones make other conversations
    dated = compact.model_copy(
        update={"agent": compact.agent.model_copy(update={"environment_date": "2030-01-01"})}
    )
    other_os = compact.model_copy(
        update={"agent": compact.agent.model_copy(update={"environment_os": "Linux 7"})}
    )
    assert len({base, key(dated), key(other_os)}) == 3
    # the validated task set depends on the instances alone, so another profile or environment reuses it
    for other in (full, dated, other_os):
        assert recipe.tasks_key(recipe.planned_instances(other.data)) == recipe.tasks_key(  # type: ignore[arg-type]
            recipe.planned_instances(compact.data)  # type: ignore[arg-type]
        )


def test_training_order_is_seed_by_seed_and_in_the_key() -> None:
    config = env()
    assert config.data is not None
    planned = recipe.planned_instances(config.data)
    assert list(planned)[:4] == ["file-ops-0", "numeric-0", "file-ops-1", "numeric-1"]
    # A cached prepared.json lists the instances in the order training plays them: another order, another key.
    reordered = dict(reversed(list(planned.items())))
    assert recipe.dataset_key(config, reordered) != recipe.dataset_key(config, planned)


def test_an_unknown_family_or_knob_is_named() -> None:
    with pytest.raises(DataStageError, match="no-such-family"):
        recipe.planned_instances(env(families={"no-such-family": {}}).data)  # type: ignore[arg-type]
    with pytest.raises(DataStageError, match=r"env\.data\.families"):
        recipe.planned_instances(env(families={"numeric": {"level": 9}}).data)  # type: ignore[arg-type]


@pytest.mark.docker
@pytest.mark.slow
def test_a_small_stage_runs_every_step_then_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALE_HOME", str(tmp_path))
    config = env(families={"file-ops": {"level": 1}}, attempts=1, mistake_rate=1.0, concurrency=3)
    said: list[str] = []
    prepared = recipe.prepare(config, said.append)
    assert prepared.folder.parent == tmp_path / "datasets"
    assert (prepared.train_ids, prepared.eval_ids) == (["file-ops-0", "file-ops-1"], ["file-ops-100000"])
    conversations = [json.loads(line) for line in prepared.sft_path.read_text().splitlines()]
    assert len(conversations) == 2  # one attempt per train instance, each made a mistake and fixed it
    for conversation in conversations:
        calls = [m for m in conversation["messages"] if m.get("tool_calls")]
        assert [m["error"] for m in calls] == [True, False]
        for message in calls:  # collected in the compact profile: the call shows only `command`
            assert set(json.loads(message["tool_calls"][0]["function"]["arguments"])) == {"command"}
    assert (prepared.folder / "funnel" / "report.md").is_file()
    # The kept trajectories are also kept as ATIF, each valid under the atif models.
    kept_atif = sorted((prepared.folder / "atif").glob("*.json"))
    assert len(kept_atif) == 2 and all(atif.Trajectory.model_validate_json(p.read_text()) for p in kept_atif)
    assert any(line.startswith("data: validated 3 instances") for line in said)
    # The kept trajectories say which calls failed, and none of them (each began with its scripted mistake)
    # may start an expert for initialized resampling.
    assert prepared.experts is not None
    kept = [json.loads(line) for line in prepared.experts.read_text().splitlines()]
    assert [m["error"] for r in kept for m in r["messages"] if m.get("tool_calls")] == [True, False] * 2
    assert recorded_experts(prepared.experts) == {}

    def no_sandboxes(_env: TerminalEnvConfig) -> None:
        raise AssertionError("a complete dataset needs no sandbox")

    monkeypatch.setattr(recipe, "_sandboxes", no_sandboxes)
    again: list[str] = []
    assert recipe.prepare(config, again.append) == prepared
    assert again == [f"data: reusing {prepared.folder} (same families, seeds, generators and profile)"]


@pytest.mark.docker
def test_rl_plays_the_rl_only_instances_and_sft_imitates_the_train_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALE_HOME", str(tmp_path))
    config = env(
        families={"file-ops": {"level": 1}}, train_per_family=1, rl_per_family=1, attempts=1, concurrency=3
    )
    prepared = recipe.prepare(config, lambda _line: None)
    assert (prepared.train_ids, prepared.eval_ids) == (["file-ops-1"], ["file-ops-100000"])
    assert prepared.experts is not None
    kept = [json.loads(line) for line in prepared.experts.read_text().splitlines()]
    assert [record["task_id"] for record in kept] == ["file-ops-0"]
    assert len(prepared.sft_path.read_text().splitlines()) == 1
    assert prepared.summary[0].startswith("data: 1 train (SFT; 1 more that only RL plays), 1 held-out")


@pytest.mark.docker
def test_what_this_machine_could_not_judge_is_no_verdict_and_a_rerun_retries_it(
    rock_provider: SandboxProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALE_HOME", str(tmp_path))
    config = env(families={"file-ops": {"level": 1}}, train_per_family=1)
    assert config.data is not None
    planned = recipe.planned_instances(config.data)
    tasks = tmp_path / "tasks"
    recipe._generate(config.data, tasks, planned)
    dockerfile = tasks / "file-ops-0" / "environment" / "Dockerfile"
    good = dockerfile.read_text()
    dockerfile.write_text("FROM ale/no-such-base:0\n")  # its image cannot build here: infrastructure
    said: list[str] = []
    with pytest.raises(
        DataStageError, match=r"1 of 2 instances could not be judged on this machine \(first, file-ops-0"
    ):
        recipe._validate(config.data, tasks, rock_provider, planned, said.append)
    verdicts = json.loads((tasks / "validation.json").read_text())["verdicts"]
    assert verdicts["file-ops-0"]["judged"] is False
    assert verdicts["file-ops-100000"]["valid"] is True
    dockerfile.write_text(good)
    sides = recipe._validate(config.data, tasks, rock_provider, planned, said.append)
    assert sides == {"train": ["file-ops-0"], "rl": [], "eval": ["file-ops-100000"], "out-of-family": []}
    assert said[-1].startswith("data: validated 1 instances")
