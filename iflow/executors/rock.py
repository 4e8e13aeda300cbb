"""The ROCK executor: every tool runs inside a ROCK sandbox through ``rock.sdk``.

File reads and writes go through the sandbox's file API; listing, globbing and searching run POSIX
``find``/``grep`` in the sandbox (present in every image ROCK builds, busybox included), and the
matching semantics (globs, skipped folders) are applied here, so they equal the local executor's.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    # The one module of iflow that names ROCK: the agent reaches a sandbox through this executor.
    from rock.sdk import Sandbox

SHELL_SESSION = "iflow"
HELPER_TIMEOUT_S = 60.0  # listing, searching, stat: iflow's own commands, not the model's


class RockExecutor:
    kind = "rock"

    def __init__(
        self,
        sandbox: Sandbox,
        workdir: str = "/tmp/workspace",
        output_cap: int = DEFAULT_OUTPUT_CAP,
        owns_sandbox: bool = False,
    ) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self.output_cap = output_cap
        self._owns_sandbox = owns_sandbox
        made = self._helper_in("/", f"mkdir -p {shlex.quote(workdir)}")
        if made.exit_code != 0:
            raise ExecutorError(f"cannot create {workdir} in the sandbox: {made.output.strip()}")
        sandbox.create_session(SHELL_SESSION, cwd=workdir)

    @classmethod
    def start(
        cls, image: str, workdir: str = "/tmp/workspace", upload: Path | None = None, **sandbox_options: Any
    ) -> RockExecutor:
        """Start a sandbox from ``image`` and own it (the admin comes from ROCK_ADMIN_URL or the default).

        With ``upload``, that local folder is copied to ``workdir/<its name>``, which becomes the workdir.
        """
        from rock.sdk import Sandbox

        sandbox = Sandbox(image=image, **sandbox_options)
        try:
            if upload is not None:
                sandbox.exec(["mkdir", "-p", workdir], timeout=HELPER_TIMEOUT_S)
                sandbox.upload(upload, workdir)
                workdir = posixpath.join(workdir, upload.name)
            return cls(sandbox, workdir=workdir, owns_sandbox=True)
        except BaseException:
            sandbox.close()
            raise

    def _helper(self, command: str) -> CommandResult:
        """iflow's own commands run as fresh processes, so the model's shell state stays untouched."""
        return self._helper_in(self.workdir, command)

    def _helper_in(self, cwd: str, command: str) -> CommandResult:
        from rock.sdk import CommandTimeout

        try:
            observation = self.sandbox.exec(command, timeout=HELPER_TIMEOUT_S, cwd=cwd)
        except CommandTimeout as error:
            raise ExecutorError(f"listing files in the sandbox took over {HELPER_TIMEOUT_S:g} s") from error
        return _result(observation)

    def run(self, command: str, timeout_s: float) -> CommandResult:
        from rock.sdk import CommandTimeout

        try:
            result = _result(self.sandbox.run(command, session=SHELL_SESSION, timeout=timeout_s))
        except CommandTimeout as error:
            partial = error.observation.output if error.observation is not None else ""
            result = CommandResult(partial, None, timed_out=True, duration_s=timeout_s)
        text, truncated = cap_output(result.output, self.output_cap)
        result.output = text
        result.truncated = result.truncated or truncated
        return result

    def resolve(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))

    def read_text(self, path: str) -> str:
        target = self.resolve(path)
        probe = self._helper(
            f"if [ -d {shlex.quote(target)} ]; then echo dir; elif [ -e {shlex.quote(target)} ]; "
            "then echo file; else echo missing; fi"
        )
        kind = probe.output.strip()
        if kind == "dir":
            raise ExecutorError(f"{path} is a directory; use list_directory to see its contents")
        if kind == "missing":
            raise ExecutorError(f"{path} does not exist; check the path with glob or list_directory")
        data = self.sandbox.read_file(target)
        if b"\0" in data[:8192]:
            raise ExecutorError(f"{path} is a binary file ({len(data)} bytes); iflow reads text files only")
        return data.decode("utf-8", "replace")

    def write_text(self, path: str, content: str) -> None:
        target = self.resolve(path)
        made = self._helper(f"mkdir -p {shlex.quote(posixpath.dirname(target))}")
        if made.exit_code != 0:
            raise ExecutorError(f"cannot create the folder for {path}: {made.output.strip()}")
        self.sandbox.write_file(target, content)

    def exists(self, path: str) -> bool:
        return self._helper(f"[ -e {shlex.quote(self.resolve(path))} ]").exit_code == 0

    def list_directory(self, path: str) -> list[DirEntry]:
        target = shlex.quote(self.resolve(path))
        script = (
            f'cd {target} || exit 3; for f in * .[!.]* ..?*; do [ -e "$f" ] || continue; '
            'if [ -d "$f" ]; then printf \'d\\t-\\t%s\\n\' "$f"; '
            'else printf \'f\\t%s\\t%s\\n\' "$(wc -c < "$f")" "$f"; fi; done'
        )
        result = self._helper(script)
        if result.exit_code != 0:
            raise ExecutorError(f"{path} is not a directory; use read_file for files")
        entries = []
        for line in result.output.splitlines():
            kind, size, name = [*line.split("\t", 2), "", ""][:3]
            if kind in ("d", "f") and name:
                entries.append(
                    DirEntry(name, kind == "d", int(size.strip()) if size.strip().isdigit() else None)
                )
        return sorted(entries, key=lambda e: (not e.is_dir, e.name))

    def list_files(self, path: str) -> list[str]:
        target = self.resolve(path)
        prune = " -o ".join(f"-name {shlex.quote(name)}" for name in sorted(SKIPPED_DIRS))
        result = self._helper(f"cd {shlex.quote(target)} && find . \\( {prune} \\) -prune -o -type f -print")
        if result.exit_code != 0:
            raise ExecutorError(f"{path} is not a directory: {result.output.strip()}")
        return sorted(line[2:] for line in result.output.splitlines() if line.startswith("./"))

    def search(self, pattern: str, path: str, include: str | None, max_matches: int) -> list[SearchMatch]:
        try:
            regex = re.compile(pattern)
        except re.error as error:
            raise ExecutorError(
                f"the pattern {pattern!r} is not a valid regular expression: {error}"
            ) from error
        candidates = self.list_files(path)
        if include:
            candidates = match_glob(include if "/" in include else f"**/{include}", candidates)
        base = self.resolve(path)
        matches: list[SearchMatch] = []
        # grep narrows the files in the sandbox; Python's regex decides, as on the local executor.
        for start in range(0, len(candidates), 200):
            batch = " ".join(
                shlex.quote(posixpath.join(base, name)) for name in candidates[start : start + 200]
            )
            result = self._helper(f"grep -nH -E -e {shlex.quote(pattern)} -- {batch}")
            for line in result.output.splitlines():
                file, _, rest = line.partition(":")
                number, _, text = rest.partition(":")
                if number.isdigit() and regex.search(text):
                    relative = posixpath.relpath(file, self.workdir)
                    matches.append(SearchMatch(relative, int(number), text))
                    if len(matches) >= max_matches:
                        return matches
        return matches

    def fingerprints(self, paths: list[str]) -> dict[str, str | None]:
        if not paths:
            return {}
        quoted = " ".join(shlex.quote(self.resolve(path)) for path in paths)
        result = self._helper(
            f'for f in {quoted}; do stat -c \'%Y:%s %n\' "$f" 2>/dev/null || echo "- $f"; done'
        )
        by_target: dict[str, str | None] = {}
        for line in result.output.splitlines():
            stamp, _, target = line.partition(" ")
            by_target[target] = None if stamp == "-" else stamp
        return {path: by_target.get(self.resolve(path)) for path in paths}

    def close(self) -> None:
        if self._owns_sandbox:
            self.sandbox.close()


def _result(observation: Any) -> CommandResult:
    return CommandResult(
        output=observation.output,
        exit_code=observation.exit_code,
        timed_out=bool(observation.timed_out),
        truncated=bool(observation.truncated),
        duration_s=float(observation.duration),
    )
