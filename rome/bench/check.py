"""`rome-bench check DIR`: what each task is and needs, and whether it can run here, before running anything.

Per task: its layout, each base image and what it maps to here, what it fetches from the network while its
image builds and while it is graded, the features it uses, and a verdict under the current network policy.
The network needs are read from the task's files (Dockerfile RUN lines, test scripts): a heuristic that
names the line it found, not a guarantee.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from rome.terminal_tasks.network import grant
from rome.terminal_tasks.task import Task, base_images

_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)
# (what it needs, pattern): package installs the cache can serve, and downloads it cannot.
_PACKAGES = [
    ("pip", re.compile(r"\bpip3?\s+install\b(?![^\n]*--no-index)")),
    ("uv", re.compile(r"\buv\s+(?:pip\s+install|add|sync|tool\s+install)\b|\buvx\b")),
    ("apt", re.compile(r"\bapt(?:-get)?\s+(?:-\S+\s+)*install\b")),
]
_DOWNLOADS = [
    ("uv installer", re.compile(r"https?://\S*/uv/\S*install\.sh|uv-installer|install\.sh\s*\|\s*sh")),
    ("download", re.compile(r"\b(?:curl|wget)\b[^\n]*https?://")),
    ("git clone", re.compile(r"\bgit\s+clone\b")),
    ("npm", re.compile(r"\bnpm\s+(?:install|i|ci)\b")),
]


class TaskCheck(BaseModel):
    task_id: str
    layout: str
    images: dict[str, str] = Field(default_factory=dict)
    build_needs: list[str] = Field(default_factory=list)
    test_needs: list[str] = Field(default_factory=list)
    features: list[str] = Field(default_factory=list)
    policy: str = "none"
    notes: list[str] = Field(default_factory=list)
    runnable: bool = True
    why: str = "runs here"


def _needs(text: str) -> list[str]:
    found = [f"packages ({name})" for name, pattern in _PACKAGES if pattern.search(text)]
    for line in text.splitlines():
        kinds = [name for name, pattern in _DOWNLOADS if pattern.search(line)]
        if "uv installer" in kinds:  # the uv installer's curl is not also a plain download
            kinds = [k for k in kinds if k != "download"]
        found += [f"internet ({k})" for k in kinds if f"internet ({k})" not in found]
    return found


def _test_texts(task: Task) -> str:
    folders = [task.tests_dir, *(s.tests_dir for s in task.steps)]
    files = [p for d in folders if d is not None and d.is_dir() for p in sorted(d.iterdir()) if p.is_file()]
    return "\n".join(p.read_text(errors="replace") for p in [*files, *task.extra_test_files])


def _images(task: Task, resolve: object) -> dict[str, str]:
    if task.dockerfile is None:
        return {task.image or "?": resolve(task.image or "")}  # type: ignore[operator]
    names = _FROM.findall(task.dockerfile.read_text(errors="replace"))
    stages = {m.lower() for m in re.findall(r"\bAS\s+(\S+)", task.dockerfile.read_text(), re.IGNORECASE)}
    return {n: resolve(n) for n in names if n.lower() not in stages and n.lower() != "scratch"}  # type: ignore[operator]


def _features(task: Task, tests: str) -> list[str]:
    features = []
    if task.steps:
        features.append(f"multi-step ({len(task.steps)} steps, reward {task.step_reward_strategy})")
        if any(s.min_reward is not None for s in task.steps):
            features.append("early stop (min_reward)")
    steps = task.steps
    if task.verifier_env or any(s.verifier_env for s in steps):
        features.append("verifier env" + (" (per step)" if any(s.verifier_env for s in steps) else ""))
    if task.agent_env:
        features.append("agent env ([environment].env)")
    checks = ["environment"] * (task.healthcheck is not None) + [s.name for s in steps if s.healthcheck]
    if checks:
        features.append(f"healthcheck ({', '.join(checks)})")
    if task.artifacts or any(s.artifacts for s in steps):
        features.append(f"artifacts ({len(task.artifacts) + sum(len(s.artifacts) for s in steps)})")
    if any(s.workdir_dir for s in steps):
        features.append("step workdir/ uploads")
    if task.layout == "terminal-bench" and not task.extra_test_files:
        features.append("TB1 default verifier (pytest on tests/)")
    if task.image is not None:
        features.append(f"prebuilt image {task.image}")
    if "--ctrf" in tests:
        features.append("CTRF report (pytest-json-ctrf, bundled)")
    if re.search(r"\buvx?\b", tests):
        features.append("uv/uvx (bundled)")
    features += [f"network key {k}" for k in task.network.keys]
    return features


def check_task(task: Task, resolve: object, allow_internet: bool, package_cache: bool) -> TaskCheck:
    """What `task` needs and whether it can run here; `resolve(name)` maps an image name to a local one (or
    raises ValueError saying why not)."""
    tests = _test_texts(task)
    build = task.dockerfile.read_text(errors="replace") if task.dockerfile else ""
    layout = task.layout + (" multi-step" if task.steps else "")
    result = TaskCheck(task_id=task.id, layout=layout, features=_features(task, tests))
    result.build_needs = _needs("\n".join(line for line in build.splitlines() if "RUN" in line.upper()))
    result.test_needs = _needs(tests)
    policy, note = grant(task.network.most, allow_internet, package_cache)
    result.policy, result.notes = policy, [note] if note else []
    needs = task.network
    if needs.agent != needs.verifier:
        result.features.append(f"per-phase network (agent {needs.agent}, verifier {needs.verifier})")
    result.notes += image_notes(task)
    problems = []
    try:
        result.images = _images(task, resolve)
    except ValueError as exc:
        problems.append(f"base image: {exc}")
    if any(n.startswith("packages") for n in result.build_needs) and not package_cache:
        problems.append("its build installs packages and there is no package cache (`rock packages seed`)")
    internet = [n for n in result.build_needs if n.startswith("internet")]
    if internet and not allow_internet:
        problems.append(f"its build downloads from the internet ({', '.join(internet)})")
    wants_packages = any(n.startswith("packages") for n in result.test_needs)
    if wants_packages and policy == "none":
        problems.append("its tests install packages and this sandbox would have no network")
    downloads = [n for n in result.test_needs if n.startswith("internet") and "uv installer" not in n]
    if downloads and policy != "full":
        result.notes.append(
            f"its tests download ({', '.join(downloads)}): they pass only if they tolerate a failed download"
        )
    if problems:
        result.runnable, result.why = False, "; ".join(problems)
    return result


def image_resolver() -> object:
    """`resolve(name)`: the local image a base image maps to, ValueError when it has none."""
    from rock.images.aliases import load_aliases
    from rock.images.build import docker_client, image_exists

    table, client = load_aliases(), docker_client()

    def resolve(name: str) -> str:
        target = table.lookup(name) or name
        if not image_exists(client, target):
            raise ValueError(f"{name} maps to {target}, which is not built here (`rock image bootstrap`)")
        return target

    return resolve


def seeded_cache() -> Path | None:
    from rock.packages.cache import default_folder

    return default_folder() if (default_folder() / "pypi").is_dir() else None


def image_notes(task: Task) -> list[str]:
    """A note for each base image whose local stand-in (this host's alias table) differs from it: another
    Python, Debian for Ubuntu."""
    from rock.images.aliases import difference, load_aliases
    from rock.images.errors import ImageConfigError

    try:
        table = load_aliases()
    except ImageConfigError:
        return []
    return [note for name in base_images(task) if (note := difference(name, table)) is not None]
