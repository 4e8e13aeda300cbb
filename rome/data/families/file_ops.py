"""sysadmin: file modes, moving files by size, a permission policy over a config tree."""

from __future__ import annotations

import random

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import HOSTS, WORDS, sentence

CHECK = """
import os, stat
kind = EXPECTED["kind"]
if kind == "exec":
    path = EXPECTED["path"]
    if not os.path.isfile(path):
        fail(f"{path} is missing")
    if not os.stat(path).st_mode & stat.S_IXUSR:
        fail(f"{path} is not executable by its owner")
elif kind == "archive":
    for path in EXPECTED["moved"]:
        if os.path.exists(path):
            fail(f"{path} is larger than the limit and should have been moved")
    archived = sorted(os.listdir("/app/archive")) if os.path.isdir("/app/archive") else None
    if archived is None:
        fail("/app/archive does not exist")
    if archived != EXPECTED["archived"]:
        fail(f"/app/archive holds {archived}, expected {EXPECTED['archived']}")
else:
    for path, mode in EXPECTED["modes"].items():
        if not os.path.isfile(path):
            fail(f"{path} is missing")
        got = stat.S_IMODE(os.stat(path).st_mode)
        if got != int(mode, 8):
            fail(f"{path} has mode {got:o}, the policy says {mode}")
"""


class FileOpsKnobs(Knobs):
    files: int | None = Field(None, ge=1, le=40, description="files in the tree (levels 2-3)")


class FileOps(Family):
    name = "file-ops"
    domain = "sysadmin"
    summary = "make a script executable, archive large files, apply a permission policy"
    knobs = FileOpsKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, FileOpsKnobs)
        return knobs.model_copy(update={"files": knobs.files or rng.randint(3, 4 * (knobs.level or 1) + 2)})

    def build(self, rng: random.Random, knobs: FileOpsKnobs) -> Instance:  # type: ignore[override]
        assert knobs.files is not None
        if knobs.level == 1:
            name = f"{rng.choice(('deploy', 'backup', 'rotate', 'sync'))}-{rng.choice(HOSTS)}.sh"
            path = f"/app/{name}"
            script = f"#!/bin/sh\necho '{sentence(rng, 3)}'\n"
            return Instance(
                family=self.name,
                seed=0,
                knobs={},
                instruction=f"Running `{path}` fails with 'Permission denied'. Make it executable.",
                files={path: FileSpec(script)},
                steps=[Step(f"chmod +x {path}", "make the script executable")],
                check=CHECK,
                expected={"kind": "exec", "path": path, "intact": [path]},
                domain=self.domain,
                tags=["chmod"],
                mistakes=[Mistake(0, f"chmod +x /app/{name.removesuffix('.sh')}", "make it executable")],
            )
        if knobs.level == 2:
            return self._archive(rng, knobs.files)
        return self._policy(rng, knobs.files)

    def _archive(self, rng: random.Random, count: int) -> Instance:
        limit_kb = rng.choice((8, 16, 32))
        files: dict[str, FileSpec] = {}
        moved, kept = [], []
        for index in range(count):
            big = rng.random() < 0.4 or index == 0
            size = rng.randint(2 * limit_kb, 3 * limit_kb) if big else rng.randint(1, limit_kb // 2)
            path = f"/app/data/{rng.choice(WORDS)}-{index}.dat"
            line = (sentence(rng, 6) + "\n") * 64
            files[path] = FileSpec((line * (size * 1024 // len(line) + 1))[: size * 1024])
            (moved if big else kept).append(path)
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=(
                "Move every file in `/app/data` that is larger "
                f"than {limit_kb} KiB into a new folder "
                f"`/app/archive` (keep the file names). Smaller files stay where they are, unchanged."
            ),
            files=files,
            steps=[
                Step("ls -la /app/data", "see the sizes"),
                Step(
                    f"mkdir -p /app/archive && find /app/data -type f -size +{limit_kb}k "
                    "-exec mv {} /app/archive/ \\;",
                    "move the large files",
                ),
                Step("ls /app/archive", "check"),
            ],
            check=CHECK,
            expected={
                "kind": "archive",
                "moved": sorted(moved),
                "archived": sorted(p.rsplit("/", 1)[1] for p in moved),
                "intact": sorted(kept),
            },
            domain=self.domain,
            tags=["find", "mv", "sizes"],
            mistakes=[
                Mistake(
                    1,
                    f"mv $(find /app/data -type f -size +{limit_kb}k) /app/archive/",
                    "move the large files",
                )
            ],
        )

    def _policy(self, rng: random.Random, count: int) -> Instance:
        kinds = {"sh": "755", "conf": "644", "key": "600"}
        files: dict[str, FileSpec] = {}
        modes: dict[str, str] = {}
        for index in range(max(3, count)):
            ext = ("sh", "conf", "key")[index % 3]
            sub = rng.choice(("", "", f"{rng.choice(HOSTS)}/"))
            path = f"/app/etc/{sub}{rng.choice(WORDS)}-{index}.{ext}"
            wrong = rng.choice([m for m in ("600", "644", "666", "755", "777") if m != kinds[ext]])
            files[path] = FileSpec(f"# {sentence(rng, 4)}\n", int(wrong, 8))
            modes[path] = kinds[ext]
        steps = [Step("find /app/etc -type f -exec ls -l {} +", "see the current modes")]
        steps += [
            Step(f"find /app/etc -type f -name '*.{ext}' -exec chmod {mode} {{}} +", f"{ext} files to {mode}")
            for ext, mode in kinds.items()
        ]
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction="Apply this permission policy to every file under `/app/etc` (subfolders included): "
            "`*.sh` scripts 755, `*.conf` files 644, `*.key` files 600.",
            files=files,
            steps=steps,
            check=CHECK,
            expected={"kind": "policy", "modes": modes, "intact": sorted(modes)},
            domain=self.domain,
            tags=["chmod", "find", "permissions"],
            mistakes=[Mistake(3, "chmod 600 /app/etc/*.keys", "lock down the keys")],
        )
