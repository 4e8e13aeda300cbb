"""One env protocol: `env.type` picks an env kind from the registry, and the pipeline calls only its hooks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from roll.config import ConfigError, load_config
from roll.pipeline.config import TrainConfig
from roll.rollout.config import GEMEnvConfig
from roll.rollout.envs import ENV_KINDS, UnknownEnvKindError, env_errors, env_kind
from roll.rollout.episode import EpisodeTask
from roll.rollout.gem_env import EnvUnavailableError
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.tasks import TerminalTasksError
from roll.types import Chunk, Trajectory

TERMINAL = ["env.type=terminal", "env.task_ids=[fix-permissions]"]
ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_resolves_both_env_kinds() -> None:
    assert sorted(ENV_KINDS) == ["gem", "terminal"]
    assert env_kind("gem").config_type is GEMEnvConfig
    assert env_kind("terminal").config_type is TerminalEnvConfig
    for name, kind in ENV_KINDS.items():
        assert kind.name == name
    gem = load_config(TrainConfig, None, [])
    terminal = load_config(TrainConfig, None, TERMINAL)
    assert type(gem.env) is GEMEnvConfig and env_kind(gem.env.type) is ENV_KINDS["gem"]
    assert type(terminal.env) is TerminalEnvConfig and env_kind(terminal.env.type) is ENV_KINDS["terminal"]


def test_an_unknown_env_type_names_the_allowed_values() -> None:
    with pytest.raises(UnknownEnvKindError, match=re.escape("one of 'gem', 'terminal'")):
        env_kind("atari")
    with pytest.raises(ConfigError, match=re.escape("env.type must be one of 'gem', 'terminal'")):
        load_config(TrainConfig, None, ["env.type=atari"])


def test_a_kind_checks_the_rest_of_the_config() -> None:
    with pytest.raises(ConfigError, match=r"eval\.seed_offset is 3, but a terminal env"):
        load_config(TrainConfig, None, [*TERMINAL, "eval.seed_offset=3"])
    assert load_config(TrainConfig, None, ["eval.seed_offset=3"]).eval.seed_offset == 3  # a GEM env uses it


def test_each_kind_brings_its_own_errors_and_summary_columns() -> None:
    assert {EnvUnavailableError, TerminalTasksError} <= set(env_errors())
    assert env_kind("gem").summary_columns == {"format_errors"}
    assert env_kind("terminal").summary_columns == {"agent_errors"}


def played(reward: float, **metadata: object) -> Trajectory:
    chunk = Chunk(context_ids=[1], output_ids=[2], weight_version=0)
    return Trajectory(chunks=[chunk], reward=reward, metadata=metadata)


def test_a_gem_evaluation_plays_fixed_seeds_and_compares_them_seed_by_seed(tmp_path: Path) -> None:
    config = load_config(TrainConfig, None, [f"output_dir={tmp_path}"])
    kind = env_kind("gem")
    run = kind.start(config, None)
    tasks = run.eval_tasks(episodes=3, seed_offset=5)
    assert [(t.group_id, t.seed) for t in tasks] == [("eval5", 5), ("eval6", 6), ("eval7", 7)]
    won, lost = played(1.0, seed=5, success=True), played(0.0, seed=7, success=False)
    main, apart = kind.eval_sets(config.env, tasks, [won, None, lost], 3)
    assert (main.played, main.failed, apart) == ([won, lost], 1, {})
    assert main.fields == {"won_seeds": [5], "seed_rewards": {"5": 1.0, "7": 0.0}}


def test_a_terminal_evaluation_keeps_the_out_of_family_set_apart() -> None:
    env = TerminalEnvConfig(task_ids=["a"], eval_task_ids=["b"], out_of_family_task_ids=["x"])
    tasks = [EpisodeTask(f"eval-{task}", seed=i, start=0) for i, task in enumerate("bx")]
    results = [played(1.0, task="b", start=0, index=0, success=True), None]
    main, apart = env_kind("terminal").eval_sets(env, tasks, results, 1)
    assert (main.played, main.failed, main.fields["won_seeds"]) == (results[:1], 0, ["b@0"])
    assert set(apart) == {"out_of_family"}
    assert (apart["out_of_family"].played, apart["out_of_family"].failed) == ([], 1)
    assert apart["out_of_family"].fields == {"won_seeds": [], "seed_rewards": {}}


def test_the_pipeline_names_no_env_kind_and_rollout_never_imports_it() -> None:
    """The pipeline reaches env kinds through the registry only; rollout sits below the pipeline."""
    reaching = []
    for path in sorted((ROOT / "roll" / "rollout").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):  # lazy and TYPE_CHECKING imports included
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else [f"{'.' * node.level}{node.module or ''}"]
            reaching += [
                f"{path.relative_to(ROOT)}: {n}" for n in names if re.match(r"roll\.pipeline|\.+pipeline", n)
            ]
    assert reaching == []
    named = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in sorted((ROOT / "roll" / "pipeline").rglob("*.py"))
        for line in path.read_text().splitlines()
        if re.search(
            r"isinstance\(.*EnvConfig|GEMEnvConfig|TerminalEnvConfig|roll\.rollout\.terminal\.config", line
        )
    ]
    assert named == []
