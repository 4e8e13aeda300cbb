"""Gather the session-start environment snapshot (the impure half of the environment reminder)."""

from __future__ import annotations

import platform
from datetime import date

from iflow.executors.base import Executor, ExecutorError
from iflow.types import EnvironmentSnapshot


def snapshot_environment(executor: Executor, tool_names: list[str]) -> EnvironmentSnapshot:
    try:
        listing = tuple(f"{e.name}/" if e.is_dir else e.name for e in executor.list_directory("."))
    except ExecutorError:
        listing = ()
    git = executor.run("git status --short --branch 2>/dev/null", timeout_s=20)
    git_status = git.output if git.exit_code == 0 and git.output.strip() else None
    if executor.kind == "local":
        os_name = f"{platform.system()} {platform.release()}"
    else:
        uname = executor.run("uname -sr", timeout_s=20)
        os_name = uname.output.strip() or "Linux"
    return EnvironmentSnapshot(
        cwd=executor.workdir,
        listing=listing,
        git_status=git_status,
        tools=tuple(tool_names),
        date=date.today().isoformat(),
        os=os_name,
    )
