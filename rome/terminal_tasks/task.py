"""Task loader for the Harbor / Terminal-Bench-Pro layout and the older Terminal-Bench layout.

Both layouts load into one `Task` model. A task that cannot be loaded becomes a `TaskLoadError` naming the
file and the field at fault; loading goes on with the other tasks.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rome.terminal_tasks.harbor_fields import Artifact, Healthcheck, read_artifacts, resolve_env
from rome.terminal_tasks.network import NetworkNeeds, read_needs
from rome.terminal_tasks.steps import StepError, StepStrategy, TaskStep, load_steps

Layout = Literal["harbor", "terminal-bench"]
Grading = Literal["reward-file", "pytest"]

TESTS_MOUNT = "/tests"
SOLUTION_MOUNT = "/solution"
VERIFIER_LOGS = "/logs/verifier"
AGENT_LOGS = "/logs/agent"


class Task(BaseModel):
    """One task, whichever layout it came from. Paths are on the host."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: Path
    layout: Layout
    instruction: str
    difficulty: str = "unknown"
    category: str = "uncategorized"
    tags: list[str] = Field(default_factory=list)
    agent_timeout_sec: float
    verifier_timeout_sec: float
    build_timeout_sec: float = 600.0
    cpus: float = 1.0
    memory_mb: int = 2048
    allow_internet: bool = False
    dockerfile: Path | None = None
    build_context: Path | None = None
    # A prebuilt image (Harbor's [environment].docker_image) instead of a Dockerfile.
    image: str | None = None
    tests_dir: Path
    # Files copied next to the tests in /tests (the old layout keeps run-tests.sh beside tests/).
    extra_test_files: list[Path] = Field(default_factory=list)
    test_command: str
    grading: Grading
    solution_files: list[Path] = Field(default_factory=list)
    solution_command: str | None = None
    network: NetworkNeeds = Field(default_factory=NetworkNeeds)
    # Harbor multi-step: the steps run in order in one sandbox; `tests_dir` then holds the shared helpers.
    steps: list[TaskStep] = Field(default_factory=list)
    step_reward_strategy: StepStrategy = "mean"
    # A step's own tests, uploaded over `tests_dir` (set only on the per-step view `for_step` returns).
    step_tests_dir: Path | None = None
    # Harbor's [environment].workdir: where commands start and a step's workdir/ files go (None: the image's).
    workdir: str | None = None
    # [environment.env]: variables of every agent command; [verifier.env]: of the tests (a step's replace it).
    agent_env: dict[str, str] = Field(default_factory=dict)
    verifier_env: dict[str, str] = Field(default_factory=dict)
    # [environment.healthcheck] (a step's view: its [steps.healthcheck]), polled before the agent starts.
    healthcheck: Healthcheck | None = None
    # Top-level `artifacts` (a step's view: the step's), copied out after the tests into the trial folder.
    artifacts: list[Artifact] = Field(default_factory=list)
    # A step's `workdir/` folder (set only on the per-step view).
    step_workdir_dir: Path | None = None

    def for_step(self, step: TaskStep) -> Task:
        """The task as one of its steps sees it: the step's instruction, oracle, verifier and timeouts."""
        return self.model_copy(
            update={
                "instruction": step.instruction,
                "agent_timeout_sec": step.agent_timeout_sec,
                "verifier_timeout_sec": step.verifier_timeout_sec,
                "test_command": step.test_command,
                "grading": step.grading,
                "solution_files": step.solution_files,
                "solution_command": step.solution_command,
                "step_tests_dir": step.tests_dir,
                "verifier_env": step.verifier_env,
                "healthcheck": step.healthcheck,
                "artifacts": step.artifacts,
                "step_workdir_dir": step.workdir_dir,
                "steps": [],
            }
        )


BUILD_MEMORY_MB = 2048
"""The least memory a task's build gets (its sandbox may ask for less than pip or apt need to install)."""


class TaskImageError(RuntimeError):
    """A task's image did not build or resolve on the fleet; the message carries the tail of the build log."""


def base_images(task: Task) -> list[str]:
    """The images a task builds on: its Dockerfile's FROM lines (not its own stages), or its image."""
    if task.dockerfile is None:
        return [task.image] if task.image else []
    stages: set[str] = set()
    bases: list[str] = []
    for line in task.dockerfile.read_text(errors="replace").splitlines():
        words = [w for w in line.split() if not w.startswith("--")]
        if len(words) < 2 or words[0].upper() != "FROM":
            continue
        if words[1].lower() not in stages and "$" not in words[1]:
            bases.append(words[1])
        if len(words) >= 4 and words[2].upper() == "AS":
            stages.add(words[3].lower())
    return bases


