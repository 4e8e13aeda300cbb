"""The local executor: the user's machine, file access scoped to the working directory.

The shell is persistent in what people rely on (the current directory and exported variables carry
over from one command to the next) while each command runs in its own process group, so a timeout or
Ctrl-C kills the command and everything it started without killing the shell state.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from iflow.executors.base import (
    DEFAULT_OUTPUT_CAP,
    SKIPPED_DIRS,
    CommandResult,
    DirEntry,
    ExecutorError,
    SearchMatch,
    cap_output,
    match_glob,
)


class LocalExecutor:
    kind = "local"

    def __init__(self, workdir: str | Path, output_cap: int = DEFAULT_OUTPUT_CAP) -> None:
        self.root = Path(workdir).resolve()
        if not self.root.is_dir():
            raise ExecutorError(
                f"the working directory {self.root} does not exist; create it or pick another"
            )
        self.workdir = str(self.root)
        self.output_cap = output_cap
        self._state_dir = Path(tempfile.mkdtemp(prefix="iflow-shell-"))
        self._shell_cwd = self.root
        self._env_file = self._state_dir / "env.sh"
        self._cwd_file = self._state_dir / "cwd"
        self._env_file.write_text("")

    # -- shell -------------------------------------------------------------------------------------
    def run(self, command: str, timeout_s: float) -> CommandResult:
        if not self._shell_cwd.is_dir():
            self._shell_cwd = self.root
        script = (
            f". {shlex.quote(str(self._env_file))} 2>/dev/null\n"
            f"{command}\n"
            "__iflow_status=$?\n"
            f"pwd > {shlex.quote(str(self._cwd_file))}\n"
            f"export -p > {shlex.quote(str(self._env_file))}\n"
            "exit $__iflow_status\n"
        )
        started = time.monotonic()
        with tempfile.TemporaryFile(dir=self._state_dir) as output:
            process = subprocess.Popen(
                ["bash", "-c", script],
                cwd=self._shell_cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            timed_out = False
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
            except KeyboardInterrupt:
                _kill_group(process)
                raise
            text = _read_bounded(output, self.output_cap)
        if not timed_out and self._cwd_file.exists():
            new_cwd = Path(self._cwd_file.read_text().strip())
            if new_cwd.is_dir():
                self._shell_cwd = new_cwd
        text, truncated = cap_output(text, self.output_cap)
        return CommandResult(
            output=text,
            exit_code=None if timed_out else process.returncode,
            timed_out=timed_out,
            truncated=truncated,
            duration_s=time.monotonic() - started,
        )

    # -- files -------------------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ExecutorError(
                f"{path} is outside the working directory {self.root}; iflow only touches files under it "
                "(start iflow in a parent directory to work there)"
            )
        return resolved

    def read_text(self, path: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ExecutorError(f"{path} is a directory; use list_directory to see its contents")
        if not target.exists():
            raise ExecutorError(f"{path} does not exist; check the path with glob or list_directory")
        data = target.read_bytes()
        if b"\0" in data[:8192]:
            raise ExecutorError(f"{path} is a binary file ({len(data)} bytes); iflow reads text files only")
        return data.decode("utf-8", "replace")

    def write_text(self, path: str, content: str) -> None:
        target = self.resolve(path)
        if target.is_dir():
            raise ExecutorError(f"{path} is a directory; give a file path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")

    def exists(self, path: str) -> bool:
        return self.resolve(path).exists()

    def list_directory(self, path: str) -> list[DirEntry]:
        target = self.resolve(path)
        if not target.is_dir():
            raise ExecutorError(f"{path} is not a directory; use read_file for files")
        entries = []
        for child in sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            is_dir = child.is_dir()
            entries.append(DirEntry(child.name, is_dir, None if is_dir else child.stat().st_size))
        return entries

    def list_files(self, path: str) -> list[str]:
        target = self.resolve(path)
        if not target.is_dir():
            raise ExecutorError(f"{path} is not a directory")
        found = []
        for current, dirs, files in os.walk(target):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            base = Path(current).relative_to(target)
            found.extend(str(base / name) if str(base) != "." else name for name in sorted(files))
        return found

    def search(self, pattern: str, path: str, include: str | None, max_matches: int) -> list[SearchMatch]:
        target = self.resolve(path)
        try:
            regex = re.compile(pattern)
        except re.error as error:
            raise ExecutorError(
                f"the pattern {pattern!r} is not a valid regular expression: {error}"
            ) from error
        if shutil.which("rg"):
            return self._search_ripgrep(pattern, target, include, max_matches)
        return self._search_python(regex, target, include, max_matches)

    def _search_ripgrep(
        self, pattern: str, target: Path, include: str | None, limit: int
    ) -> list[SearchMatch]:
        command = [
            "rg",
            "--line-number",
            "--no-heading",
            "--color",
            "never",
            "--with-filename",
            "-e",
            pattern,
        ]
        if include:
            command += ["--glob", include]
        completed = subprocess.run(
            [*command, str(target)], capture_output=True, text=True, timeout=60, cwd=self.root, check=False
        )
        if completed.returncode not in (0, 1):
            raise ExecutorError(f"ripgrep failed: {completed.stderr.strip()}")
        matches = []
        for line in completed.stdout.splitlines():
            file, _, rest = line.partition(":")
            number, _, text = rest.partition(":")
            if number.isdigit():
                matches.append(SearchMatch(self._relative(Path(file)), int(number), text))
        matches.sort(key=lambda m: (m.path, m.line))
        return matches[:limit]

    def _search_python(
        self, regex: re.Pattern[str], target: Path, include: str | None, limit: int
    ) -> list[SearchMatch]:
        files = [target] if target.is_file() else [target / name for name in self.list_files(str(target))]
        if include and target.is_dir():
            allowed = set(
                match_glob(include if "/" in include else f"**/{include}", self.list_files(str(target)))
            )
            files = [target / name for name in sorted(allowed)]
        matches: list[SearchMatch] = []
        for file in files:
            try:
                data = file.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
                if regex.search(line):
                    matches.append(SearchMatch(self._relative(file), number, line))
                    if len(matches) >= limit:
                        return matches
        return matches

    def fingerprints(self, paths: list[str]) -> dict[str, str | None]:
        stamps: dict[str, str | None] = {}
        for path in paths:
            try:
                stat = self.resolve(path).stat()
                stamps[path] = f"{stat.st_mtime_ns}:{stat.st_size}"
            except (OSError, ExecutorError):
                stamps[path] = None
        return stamps

    def _relative(self, path: Path) -> str:
        resolved = path.resolve() if path.is_absolute() else (self.root / path).resolve()
        return str(resolved.relative_to(self.root))

    def close(self) -> None:
        shutil.rmtree(self._state_dir, ignore_errors=True)


def _read_bounded(file: IO[bytes], cap: int) -> str:
    """The output, reading only its head and tail when it is far past the cap (a runaway command)."""
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    if size <= 4 * cap:
        return file.read().decode("utf-8", "replace")
    head = file.read(2 * cap).decode("utf-8", "replace")
    file.seek(size - 2 * cap)
    tail = file.read().decode("utf-8", "replace")
    return f"{head}\n... [{size - 4 * cap} bytes omitted] ...\n{tail}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
