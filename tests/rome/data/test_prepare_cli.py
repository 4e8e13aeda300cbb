"""`rome data prepare`, the data stage as `roll train` runs it: the env section as JSON in, progress lines on
stdout, the prepared data as JSON out, a failure as one `error:` line on stderr with exit status 2. Run as a
real child process, as roll runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.data_stage import PreparedTerminalData
from rome.data.recipe import PREPARED, dataset_key, planned_instances

ENV = {"data": {"families": {"file-ops": {"level": 1}}, "train_per_family": 2, "eval_per_family": 1}}


def prepare(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rome.cli", "data", "prepare", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "ALE_HOME": str(home)},
        timeout=120,
    )


def test_a_folder_made_before_is_found_and_handed_back_as_json(tmp_path: Path) -> None:
    env = TerminalEnvConfig.model_validate(ENV)
    assert env.data is not None
    folder = tmp_path / "home" / "datasets" / dataset_key(env, planned_instances(env.data))
    folder.mkdir(parents=True)
    made = PreparedTerminalData(
        folder=folder,
        tasks_dir=tmp_path / "tasks",
        train_ids=["file-ops-0", "file-ops-1"],
        eval_ids=["file-ops-100000"],
        sft_path=folder / "sft.jsonl",
        summary=["data: 2 train, 1 held out"],
    )
    (folder / PREPARED).write_text(made.model_dump_json())
    reused = f"data: reusing {folder} (same families, seeds, generators and profile)"

    done = prepare(tmp_path / "home", stdin=json.dumps(ENV))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [reused, "data: 2 train, 1 held out", str(folder / PREPARED)]

    section, out = tmp_path / "env.json", tmp_path / "out" / "prepared.json"
    section.write_text(env.model_dump_json())
    out.parent.mkdir()
    done = prepare(tmp_path / "home", str(section), "--out", str(out))
    assert (done.returncode, done.stderr, done.stdout.splitlines()) == (0, "", [reused])
    assert PreparedTerminalData.model_validate_json(out.read_text()) == made


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{not json", "cannot read the env section from stdin as JSON: Expecting property name"),
        (
            json.dumps({**ENV, "tasks": 1}),
            "invalid env section (stdin): tasks: unknown key (allowed keys: agent, data,",
        ),
        (json.dumps({"task_ids": ["a"]}), "the env section from stdin has no data (env.data)"),
        (
            json.dumps({"data": {"families": {"nosuch": {}}}}),
            "env.data.families: unknown family 'nosuch'; `rome data families` lists them",
        ),
    ],
)
def test_a_failure_is_one_line_on_stderr(tmp_path: Path, section: str, message: str) -> None:
    done = prepare(tmp_path / "home", stdin=section)
    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"error: {message}"), done.stderr
