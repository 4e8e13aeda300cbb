"""Where ALE keeps its caches: `$ALE_HOME`, else `.ale/` in the repository root, else `~/.cache/ale`."""

import os
from pathlib import Path


def ale_home() -> Path:
    configured = os.environ.get("ALE_HOME")
    if configured:
        home = Path(configured).expanduser()
    else:
        repo_root = Path(__file__).resolve().parents[2]
        home = (
            repo_root / ".ale" if (repo_root / "pyproject.toml").exists() else Path.home() / ".cache" / "ale"
        )
    home.mkdir(parents=True, exist_ok=True)
    return home
