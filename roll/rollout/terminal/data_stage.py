"""The data stage of a terminal run (`env.data`): tasks and SFT data made before training starts.

roll defines what the stage must deliver (`PreparedTerminalData`); the ROME data pipeline implements it and
registers itself under the entry-point group `roll.terminal_data` (pyproject.toml). roll never imports the
pipeline: it sits above roll (it serves ROLL's engines while collecting), so the link is a plugin."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

from pydantic import Field

from roll.config import StrictConfig
from roll.rollout.terminal.config import TerminalEnvConfig

ENTRY_POINT_GROUP = "roll.terminal_data"


class PreparedTerminalData(StrictConfig):
    """What the data stage made: the run trains on `train_ids`, evaluates on `eval_ids` (both valid instances
    under `tasks_dir`) and warm-starts with SFT on `sft_path`."""

    folder: Path = Field(description="The content-addressed dataset folder (funnel report inside).")
    tasks_dir: Path
    train_ids: list[str] = Field(min_length=1)
    eval_ids: list[str] = Field(
        description="In-family held-out instances: new instances of the trained families."
    )
    out_of_family_ids: list[str] = Field(
        default_factory=list, description="Held-out instances of the families the run never trains on."
    )
    sft_path: Path
    experts: Path | None = Field(
        None, description="The kept trajectories (JSONL): train tasks' experts for initialized resampling."
    )
    summary: list[str] = Field(default_factory=list, description="Lines for the run's log.")


class DataStageError(RuntimeError):
    """The data stage cannot run or made nothing usable; the message says what to do."""


DataStage = Callable[[TerminalEnvConfig, Callable[[str], None]], PreparedTerminalData]


def data_stage() -> DataStage:
    """The installed implementation of the stage (the ROME data pipeline's `rome.data.recipe:prepare`)."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    if not found:
        raise DataStageError(
            f"env.data needs a data pipeline registered under the entry-point group {ENTRY_POINT_GROUP!r}, "
            "and none is installed; install ALE with its rome package (`pip install -e .` in the repository, "
            "which ./scripts/setup.sh does) or name the tasks in env.task_ids instead of env.data"
        )
    return found[sorted(found.names)[0]].load()


def prepare_terminal_data(env: TerminalEnvConfig, say: Callable[[str], None]) -> PreparedTerminalData:
    """Run the data stage for `env.data` and check that it made something to train and evaluate on."""
    assert env.data is not None
    prepared = data_stage()(env, say)
    if not prepared.sft_path.is_file():
        raise DataStageError(
            f"the data stage wrote no SFT data ({prepared.sft_path}); read its funnel report in "
            f"{prepared.folder} and loosen env.data (more attempts, other families)"
        )
    return prepared
