"""Every ATIF file ALE writes validates with the `atif` models: one walk over a training run's episodes, a
bench run's trials, a data-stage export and an iflow session (each written by its producer's own writer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import atif

from iflow.testing import ScriptedOpenAIServer, call, say
from rome.data.atif import export_atif
from tests.rome.data.transcripts import SUM, transcript
from tests.view.bench_fixture import write_bench_run
from tests.view.run_fixture import write_run


def trajectories_under(folder: Path) -> list[Path]:
    return [
        p
        for p in folder.rglob("*.json")
        if p.parent.name == "agent" or "episodes" in p.parts or "atif" in p.parts
    ]


def test_every_producer_writes_valid_atif(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    write_run(tmp_path / "runs" / "ipa", steps=1)
    write_bench_run(tmp_path / "bench")
    export_atif([transcript([SUM])], tmp_path / "data" / "atif")
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.setenv("IFLOW_HOME", str(tmp_path / "iflow-home"))
    with ScriptedOpenAIServer([call("run_shell_command", command="echo hi"), say("Done.")]) as server:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "iflow"), "-p", "say hi", "--yolo", "--base-url", server.url,
             "--model", "m", "--trajectory", str(tmp_path / "iflow" / "atif" / "session.json")],
            cwd=repo, env=dict(os.environ), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr

    found = trajectories_under(tmp_path)
    producers = {p.relative_to(tmp_path).parts[0] for p in found}
    assert producers == {"runs", "bench", "data", "iflow"}
    for path in found:
        trajectory = atif.Trajectory.model_validate(json.loads(path.read_text()))
        assert trajectory.schema_version == "ATIF-v1.8" and trajectory.steps, path