def image_repository(task: Task) -> str:
    """`rome-bench/<task id>`; the fleet tags it with the hash of the build context, so two task folders with
    one id but other files (two task sets, or a regenerated task) never share an image."""
    name = "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "-" for ch in task.id.lower()
    ).strip("-_.")
    return f"rome-bench/{name or 'task'}"


def image_build(task: Task, network: str) -> dict[str, Any]:
    """How the task's environment folder is built (the build fields of ROCK's image request): its Dockerfile
    under its repository name, with `network` for the RUN steps and the task's CPU and memory, but no less
    memory than BUILD_MEMORY_MB. Only for a task that has a Dockerfile."""
    assert task.build_context is not None and task.dockerfile is not None
    return {
        "build_context": str(task.build_context.resolve()),
        "dockerfile": task.dockerfile.name,
        "repository": image_repository(task),
        "network": network,
        "cpus": task.cpus,
        "memory": f"{max(task.memory_mb, BUILD_MEMORY_MB)}m",
    }


class TaskLoadError(BaseModel):
    """Why one task directory could not be loaded: the file and the field at fault."""

    task_dir: Path
    file: str
    field: str | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.task_dir.name}/{self.file}" + (f" [{self.field}]" if self.field else "")
        return f"{where}: {self.message}"


class LoadedSuite(BaseModel):
    tasks: list[Task]
    errors: list[TaskLoadError]


class _Malformed(Exception):
    def __init__(self, file: str, field: str | None, message: str) -> None:
        super().__init__(message)
        self.file, self.field, self.message = file, field, message


# ---- Harbor / Terminal-Bench-Pro: task.toml -------------------------------------------------------------


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _HarborMetadata(_Section):
    difficulty: str = "unknown"
    category: str = "uncategorized"
    tags: list[str] = Field(default_factory=list)


class _Timeout(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)


class _Verifier(_Timeout):
    env: dict[str, Any] | None = None


class _HarborEnvironment(_Section):
    build_timeout_sec: float = Field(default=600.0, gt=0)
    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    # Older Harbor spelling: "2G", "512M".
    memory: str | None = None
    allow_internet: bool = False
    docker_image: str | None = None
    workdir: str | None = Field(default=None, pattern=r"^/")
    env: dict[str, Any] | None = None
    healthcheck: Healthcheck | None = None

    @field_validator("memory")
    @classmethod
    def _memory_has_unit(cls, value: str | None) -> str | None:
        if value is not None:
            _parse_memory(value)
        return value


class _HarborToml(_Section):
    multi_step_reward_strategy: StepStrategy = "mean"
    metadata: _HarborMetadata = Field(default_factory=_HarborMetadata)
    agent: _Timeout = Field(default_factory=_Timeout)
    verifier: _Verifier = Field(default_factory=_Verifier)
    environment: _HarborEnvironment = Field(default_factory=_HarborEnvironment)


def _parse_memory(text: str) -> int:
    """'2G' / '512M' / '2048' (MB) -> megabytes."""
    units = {"g": 1024, "m": 1, "k": 1 / 1024}
    raw = text.strip().lower().removesuffix("b")
    unit = raw[-1:] if raw[-1:] in units else "m"
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        return max(1, int(float(number) * units[unit]))
    except ValueError as exc:
        raise ValueError(f"memory {text!r} is not a size such as '2G' or '512M'") from exc


def _field_of(error: ValidationError) -> tuple[str, str]:
    first = error.errors()[0]
    loc = [str(p) for p in first["loc"]]
    field = (f"[{loc[0]}]." + ".".join(loc[1:])) if len(loc) > 1 else ".".join(loc)
    return field, first["msg"]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise _Malformed(path.name, None, f"is not valid TOML ({exc}); fix the syntax") from exc


def _required_file(task_dir: Path, rel: str, what: str) -> Path:
    path = task_dir / rel
    if not path.is_file():
        raise _Malformed(rel, None, f"is missing; a task needs {what}")
    return path


def _instruction(path: Path) -> str:
    text = path.read_text().strip()
    if not text:
        raise _Malformed(path.name, None, "is empty; write the task for the agent in it")
    return text


