"""Greedy evaluations of fixed weights, kept by content and reused.

The base model's and the SFT model's evaluations in `roll train` play the same episodes with the same weights
whenever the run's evaluation settings, tasks and code are the same: in the next seed of a learning table
(every seed evaluates the same base model), in the GRPO twin of an IPA run (the same SFT model), in a rerun of
the quickstart. Each is about 3 minutes of the main job on a 2-core machine, so their played episodes are
stored beside the runs (`<output root>/.evaluations/<key>.json`) and a later evaluation with the same key
takes them instead of playing again; the record says so (`reused`).

The key hashes everything that decides a greedy evaluation's episodes: the weights' files, the run's
env/eval/engine/rollout/resources settings, the episodes asked for, the content of the tasks they play (the
files the env kind's `eval_sources` names), and ALE's own source with the versions of the libraries that
compute or grade (torch, transformers, gem-llm). Only greedy evaluations (temperature 0) are kept: a sampled
one is one draw, and a second run should make its own. An evaluation with an episode that failed to run is
not kept (an infrastructure failure is no measurement). `eval.reuse: false` always plays.

Not in the key: the contents of the base images a task's Dockerfile names (built locally under fixed names);
after rebuilding them, delete the store folder or set `eval.reuse: false`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from roll.models.registry import resolve_model_path
from roll.rollout.episode import EpisodeTask
from roll.types import Trajectory

STORE = ".evaluations"
FORMAT = 1  # bump when the stored file or what the key hashes changes
SOURCE_PACKAGES = ("roll", "rock", "iflow", "rome")
LIBRARIES = ("torch", "transformers", "gem-llm")
SETTINGS = ("env", "eval", "engines", "rollout", "resources")


class StoredEvaluation(BaseModel):
    key: str
    run: str
    label: str
    results: list[Trajectory]


def files_digest(paths: Iterable[Path], root: Path | None = None) -> str:
    """SHA-256 over every file under `paths` (folders walked in name order): names relative to `root` (or to
    each path's parent) and contents. Caches (`__pycache__`) and dot-folders (a task set's `.trials`) are
    skipped."""
    digest = hashlib.sha256()
    for top in paths:
        base = root if root is not None else top.parent
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            relative = path.relative_to(base)
            if any(part == "__pycache__" or part.startswith(".") for part in relative.parts):
                continue
            digest.update(str(relative).encode() + b"\0")
            with path.open("rb") as handle:
                while block := handle.read(1 << 24):
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()


@cache
def code_digest() -> str:
    """ALE's own source (the four packages' files) and the versions of the libraries that compute, grade."""
    folders = []
    for package in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(package)
        locations = spec.submodule_search_locations if spec is not None else None
        folders.extend(Path(location) for location in locations or [])
    versions = []
    for library in LIBRARIES:
        try:
            versions.append(f"{library}=={importlib.metadata.version(library)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{library} absent")
    return hashlib.sha256((files_digest(folders) + "\n" + "\n".join(versions)).encode()).hexdigest()


def evaluation_key(
    model: str, settings: dict[str, Any], tasks: list[EpisodeTask], sources: list[Path]
) -> str:
    """The key of a greedy evaluation of `model`'s weights (a builtin id or a model folder) playing `tasks`,
    whose content is in `sources` (the env kind's `eval_sources`)."""
    folder = resolve_model_path(model)
    chosen = copy.deepcopy({name: settings[name] for name in SETTINGS})
    # Only sampling draws from the engine's seed; a greedy evaluation takes the argmax, so every seed plays it
    # alike (and a learning table's seeds, which differ in it, share their base model's evaluation).
    chosen["engines"].get("engine", {}).pop("seed", None)
    parts = {
        "format": FORMAT,
        "weights": files_digest([folder], root=folder),
        "settings": chosen,
        "episodes": [dataclasses.asdict(task) for task in tasks],
        "tasks": files_digest(sources),
        "code": code_digest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class EvaluationStore:
    """Stored evaluations under `root` (a runs folder's `.evaluations`), one JSON file per key."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str) -> StoredEvaluation | None:
        """The stored evaluation of `key`, or None; a file that does not parse counts as absent."""
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            stored = StoredEvaluation.model_validate_json(path.read_bytes())
        except ValueError:
            return None
        return stored if stored.key == key else None

    def save(self, key: str, run: str, label: str, results: list[Trajectory | None]) -> bool:
        """Keep an evaluation whose episodes all ran (atomically: a reader sees the old file or the new);
        returns whether it was kept."""
        if not results or any(result is None for result in results):
            return False
        played = [result for result in results if result is not None]
        stored = StoredEvaluation(key=key, run=run, label=label, results=played)
        self.root.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as file:
                file.write(stored.model_dump_json())
            os.replace(temporary, self._path(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return True
