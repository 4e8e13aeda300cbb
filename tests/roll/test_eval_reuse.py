"""Greedy evaluations of fixed weights are stored by content and reused only when nothing that decides their
episodes changed (roll.pipeline.eval_reuse); the run's pipeline reuse is checked in test_pipeline.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roll.config import load_config
from roll.pipeline.config import TrainConfig
from roll.pipeline.controller import reuse_key
from roll.pipeline.eval_reuse import EvaluationStore, evaluation_key, files_digest
from roll.rollout.envs import env_kind
from roll.rollout.episode import EpisodeTask
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.types import Chunk, Trajectory

TASKS = [EpisodeTask("eval-b", seed=0, start=0), EpisodeTask("eval-x", seed=1, start=0)]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def model_folder(root: Path, weights: str = "w1") -> Path:
    write(root / "config.json", "{}")
    write(root / "model.safetensors", weights)
    return root


def played(reward: float) -> Trajectory:
    chunk = Chunk(context_ids=[1, 2], output_ids=[3], output_logprobs=[-0.5], weight_version=0)
    return Trajectory(chunks=[chunk], reward=reward, group_id="eval-b", metadata={"success": reward > 0})


def settings(tmp_path: Path, *overrides: str) -> dict[str, Any]:
    config = load_config(
        TrainConfig, None, [f"output_dir={tmp_path}", "eval.sampling.temperature=0", *overrides]
    )
    return json.loads(config.model_dump_json())


def test_a_folder_digest_follows_names_and_contents_but_not_caches(tmp_path: Path) -> None:
    task = tmp_path / "task-a"
    write(task / "instruction.md", "sum the column")
    write(task / "tests" / "test.sh", "exit 0")
    first = files_digest([task])
    write(task / "tests" / "__pycache__" / "x.pyc", "cache")
    write(task / ".trials" / "run.json", "a trial")
    assert files_digest([task]) == first
    write(task / "tests" / "test.sh", "exit 1")
    assert files_digest([task]) != first
    write(task / "tests" / "test.sh", "exit 0")
    assert files_digest([task]) == first
    (task / "tests" / "test.sh").rename(task / "tests" / "check.sh")
    assert files_digest([task]) != first


def test_the_key_changes_with_weights_settings_episodes_and_task_content(tmp_path: Path) -> None:
    model = model_folder(tmp_path / "model")
    task = write(tmp_path / "tasks" / "b" / "instruction.md", "print the mean").parent
    key = evaluation_key(str(model), settings(tmp_path), TASKS, [task])
    assert evaluation_key(str(model), settings(tmp_path), TASKS, [task]) == key
    # What training does, where the run writes and the engine's sampling seed (greedy: argmax) do not decide
    # an evaluation's episodes.
    assert evaluation_key(str(model), settings(tmp_path, "engines.engine.seed=3"), TASKS, [task]) == key
    assert (
        evaluation_key(str(model), settings(tmp_path / "other", "trainer.optimizer.lr=0.5"), TASKS, [task])
        == key
    )

    different = [
        evaluation_key(str(model), settings(tmp_path, "eval.sampling.max_new_tokens=7"), TASKS, [task]),
        evaluation_key(str(model), settings(tmp_path, "env.max_turns=2"), TASKS, [task]),
        evaluation_key(str(model), settings(tmp_path, "engines.engine.max_batch_size=3"), TASKS, [task]),
        evaluation_key(str(model), settings(tmp_path), TASKS[:1], [task]),
    ]
    write(model / "model.safetensors", "w2")
    different.append(evaluation_key(str(model), settings(tmp_path), TASKS, [task]))
    write(model / "model.safetensors", "w1")
    write(task / "instruction.md", "print the median")
    different.append(evaluation_key(str(model), settings(tmp_path), TASKS, [task]))
    assert len({key, *different}) == len(different) + 1


def test_the_store_keeps_only_evaluations_whose_episodes_all_ran(tmp_path: Path) -> None:
    store = EvaluationStore(tmp_path / ".evaluations")
    assert store.load("k1") is None
    results = [played(1.0), played(0.0)]
    assert store.save("k1", "ipa-s0", "base", list(results))
    stored = store.load("k1")
    assert stored is not None and (stored.run, stored.label, stored.results) == ("ipa-s0", "base", results)
    assert not store.save("k2", "ipa-s0", "base", [played(1.0), None])  # an episode that failed to run
    assert store.load("k2") is None
    assert [p.name for p in (tmp_path / ".evaluations").iterdir()] == ["k1.json"]  # no temporary left
    (tmp_path / ".evaluations" / "k3.json").write_text("{not json")
    assert store.load("k3") is None
    (tmp_path / ".evaluations" / "k4.json").write_text((tmp_path / ".evaluations" / "k1.json").read_text())
    assert store.load("k4") is None  # a file stored under another key's name


def test_only_greedy_evaluations_of_fixed_weights_on_content_known_tasks_are_reused(tmp_path: Path) -> None:
    model = str(model_folder(tmp_path / "model"))
    greedy = load_config(TrainConfig, None, [f"output_dir={tmp_path}", "eval.sampling.temperature=0"])
    gem = env_kind("gem")
    assert reuse_key(greedy, gem, TASKS, model) is not None
    assert reuse_key(greedy, gem, TASKS, None) is None  # the run's own weights, after RL steps
    sampled = greedy.model_copy(
        update={"eval": greedy.eval.model_copy(update={"sampling": greedy.rollout.sampling})}
    )
    assert sampled.eval.sampling.temperature == 1.0 and reuse_key(sampled, gem, TASKS, model) is None
    off = greedy.model_copy(update={"eval": greedy.eval.model_copy(update={"reuse": False})})
    assert reuse_key(off, gem, TASKS, model) is None
    served = greedy.model_copy(
        update={"env": greedy.env.model_copy(update={"rock_url": "http://127.0.0.1:1"})}
    )
    assert reuse_key(served, gem, TASKS, model) is None  # a GEM env served elsewhere runs code we cannot see


def test_a_terminal_evaluation_is_identified_by_the_folders_of_the_tasks_it_plays(tmp_path: Path) -> None:
    kind = env_kind("terminal")
    held_out = TerminalEnvConfig(
        tasks_dir=tmp_path, task_ids=["a"], eval_task_ids=["b"], out_of_family_task_ids=["x"]
    )
    assert kind.eval_sources(held_out) == [tmp_path / "b", tmp_path / "x"]
    experts = tmp_path / "kept.jsonl"
    train_only = TerminalEnvConfig(tasks_dir=tmp_path, task_ids=["a"], experts=experts)
    assert kind.eval_sources(train_only) == [tmp_path / "a", experts]  # start points prefill the experts