def test_command_of(dirs: list[Path]) -> tuple[str, Grading] | None:
    """The verifier of the first folder that has one: test.sh (reward file), else test_outputs.py (pytest)."""
    for folder in dirs:
        if (folder / "test.sh").is_file():
            return f"bash {TESTS_MOUNT}/test.sh", "reward-file"
    for folder in dirs:
        if (folder / "test_outputs.py").is_file():
            return f"pytest -rA {TESTS_MOUNT}/test_outputs.py", "pytest"
    return None


def _load_harbor(task_dir: Path) -> Task:
    raw = _read_toml(task_dir / "task.toml")
    try:
        config = _HarborToml.model_validate(raw)
        network = read_needs(raw)
        agent_env = resolve_env(config.environment.env, "[environment].env")
        verifier_env = resolve_env(config.verifier.env, "[verifier].env")
        artifacts = read_artifacts(raw.get("artifacts"), "artifacts")
    except ValidationError as exc:
        field, msg = _field_of(exc)
        raise _Malformed("task.toml", field, msg) from exc
    except ValueError as exc:
        raise _Malformed("task.toml", None, str(exc)) from exc
    steps: list[TaskStep] = []
    if "steps" in raw:
        try:
            steps = load_steps(
                task_dir,
                raw,
                config.agent.timeout_sec,
                config.verifier.timeout_sec,
                test_command_of,
                verifier_env,
            )
        except StepError as exc:
            raise _Malformed(exc.file, exc.field, exc.message) from exc
        instruction = "\n\n".join(f"[{s.name}] {s.instruction}" for s in steps)
    else:
        instruction = _instruction(_required_file(task_dir, "instruction.md", "an instruction for the agent"))
    env = config.environment
    dockerfile = task_dir / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        if env.docker_image is None and (task_dir / "environment" / "docker-compose.yaml").is_file():
            raise _Malformed(
                "environment/docker-compose.yaml", None, "multi-container tasks are not supported"
            )
        if env.docker_image is None:
            raise _Malformed(
                "environment/Dockerfile",
                None,
                "is missing; add it or set [environment].docker_image in task.toml",
            )
    tests_dir = task_dir / "tests"
    found = test_command_of([tests_dir]) if not steps else (steps[0].test_command, steps[0].grading)
    if found is None:
        raise _Malformed("tests/", None, "has neither test.sh nor test_outputs.py; add the verifier")
    test_command, grading = found
    solve = task_dir / "solution" / "solve.sh"
    memory_mb = env.memory_mb or (_parse_memory(env.memory) if env.memory else 2048)
    return Task(
        id=task_dir.name,
        path=task_dir,
        layout="harbor",
        instruction=instruction,
        difficulty=config.metadata.difficulty,
        category=config.metadata.category,
        tags=config.metadata.tags,
        agent_timeout_sec=config.agent.timeout_sec,
        verifier_timeout_sec=config.verifier.timeout_sec,
        build_timeout_sec=env.build_timeout_sec,
        cpus=env.cpus,
        memory_mb=memory_mb,
        allow_internet=env.allow_internet,
        dockerfile=dockerfile if dockerfile.is_file() else None,
        build_context=dockerfile.parent if dockerfile.is_file() else None,
        image=None if dockerfile.is_file() else env.docker_image,
        tests_dir=tests_dir,
        test_command=test_command,
        grading=grading,
        solution_files=sorted(p for p in (task_dir / "solution").glob("*") if p.is_file()),
        solution_command=f"bash {SOLUTION_MOUNT}/solve.sh" if solve.is_file() else None,
        network=network,
        steps=steps,
        step_reward_strategy=config.multi_step_reward_strategy,
        workdir=env.workdir,
        agent_env=agent_env,
        verifier_env=verifier_env,
        healthcheck=env.healthcheck,
        artifacts=artifacts,
    )


# ---- Terminal-Bench (older): task.yaml ------------------------------------------------------------------


class _TerminalBenchYaml(_Section):
    instruction: str = Field(min_length=1)
    difficulty: str = "unknown"
    category: str = "uncategorized"
    tags: list[str] = Field(default_factory=list)
    max_agent_timeout_sec: float = Field(default=360.0, gt=0)
    max_test_timeout_sec: float = Field(default=60.0, gt=0)


