"""A task set: a folder of generated task folders plus `taskset.json`, the manifest that says what each is.

Writes never leave a half-made task or manifest behind: a task folder is written under a temporary name
and renamed into place, the manifest written to a temporary file and renamed over the old one. Generating
the same (family, seed, knobs) again finds identical files and changes nothing; different files under an
existing task id are refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rome.data.families import get_family
from rome.data.families.base import FileSpec
from rome.data.layout import digest, render

MANIFEST = "taskset.json"
SPLIT = "split.json"
FORMAT = "rome-data-taskset/1"


class TaskSetError(ValueError):
    """A folder that is not a task set, or a write that would overwrite a different task."""


class Entry(BaseModel):
    family: str
    seed: int
    knobs: dict[str, Any]
    difficulty: str
    domain: str
    digest: str


class Manifest(BaseModel):
    format: str = FORMAT
    instances: dict[str, Entry] = Field(default_factory=dict)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(root: Path) -> Manifest:
    path = root / MANIFEST
    if not root.is_dir():
        raise TaskSetError(
            f"{root} is not a folder; make a task set with `rome data generate FAMILY --out {root}`"
        )
    if not path.is_file():
        raise TaskSetError(
            f"{root} is not a task set: it has no {MANIFEST}; "
            "make one with `rome data generate FAMILY --out DIR`"
        )
    try:
        manifest = Manifest.model_validate_json(path.read_text())
    except ValidationError as error:
        raise TaskSetError(
            f"{path} is not a task-set manifest ({error.errors()[0]['msg']}); regenerate it"
        ) from error
    if manifest.format != FORMAT:
        raise TaskSetError(f"{path} has format {manifest.format!r}; this version reads {FORMAT!r}")
    return manifest


def _write_task(files: dict[str, FileSpec], target: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for rel, spec in files.items():
            path = scratch / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(spec.content, encoding="utf-8")
            path.chmod(spec.mode)
        os.rename(scratch, target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


class GenerateReport(BaseModel):
    written: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)


def generate(
    family_name: str, n: int, seed: int, out: Path, knobs: dict[str, Any] | None = None
) -> GenerateReport:
    """Instances with seeds `seed .. seed + n - 1` of one family into the task set `out` (made if needed)."""
    return generate_seeds(family_name, range(seed, seed + n), out, knobs)


def generate_seeds(
    family_name: str, seeds: Iterable[int], out: Path, knobs: dict[str, Any] | None = None
) -> GenerateReport:
    """The instances with these seeds of one family into the task set `out` (made if needed)."""
    family = get_family(family_name)
    family.parse_knobs(knobs or {})  # a bad knob fails before anything is written
    if out.exists() and not out.is_dir():
        raise TaskSetError(f"{out} is a file, not a folder; pick a new or empty folder for --out")
    out.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(out) if (out / MANIFEST).is_file() else Manifest()
    if not (out / MANIFEST).is_file() and any(p for p in out.iterdir() if not p.name.startswith(".")):
        raise TaskSetError(
            f"{out} is a folder with other files and no {MANIFEST}; pick an empty or new --out"
        )
    report = GenerateReport()
    try:
        for instance_seed in seeds:
            instance = family.make(instance_seed, knobs)
            files = render(instance)
            task_digest = digest(files)
            target = out / instance.task_id
            known = manifest.instances.get(instance.task_id)
            if target.exists():
                if known is not None and known.digest == task_digest:
                    report.unchanged.append(instance.task_id)
                    continue
                raise TaskSetError(
                    f"{target} already holds a different task (other knobs?); generate into another --out or "
                    "other seeds"
                )
            _write_task(files, target)
            manifest.instances[instance.task_id] = Entry(
                family=instance.family,
                seed=instance.seed,
                knobs=instance.knobs,
                difficulty=instance.difficulty,
                domain=instance.domain,
                digest=task_digest,
            )
            report.written.append(instance.task_id)
    finally:
        write_atomic(out / MANIFEST, manifest.model_dump_json(indent=2) + "\n")
    return report


class Split(BaseModel):
    eval_fraction: float
    train: list[str]
    eval: list[str]
    train_seeds: list[int]
    eval_seeds: list[int]
    repeats: list[str] = Field(
        default_factory=list,
        description="Instances on the eval side that repeat a train instance's instruction or oracle "
        "commands (or an earlier eval instance's): held out of both sides (evaluating on them tests memory).",
    )


def is_eval_seed(seed: int, eval_fraction: float) -> bool:
    """A seed's side, from its hash alone: every family's instance with this seed lands on the same side."""
    value = int.from_bytes(hashlib.sha256(f"rome-split/{seed}".encode()).digest()[:8], "big") / 2**64
    return value < eval_fraction


def split(root: Path, eval_fraction: float) -> Split:
    """Record which instances are train and which eval in `split.json`: train and eval share no seed, and no
    eval instance repeats a train instance's instruction or oracle commands, or another eval instance's (such
    instances are listed as `repeats` and left out of both)."""
    from rome.data.novelty import SeenTasks

    if not 0 < eval_fraction < 1:
        raise TaskSetError(f"--eval-fraction must be between 0 and 1 (exclusive), not {eval_fraction}")
    manifest = read_manifest(root)
    train, candidates = [], []
    for task_id, entry in sorted(manifest.instances.items()):
        (candidates if is_eval_seed(entry.seed, eval_fraction) else train).append(task_id)

    def made(task_id: str):  # type: ignore[no-untyped-def]
        entry = manifest.instances[task_id]
        return get_family(entry.family).make(entry.seed, entry.knobs)

    seen = SeenTasks()
    for task_id in train:
        seen.add(made(task_id))
    evaluation, repeats = [], []
    for task_id in candidates:
        instance = made(task_id)
        (repeats if seen.repeats(instance) else evaluation).append(task_id)
        seen.add(instance)
    seeds = {task_id: entry.seed for task_id, entry in manifest.instances.items()}
    result = Split(
        eval_fraction=eval_fraction,
        train=train,
        eval=evaluation,
        train_seeds=sorted({seeds[t] for t in train}),
        eval_seeds=sorted({seeds[t] for t in evaluation}),
        repeats=repeats,
    )
    assert not set(result.train_seeds) & set(result.eval_seeds)
    write_atomic(root / SPLIT, result.model_dump_json(indent=2) + "\n")
    return result


def read_split(root: Path) -> Split | None:
    path = root / SPLIT
    return Split.model_validate_json(path.read_text()) if path.is_file() else None


def manifest_json(root: Path) -> dict[str, Any]:
    return json.loads((root / MANIFEST).read_text())
