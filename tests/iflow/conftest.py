"""Fixtures for iflow tests: an isolated iFlow home, a temporary git repository, scripted models."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def iflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own ~/.iflow (sessions, todos, memory, settings), never the user's."""
    home = tmp_path / "iflow-home"
    home.mkdir()
    monkeypatch.setenv("IFLOW_HOME", str(home))
    monkeypatch.setenv("IFLOW_SYSTEM_SETTINGS", str(tmp_path / "no-system-settings.json"))
    for variable in ("IFLOW_baseUrl", "IFLOW_apiKey", "IFLOW_modelName", "IFLOW_BASE_URL", "IFLOW_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    return home


@pytest.fixture
def git_repo(tmp_path: Path) -> Iterator[Path]:
    """A small committed project: a buggy calculator and its test."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (repo / "docs").mkdir()
    (repo / "docs" / "notes.md").write_text("# Notes\nadd is broken\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    yield repo