def _load_terminal_bench(task_dir: Path) -> Task:
    try:
        raw = yaml.safe_load((task_dir / "task.yaml").read_text())
    except yaml.YAMLError as exc:
        raise _Malformed("task.yaml", None, f"is not valid YAML ({exc}); fix the syntax") from exc
    if not isinstance(raw, dict):
        raise _Malformed("task.yaml", None, "must be a mapping with at least an 'instruction' key")
    try:
        config = _TerminalBenchYaml.model_validate(raw)
    except ValidationError as exc:
        field, msg = _field_of(exc)
        raise _Malformed("task.yaml", field, msg) from exc
    dockerfile = _required_file(task_dir, "Dockerfile", "a Dockerfile for its environment")
    run_tests = task_dir / "run-tests.sh"
    tests_dir = task_dir / "tests"
    if run_tests.is_file():
        test_command, extra = f"bash {TESTS_MOUNT}/run-tests.sh", [run_tests]
    elif tests_dir.is_dir():
        # Terminal-Bench's default when a task has no run-tests.sh: pytest over its tests.
        target = "test_outputs.py" if (tests_dir / "test_outputs.py").is_file() else ""
        test_command, extra = f"pytest -rA {TESTS_MOUNT}/{target}".rstrip("/"), []
    else:
        raise _Malformed("run-tests.sh", None, "is missing and there is no tests/ folder to run pytest on")
    solution = task_dir / "solution.sh"
    if not solution.is_file() and (task_dir / "solution.yaml").is_file():
        solution = _script_from_solution_yaml(task_dir / "solution.yaml")
    return Task(
        id=task_dir.name,
        path=task_dir,
        layout="terminal-bench",
        instruction=config.instruction.strip(),
        difficulty=config.difficulty,
        category=config.category,
        tags=config.tags,
        agent_timeout_sec=config.max_agent_timeout_sec,
        verifier_timeout_sec=config.max_test_timeout_sec,
        dockerfile=dockerfile,
        build_context=task_dir,
        tests_dir=tests_dir,
        extra_test_files=extra,
        test_command=test_command,
        grading="pytest",
        network=NetworkNeeds(),
        solution_files=[solution] if solution.is_file() else [],
        solution_command=f"bash {SOLUTION_MOUNT}/solution.sh" if solution.is_file() else None,
    )


def _script_from_solution_yaml(path: Path) -> Path:
    """Terminal-Bench's keystroke solution (a list of {command: ...}) as a shell script in a cache folder."""
    try:
        steps = yaml.safe_load(path.read_text())
        commands = [str(step["command"]) for step in steps]
    except (yaml.YAMLError, TypeError, KeyError) as exc:
        raise _Malformed("solution.yaml", None, f"is not a list of {{command: ...}} steps ({exc})") from exc
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    script = Path(tempfile.gettempdir()) / f"rome-bench-solutions-{os.getuid()}" / digest / "solution.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("\n".join(commands) + "\n")
    return script


# ---- discovery ------------------------------------------------------------------------------------------


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "task.toml").is_file() or (path / "task.yaml").is_file())


def load_task(task_dir: Path) -> Task | TaskLoadError:
    """Load one task directory; a malformed task comes back as a `TaskLoadError`, never raised."""
    task_dir = task_dir.resolve()
    try:
        if (task_dir / "task.toml").is_file():
            return _load_harbor(task_dir)
        if (task_dir / "task.yaml").is_file():
            return _load_terminal_bench(task_dir)
        raise _Malformed(
            "task.toml", None, "is missing (nor is there a task.yaml); is this a task directory?"
        )
    except _Malformed as exc:
        return TaskLoadError(task_dir=task_dir, file=exc.file, field=exc.field, message=exc.message)
    except (OSError, UnicodeDecodeError) as exc:
        return TaskLoadError(task_dir=task_dir, file=".", message=f"could not be read: {exc}")


def load_tasks(root: Path, task_ids: list[str] | None = None) -> LoadedSuite:
    """Load every task under `root` (or `root` itself when it is one task), optionally only `task_ids`."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"task directory {root} does not exist; pass --tasks with a folder of tasks")
    dirs = [root] if is_task_dir(root) else sorted(p for p in root.iterdir() if is_task_dir(p))
    if task_ids:
        wanted = set(task_ids)
        unknown = wanted - {d.name for d in dirs}
        if unknown:
            raise KeyError(f"unknown task id(s) {sorted(unknown)} under {root}; see `ls {root}`")
        dirs = [d for d in dirs if d.name in wanted]
    tasks: list[Task] = []
    errors: list[TaskLoadError] = []
    for task_dir in dirs:
        loaded = load_task(task_dir)
        (errors if isinstance(loaded, TaskLoadError) else tasks).append(loaded)  # type: ignore[arg-type]
    return LoadedSuite(tasks=tasks, errors=errors)
