"""sysadmin: file modes, moving and copying files, archiving files by size, a permission policy over a tree.

Every instance draws from its seed what the agent has to read: the file or folder, the operation, the mode,
the size limit and extension, and the destination.
"""

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
elif kind in ("moved", "copied"):
    source, target = EXPECTED["source"], EXPECTED["target"]
    if not os.path.isfile(target):
        fail(f"{target} does not exist")
    if read(target) != EXPECTED["content"]:
        fail(f"{target} does not hold the content of {source}")
    if kind == "moved" and os.path.exists(source):
        fail(f"{source} should have been moved, but it is still there")
    if kind == "copied" and (not os.path.isfile(source) or read(source) != EXPECTED["content"]):
        fail(f"{source} should stay where it is, unchanged")
elif kind == "archive":
    for path in EXPECTED["moved"]:
        if os.path.exists(path):
            fail(f"{path} matches the rule and should have been moved")
    target = EXPECTED["target"]
    archived = sorted(os.listdir(target)) if os.path.isdir(target) else None
    if archived is None:
        fail(f"{target} does not exist")
    if archived != EXPECTED["archived"]:
        fail(f"{target} holds {archived}, expected {EXPECTED['archived']}")
else:
    for path, mode in EXPECTED["modes"].items():
        if not os.path.isfile(path):
            fail(f"{path} is missing")
        got = stat.S_IMODE(os.stat(path).st_mode)
        if got != int(mode, 8):
            fail(f"{path} has mode {got:o}, the policy says {mode}")
