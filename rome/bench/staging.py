"""Task folders handed to a private fleet this process started: the fleet builds images only from its build
roots (folders its operator controls), and this process is that operator, so each task's environment folder
is copied into the fleet's own staging root (in its state folder, which no sandbox can write) and built from
there. Tasks may then live anywhere (a temporary folder, a generated task set) without widening the roots."""

from __future__ import annotations

import hashlib
import shutil
import threading
from pathlib import Path

from rome.terminal_tasks.task import Task


class Staging:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._locks: dict[Path, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, task: Task) -> threading.Lock:
        """Held while the task's staged folder is copied and built (a second copy would swap it mid-build)."""
        with self._guard:
            return self._locks.setdefault(self.folder(task), threading.Lock())

    def folder(self, task: Task) -> Path:
        digest = hashlib.sha256(str(task.path.resolve()).encode()).hexdigest()[:12]
        return self.root / digest

    def stage(self, task: Task) -> Task:
        """The task with its environment folder copied under the root (afresh: the task may have changed);
        a task built from a named image is returned as it is. Call it holding `lock(task)`."""
        if task.build_context is None or task.dockerfile is None:
            return task
        target = self.folder(task)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(task.build_context, target, symlinks=True)
        return task.model_copy(update={"build_context": target, "dockerfile": target / task.dockerfile.name})
