"""`rome-bench check` piped at 80 columns (as in a CI log): every cell readable, none cut; the whole table
in the file `--output` names (issue 27 item 6)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "fixtures"


@pytest.mark.docker
def test_check_piped_at_80_columns_keeps_every_word(tmp_path: Path) -> None:
    saved = tmp_path / "check.txt"
    command = [sys.executable, "-c", "from rome.bench.cli import app; app()", "check", str(FIXTURES)]
    env = {**os.environ, "COLUMNS": "80", "ALE_PACKAGES": "offline"}
    done = subprocess.run(
        [*command, "--output", str(saved)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The saved file's path is printed whole (a path split over lines cannot be copied).
    lines = [line for line in done.stdout.splitlines() if not line.startswith("full table: ")]
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "…" not in done.stdout and "┃" not in done.stdout  # a list, not a squeezed table
    for task in sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()):
        assert f"- {task}" in lines
    # What a cell said is all there, wrapped: the uv task's note about the internet, word for word.
    assert "the task asks for the internet; granted packages only (no --allow-internet)" in " ".join(
        done.stdout.split()
    )
    table = saved.read_text()
    assert "┃ task" in table and max(len(line) for line in table.splitlines()) > 80
