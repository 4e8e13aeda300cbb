"""Copying a trial's artifacts out of its sandbox into the trial folder.

What is collected: the paths a task (or step) lists in `artifacts`, and whatever the agent or the tests left
in /logs/artifacts (Harbor's folder for them). Only the four operations of `TrialSandbox` are used: the path
is archived with tar inside the sandbox and read back base64-encoded in slices that fit one command's
output, so the same code serves every sandbox kind. Excludes are tar's `--exclude` globs, relative to the
source. A path that does not exist is skipped with a note; the total is capped so one artifact cannot fill
the host.
"""

from __future__ import annotations

import base64
import io
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from rome.terminal_tasks.harbor_fields import Artifact
from rome.terminal_tasks.sandbox import TrialSandbox

ARTIFACTS_MOUNT = "/logs/artifacts"
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
# Raw bytes per read: their base64 (4/3 as long) stays under the sandbox's 256 KiB output cap.
SLICE_BYTES = 150_000
_ARCHIVE = "/tmp/.rome-bench-artifact.tar"


def _archive_command(artifact: Artifact) -> str:
    source = PurePosixPath(artifact.source)
    excludes = " ".join(f"--exclude={shlex.quote(p)}" for p in artifact.exclude)
    parent, name = shlex.quote(str(source.parent)), shlex.quote(source.name or ".")
    return (
        f"test -e {shlex.quote(str(source))} || {{ echo missing; exit 3; }}; "
        f"tar -C {parent} {excludes} -cf {_ARCHIVE} {name} && wc -c < {_ARCHIVE}"
    )


def _read_archive(sandbox: TrialSandbox, size: int) -> bytes:
    data = bytearray()
    for index in range((size + SLICE_BYTES - 1) // SLICE_BYTES):
        run = sandbox.run(
            f"dd if={_ARCHIVE} bs={SLICE_BYTES} skip={index} count=1 2>/dev/null | base64 | tr -d '\\n'",
            timeout=60,
        )
        if run.exit_code != 0:
            raise OSError(f"reading the archive back failed: {run.output.strip()[-200:]}")
        data += base64.b64decode(run.output.strip())
    return bytes(data)


def _place(archive: bytes, source_name: str, target: Path) -> None:
    """Unpack the archive (one top entry named `source_name`) so that entry lands at `target`."""
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(scratch, filter="data")
        unpacked = Path(scratch) / source_name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and unpacked.is_dir():
            shutil.copytree(unpacked, target, dirs_exist_ok=True)
        else:
            shutil.move(str(unpacked), target)


def collect(sandbox: TrialSandbox, artifacts: list[Artifact], into: Path) -> list[str]:
    """Copy each artifact (and /logs/artifacts) under `into`; returns notes on what could not be copied."""
    notes: list[str] = []
    budget = MAX_ARTIFACT_BYTES
    conventional = Artifact(source=ARTIFACTS_MOUNT)
    wanted = [(a, into / a.target) for a in artifacts] + [(conventional, into)]
    for artifact, target in wanted:
        default = artifact is conventional
        run = sandbox.run(_archive_command(artifact), timeout=120)
        if run.exit_code == 3 and "missing" in run.output:
            if not default:
                notes.append(f"artifact {artifact.source} does not exist in the sandbox; skipped")
            continue
        try:
            size = int(run.output.strip().splitlines()[-1]) if run.exit_code == 0 else -1
        except (ValueError, IndexError):
            size = -1
        if size < 0:
            notes.append(
                f"artifact {artifact.source} could not be archived (needs tar): {run.output[-200:]!r}"
            )
            continue
        if size > budget:
            notes.append(f"artifact {artifact.source} is {size} bytes, over the {budget} bytes left; skipped")
            continue
        budget -= size
        try:
            _place(_read_archive(sandbox, size), PurePosixPath(artifact.source).name, target)
        except (OSError, ValueError, tarfile.TarError) as exc:
            notes.append(f"artifact {artifact.source} could not be copied: {exc}")
    sandbox.run(f"rm -f {_ARCHIVE}", timeout=30)
    return notes
