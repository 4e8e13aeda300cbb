"""`env.data`: a terminal run that makes its own tasks and SFT data. roll runs the ROME data pipeline as a
child process (`rome data prepare`), never importing it; these tests check that boundary on roll's side with
the real command: a dataset folder already made (its prepared.json) is found again, failures arrive as one
line, and a stage roll stops does not outlive it."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console

from roll.config import validate_config
from roll.pipeline.config import TrainConfig
from roll.pipeline.controller import with_prepared_data
from roll.rollout.terminal.config import TerminalDataConfig, TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError, PreparedTerminalData, prepare_terminal_data

DATA = {"families": {"file-ops": {"level": 1}}, "train_per_family": 2, "eval_per_family": 3}


def test_tasks_are_either_named_or_generated() -> None:
    with pytest.raises(ValidationError, match=r"env\.task_ids is empty"):
        TerminalEnvConfig()
    with pytest.raises(ValidationError, match=r"env\.data generates the tasks"):
        TerminalEnvConfig(task_ids=["fix-permissions"], data=DATA)
    assert TerminalEnvConfig(data=DATA).task_ids == []


def test_held_out_seeds_may_not_overlap_the_train_seeds() -> None:
    # Held-out candidates that repeat a train instance are skipped: 2 held-out ones may draw on 100 seeds.
    with pytest.raises(
        ValidationError, match=r"train seeds 0\.\.9 and the held-out candidates' seeds 5\.\.104"
    ):
        TerminalDataConfig(families={"numeric": {}}, train_per_family=10, eval_per_family=2, eval_seed=5)
    with pytest.raises(
        ValidationError, match=r"train seeds 100\.\.109 and the held-out candidates' seeds 10\.\.109"
    ):
        TerminalDataConfig(
            families={"numeric": {}}, train_seed=100, train_per_family=10, eval_per_family=2, eval_seed=10
        )
    TerminalDataConfig(families={"numeric": {}}, train_per_family=10, eval_per_family=2, eval_seed=10)
    # RL-only candidates come after the train seeds, 50 seeds for each asked for.
    with pytest.raises(
        ValidationError,
        match=r"train and RL-only candidates' seeds 0\.\.59 and the held-out candidates' seeds 50\.\.149",
    ):
        TerminalDataConfig(
            families={"numeric": {}}, train_per_family=10, rl_per_family=1, eval_per_family=2, eval_seed=50
        )
    TerminalDataConfig(
        families={"numeric": {}}, train_per_family=10, rl_per_family=1, eval_per_family=2, eval_seed=60
    )
    # A balanced train set may take any of 16 seeds per train instance.
    with pytest.raises(ValidationError, match=r"train seeds 0\.\.159 and the held-out candidates' seeds 100"):
        TerminalDataConfig(
            families={"numeric": {}},
            train_per_family=10,
            balance_train=True,
            eval_per_family=2,
            eval_seed=100,
        )


def run_config(tmp_path: Path) -> TrainConfig:
    return validate_config(
        TrainConfig,
        {
            "name": "recipe",
            "output_dir": str(tmp_path / "run"),
            "warm_start": {"sft_config": "configs/sft_terminal.yaml", "overrides": ["max_steps=1"]},
            "env": {"type": "terminal", "data": DATA},
        },
    )


def made_before(config: TrainConfig, home: Path, prepared: dict[str, object]) -> Path:
    """The dataset folder `rome data prepare` keys this env by, as a finished earlier stage left it."""
    from rome.data.recipe import PREPARED, dataset_key, planned_instances

    env = config.env
    assert isinstance(env, TerminalEnvConfig) and env.data is not None
    folder = home / "datasets" / dataset_key(env, planned_instances(env.data))
    folder.mkdir(parents=True)
    (folder / PREPARED).write_text(
        PreparedTerminalData.model_validate({"folder": folder, **prepared}).model_dump_json()
    )
    return folder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$ALE_HOME of this process and so of the stage it starts."""
    monkeypatch.setenv("ALE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_prepared_data_names_the_tasks_and_the_sft_data(tmp_path: Path, home: Path) -> None:
    sft = tmp_path / "sft.jsonl"
    sft.write_text("{}\n")
    config = run_config(tmp_path)
    folder = made_before(
        config,
        home,
        {
            "tasks_dir": tmp_path / "tasks",
            "train_ids": ["file-ops-0", "file-ops-1"],
            "eval_ids": ["file-ops-100000"],
            "sft_path": sft,
            "summary": ["data: 2 train, 1 held out"],
        },
    )
    out = io.StringIO()
    config = with_prepared_data(config, Console(file=out, width=200))
    env = config.env
    assert isinstance(env, TerminalEnvConfig)
    assert (env.tasks_dir, env.task_ids, env.eval_task_ids, env.data) == (
        tmp_path / "tasks",
        ["file-ops-0", "file-ops-1"],
        ["file-ops-100000"],
        None,
    )
    assert config.warm_start is not None
    assert config.warm_start.overrides == ["max_steps=1", f"data.path={sft}"]
    assert out.getvalue().splitlines() == [
        f"data: reusing {folder} (same families, seeds, generators and profile)",
        "data: 2 train, 1 held out",
    ]


def test_a_stage_that_made_no_sft_data_stops_the_run(tmp_path: Path, home: Path) -> None:
    config = run_config(tmp_path)
    made_before(
        config,
        home,
        {"tasks_dir": tmp_path, "train_ids": ["a"], "eval_ids": [], "sft_path": tmp_path / "none"},
    )
    with pytest.raises(DataStageError, match="wrote no SFT data"):
        with_prepared_data(config, Console(file=io.StringIO()))


def test_the_stages_error_is_its_one_line(home: Path) -> None:
    env = TerminalEnvConfig(data={"families": {"nosuch": {}}})
    with pytest.raises(DataStageError) as raised:
        prepare_terminal_data(env, print)
    message = str(raised.value)
    assert message.startswith("env.data.families: unknown family 'nosuch'; `rome data families` lists them")
    assert "\n" not in message and "Traceback" not in message


def test_a_stage_roll_stops_does_not_outlive_it(home: Path) -> None:
    """roll interrupted while the stage works (here: its `say` raises, as Ctrl-C would) stops the child
    before the interrupt leaves roll."""
    env = TerminalEnvConfig(data={**DATA, "train_per_family": 1, "eval_per_family": 1})
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare_terminal_data(env, say)
    assert said and said[0].startswith("data: making 2 instances")
    assert [pid for pid in children(os.getpid()) if b"rome.cli" in cmdline(pid)] == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_stage_made_from_nothing_comes_back_through_the_boundary(home: Path) -> None:
    """The whole stage in the child (sandboxes included): its step lines reach `say` as it goes, and the
    prepared data roll reads back names what it made."""
    data = {"families": {"file-ops": {"level": 1}}, "train_per_family": 2, "eval_per_family": 1}
    env = TerminalEnvConfig(data={**data, "attempts": 1, "mistake_rate": 1.0, "concurrency": 3})
    said: list[str] = []
    prepared = prepare_terminal_data(env, said.append)
    assert prepared.folder.parent == home / "datasets"
    assert (prepared.train_ids, prepared.eval_ids) == (["file-ops-0", "file-ops-1"], ["file-ops-100000"])
    assert [line.split(" ")[1] for line in said] == [
        "making",
        "validated",
        "collected",
        "kept",
        "exported",
        "2",  # "data: 2 kept trajectories as ATIF in ..."
    ]
    assert len(prepared.sft_path.read_text().splitlines()) == 2
    again: list[str] = []
    assert prepare_terminal_data(env, again.append) == prepared
    assert again == [f"data: reusing {prepared.folder} (same families, seeds, generators and profile)"]


def children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == parent
            ):
                found.append(int(entry.name))
        except OSError:  # it ended while being read
            continue
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_the_grpo_baseline_has_the_recipes_budget() -> None:
    """configs/grpo.yaml differs from configs/ipa.yaml only in its name and its loss: same data, SFT, steps,
    episodes per step, start points (both from scratch, no imitation fallback), sampling and held-out eval."""
    from roll.config import load_config

    ipa, grpo = (load_config(TrainConfig, f"configs/{name}.yaml") for name in ("ipa", "grpo"))
    assert (ipa.loss.type, grpo.loss.type) == ("ipa", "grpo")
    assert isinstance(ipa.env, TerminalEnvConfig) and isinstance(grpo.env, TerminalEnvConfig)
    assert not ipa.env.resampling.enabled and not grpo.env.resampling.enabled
    assert not ipa.env.resampling.imitation
    same = {"name", "loss"}
    assert ipa.model_dump(exclude=same) == grpo.model_dump(exclude=same)


def test_data_and_expert_errors_are_one_line_before_anything_starts(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from roll.cli import app

    root = Path(__file__).resolve().parents[2]

    def train(*overrides: str) -> str:
        result = CliRunner().invoke(app, ["train", str(root / "configs" / "ipa.yaml"), *overrides])
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output and result.exception is not None
        return " ".join(result.output.split())

    out = train("env.data.families.nosuch.level=1", f"output_dir={tmp_path}")
    assert "env.data.families: unknown family 'nosuch'" in out
    terminal = root / "configs" / "ipa_terminal.yaml"
    missing = tmp_path / "missing.jsonl"
    result = CliRunner().invoke(
        app, ["train", str(terminal), f"env.experts={missing}", f"output_dir={tmp_path}"]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"env.experts: {missing} cannot be read" in " ".join(result.output.split())
