"""The data stage of `roll train` (rome.data.recipe): what it plans, how its cache is keyed, and one real run
at a small size that a second call then reuses without a sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError
from rome.data import recipe

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


def test_the_cache_key_follows_what_changes_the_data_and_nothing_else() -> None:
    def key(config: TerminalEnvConfig) -> str:
        assert config.data is not None
        return recipe.dataset_key(config, recipe.planned_instances(config.data))

    base = key(env())
    assert key(env()) == base
    assert key(env(concurrency=1)) == base  # how fast, not what
    assert key(env(mistake_rate=0.5)) != base
    assert key(env(families={"file-ops": {"level": 2}, "numeric": {"level": 1}})) != base
    compact = env()
    full = compact.model_copy(update={"agent": compact.agent.model_copy(update={"prompt_profile": "full"})})
    assert key(full) != base
    # the validated task set depends on the instances alone, so another profile reuses it
    assert recipe.tasks_key(recipe.planned_instances(full.data)) == recipe.tasks_key(  # type: ignore[arg-type]
        recipe.planned_instances(compact.data)  # type: ignore[arg-type]
    )


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
    assert any(line.startswith("data: validated 3 instances") for line in said)

    def no_sandboxes(_env: TerminalEnvConfig) -> None:
        raise AssertionError("a complete dataset needs no sandbox")

    monkeypatch.setattr(recipe, "_sandboxes", no_sandboxes)
    again: list[str] = []
    assert recipe.prepare(config, again.append) == prepared
    assert again == [f"data: reusing {prepared.folder} (same families, seeds, generators and profile)"]