"""

FOLDERS = ("/app", "/app/bin", "/app/scripts", "/app/tools", "/app/ops")
VERBS = ("deploy", "backup", "rotate", "sync", "restart", "cleanup", "report", "migrate")
# Never 644: the file starts with that mode, so doing nothing must not pass.
MODES = ("600", "640", "700", "711", "750", "755")
DATA_FOLDERS = ("/app/data", "/app/uploads", "/app/cache", "/app/spool")
ARCHIVES = ("/app/archive", "/app/old", "/app/big", "/app/cold")
DATA_EXTENSIONS = ("dat", "bin", "log", "csv")
POLICY_ROOTS = ("/app/etc", "/app/config", "/app/srv")
# Policy kinds: the extensions one kind may use, and the modes it may be given.
POLICY = {
    "script": (("sh", "bash"), ("755", "750", "700")),
    "config": (("conf", "cfg", "ini"), ("644", "640", "600")),
    "secret": (("key", "pem"), ("600", "400")),
}


class FileOpsKnobs(Knobs):
    files: int | None = Field(None, ge=1, le=40, description="files in the tree (levels 2-3)")


class FileOps(Family):
    name = "file-ops"
    domain = "sysadmin"
    summary = "make executable, set a mode, move or copy a file; archive files by size; a permission policy"
    knobs = FileOpsKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, FileOpsKnobs)
        return knobs.model_copy(update={"files": knobs.files or rng.randint(3, 4 * (knobs.level or 1) + 2)})

    def build(self, rng: random.Random, knobs: FileOpsKnobs) -> Instance:  # type: ignore[override]
        assert knobs.files is not None
        if knobs.level == 1:
            return self._one_file(rng)
        if knobs.level == 2:
            return self._archive(rng, knobs.files)
        return self._policy(rng, knobs.files)

    def _instance(self, **fields: object) -> Instance:
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            check=CHECK,
            domain=self.domain,
            **fields,  # type: ignore[arg-type]
        )

    def _one_file(self, rng: random.Random) -> Instance:
        name = f"{rng.choice(VERBS)}-{rng.choice(HOSTS)}.sh"
        path = f"{rng.choice(FOLDERS)}/{name}"
        content = f"#!/bin/sh\necho '{sentence(rng, 3)}'\n"
        files = {path: FileSpec(content)}
        kind = rng.choice(("exec", "mode", "moved", "copied"))
        if kind == "exec":
            return self._instance(
                instruction=f"Running `{path}` fails with 'Permission denied'. Make it executable.",
                files=files,
                steps=[Step(f"chmod +x {path}", "make the script executable")],
                expected={"kind": "exec", "path": path, "intact": [path]},
                tags=["chmod"],
                variant=kind,
                mistakes=[Mistake(0, f"chmod +x {path.removesuffix('.sh')}", "make it executable")],
            )
        if kind == "mode":
            mode = rng.choice(MODES)
            return self._instance(
                instruction=f"Set the permissions of `{path}` to exactly {mode} (octal).",
                files=files,
                steps=[Step(f"chmod {mode} {path}", f"set mode {mode}")],
                expected={"kind": "policy", "modes": {path: mode}, "intact": [path]},
                tags=["chmod", "permissions"],
                variant=kind,
                mistakes=[Mistake(0, f"chmod {mode} {path.removesuffix('.sh')}", f"set mode {mode}")],
            )
        folder = rng.choice(
            [f for f in (*FOLDERS, "/app/archive", "/app/old") if f != path.rsplit("/", 1)[0]]
        )
        if kind == "moved":
            target = f"{folder}/{name}"
            return self._instance(
                instruction=f"Move `{path}` into the folder `{folder}` (create it if needed), keeping its "
                "name.",
                files=files,
                steps=[Step(f"mkdir -p {folder} && mv {path} {folder}/", f"move it to {folder}")],
                expected={"kind": "moved", "source": path, "target": target, "content": content},
                tags=["mv"],
                variant=kind,
                mistakes=[Mistake(0, f"mv {path.removesuffix('.sh')} {folder}/", "move it")],
            )
        target = f"{folder}/{rng.choice(WORDS)}-{name}"
        return self._instance(
            instruction=f"Make a copy of `{path}` at `{target}` (create the folder if needed); keep the "
            "original where it is.",
            files=files,
            steps=[Step(f"mkdir -p {folder} && cp {path} {target}", f"copy it to {target}")],
            expected={
                "kind": "copied",
                "source": path,
                "target": target,
                "content": content,
                "intact": [path],
            },
            tags=["cp"],
            variant=kind,
            mistakes=[Mistake(0, f"cp {path.removesuffix('.sh')} {target}", "copy it")],
        )

    def _archive(self, rng: random.Random, count: int) -> Instance:
        limit_kb = rng.choice((4, 8, 12, 16, 24, 32))
        source, target = rng.choice(DATA_FOLDERS), rng.choice(ARCHIVES)
        ext = rng.choice(DATA_EXTENSIONS)
        files: dict[str, FileSpec] = {}
        moved, kept = [], []
        for index in range(count):
            big = rng.random() < 0.4 or index == 0
            # Some files of another extension: large ones too, which must stay.
            own = index == 0 or rng.random() < 0.75
            size = rng.randint(2 * limit_kb, 3 * limit_kb) if big else rng.randint(1, limit_kb // 2)
            suffix = ext if own else rng.choice([e for e in DATA_EXTENSIONS if e != ext])
            path = f"{source}/{rng.choice(WORDS)}-{index}.{suffix}"
            line = (sentence(rng, 6) + "\n") * 64
            files[path] = FileSpec((line * (size * 1024 // len(line) + 1))[: size * 1024])
            (moved if big and own else kept).append(path)
        return self._instance(
            instruction=(
                f"Move every `.{ext}` file in `{source}` that is larger than {limit_kb} KiB into a new "
                f"folder `{target}` (keep the file names). Other files stay where they are, unchanged."
            ),
            files=files,
            steps=[
                Step(f"ls -la {source}", "see the sizes"),
                Step(
                    f"mkdir -p {target} && find {source} -type f -name '*.{ext}' -size +{limit_kb}k "
                    f"-exec mv {{}} {target}/ \\;",
                    "move the large files",
                ),
                Step(f"ls {target}", "check"),
            ],
            expected={
                "kind": "archive",
                "target": target,
                "moved": sorted(moved),
                "archived": sorted(p.rsplit("/", 1)[1] for p in moved),
                "intact": sorted(kept),
            },
            tags=["find", "mv", "sizes"],
            mistakes=[
                Mistake(
                    1,
                    f"mv $(find {source} -type f -size +{limit_kb}k) {target}/",
                    "move the large files",
                )
            ],
        )

    def _policy(self, rng: random.Random, count: int) -> Instance:
        root = rng.choice(POLICY_ROOTS)
        rules = {kind: (rng.choice(exts), rng.choice(modes)) for kind, (exts, modes) in POLICY.items()}
        files: dict[str, FileSpec] = {}
        modes: dict[str, str] = {}
        for index in range(max(3, count)):
            ext, mode = list(rules.values())[index % 3]
            sub = rng.choice(("", "", f"{rng.choice(HOSTS)}/"))
            path = f"{root}/{sub}{rng.choice(WORDS)}-{index}.{ext}"
            wrong = rng.choice([m for m in ("400", "600", "644", "666", "755", "777") if m != mode])
            files[path] = FileSpec(f"# {sentence(rng, 4)}\n", int(wrong, 8))
            modes[path] = mode
        steps = [Step(f"find {root} -type f -exec ls -l {{}} +", "see the current modes")]
        steps += [
            Step(f"find {root} -type f -name '*.{ext}' -exec chmod {mode} {{}} +", f"{ext} files to {mode}")
            for ext, mode in rules.values()
        ]
        policy = ", ".join(f"`*.{ext}` files {mode}" for ext, mode in rules.values())
        return self._instance(
            instruction=f"Apply this permission policy to every file under `{root}` (subfolders included): "
            f"{policy}.",
            files=files,
            steps=steps,
            expected={"kind": "policy", "modes": modes, "intact": sorted(modes)},
            tags=["chmod", "find", "permissions"],
            mistakes=[Mistake(3, f"chmod 600 {root}/*.keys", "lock down the keys")],
        )
