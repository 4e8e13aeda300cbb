"""The run folder's checkpoint bookkeeping: the `latest` marker and how many checkpoints stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from roll.pipeline.tracking import ResumeError, RunLog


def checkpoint(log: RunLog, step: int, keep: int) -> None:
    folder = log.checkpoint_dir(step)
    folder.mkdir(parents=True)
    (folder / "trainer_state.pt").write_bytes(b"weights and optimizer")
    log.mark_checkpoint(step, {"step": step, "next_group": 2 * step}, keep)


@pytest.mark.parametrize(("keep", "left"), [(1, ["step_000030"]), (2, ["step_000020", "step_000030"])])
def test_only_the_newest_checkpoints_stay_and_latest_names_the_last(
    tmp_path: Path, keep: int, left: list[str]
) -> None:
    log = RunLog(tmp_path / "run", resume_step=None)
    for step in (10, 20, 30):
        checkpoint(log, step, keep)
    log.close()
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step_*")) == left
    found = RunLog.find_checkpoint(tmp_path / "run")
    assert found is not None
    folder, state = found
    assert folder.name == "step_000030" and state == {"step": 30, "next_group": 60}
    assert (folder / "trainer_state.pt").read_bytes() == b"weights and optimizer"


def test_a_resumed_run_drops_what_the_killed_run_left_after_its_checkpoint(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "run", resume_step=10)
    checkpoint(log, 10, keep=1)
    (log.checkpoint_dir(18)).mkdir()  # the killed run's half-written checkpoint, never marked
    checkpoint(log, 12, keep=1)
    log.close()
    assert [p.name for p in (tmp_path / "run" / "checkpoints").glob("step_*")] == ["step_000012"]
    found = RunLog.find_checkpoint(tmp_path / "run")
    assert found is not None and found[0].name == "step_000012"


def test_resume_without_a_checkpoint_keeps_the_logged_steps(tmp_path: Path) -> None:
    run = tmp_path / "run"
    log = RunLog(run, resume_step=None)
    log.log_eval({"step": 0, "label": "before RL", "success": 0.25})
    log.log_step({"step": 1, "reward": 0.5})  # killed here, before the first checkpoint
    log.close()
    logged = {name: (run / name).read_text() for name in ("metrics.jsonl", "eval.jsonl")}
    with pytest.raises(ResumeError, match=r"no complete checkpoint yet .*metrics\.jsonl and eval\.jsonl"):
        RunLog.resume_point(run)
    assert {name: (run / name).read_text() for name in logged} == logged


def test_resume_of_a_run_that_logged_nothing_starts_at_step_zero(tmp_path: Path) -> None:
    assert RunLog.resume_point(tmp_path / "never-ran") is None
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    assert RunLog.resume_point(tmp_path / "empty") is None
    log = RunLog(tmp_path / "run", resume_step=None)
    checkpoint(log, 4, keep=1)
    log.log_step({"step": 5, "reward": 1.0})
    log.close()
    found = RunLog.resume_point(tmp_path / "run")
    assert found is not None and found[1] == {"step": 4, "next_group": 8}
