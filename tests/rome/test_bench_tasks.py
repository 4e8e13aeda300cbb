"""Loader tests for both task layouts, including malformed tasks (no Docker needed)."""

from pathlib import Path

import pytest

from rome.terminal_tasks.task import Task, TaskLoadError, load_task, load_tasks

HARBOR_TOML = """
version = "1.0"
[metadata]
difficulty = "hard"
category = "security"
tags = ["a", "b"]
[agent]
timeout_sec = 321.0
[verifier]
timeout_sec = 45
[environment]
cpus = 2
memory = "2G"
allow_internet = true
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def harbor_task(root: Path, name: str = "h1", toml: str = HARBOR_TOML) -> Path:
    d = root / name
    write(d / "task.toml", toml)
    write(d / "instruction.md", "Do the thing.\n")
    write(d / "environment" / "Dockerfile", "FROM python:3.11-slim\n")
    write(d / "tests" / "test.sh", "echo 1 > /logs/verifier/reward.txt\n")
    write(d / "solution" / "solve.sh", "true\n")
    return d


def tb_task(root: Path, name: str = "t1", yaml_text: str | None = None) -> Path:
    d = root / name
    write(
        d / "task.yaml",
        yaml_text
        or "instruction: |\n  Fix it.\ndifficulty: easy\ncategory: debugging\ntags: [x]\n"
        "max_agent_timeout_sec: 100\nmax_test_timeout_sec: 20\n",
    )
    write(d / "Dockerfile", "FROM debian:bookworm\n")
    write(d / "run-tests.sh", "python3 -m pytest $TEST_DIR/test_outputs.py -rA\n")
    write(d / "solution.sh", "echo fixed\n")
    write(d / "tests" / "test_outputs.py", "def test_x():\n    assert True\n")
    return d


def test_harbor_layout_loads_every_field(tmp_path: Path) -> None:
    task = load_task(harbor_task(tmp_path))
    assert isinstance(task, Task)
    assert (task.layout, task.difficulty, task.category, task.tags) == (
        "harbor",
        "hard",
        "security",
        ["a", "b"],
    )
    assert (task.agent_timeout_sec, task.verifier_timeout_sec) == (321.0, 45.0)
    assert (task.cpus, task.memory_mb, task.allow_internet) == (2.0, 2048, True)
    assert task.instruction == "Do the thing."
    assert task.build_context == tmp_path / "h1" / "environment"
    assert (task.test_command, task.grading) == ("bash /tests/test.sh", "reward-file")
    assert task.solution_command == "bash /solution/solve.sh"


def test_harbor_with_pytest_outputs_and_defaults(tmp_path: Path) -> None:
    d = harbor_task(tmp_path, toml='[metadata]\ncategory = "games"\n[environment]\nmemory_mb = 512\n')
    (d / "tests" / "test.sh").unlink()
    write(d / "tests" / "test_outputs.py", "def test_ok():\n    pass\n")
    (d / "solution" / "solve.sh").unlink()
    task = load_task(d)
    assert isinstance(task, Task)
    assert task.grading == "pytest" and task.test_command.endswith("/tests/test_outputs.py")
    assert (task.agent_timeout_sec, task.memory_mb, task.difficulty) == (600.0, 512, "unknown")
    assert task.solution_command is None


def test_terminal_bench_layout(tmp_path: Path) -> None:
    task = load_task(tb_task(tmp_path))
    assert isinstance(task, Task)
    assert (task.layout, task.category, task.difficulty) == ("terminal-bench", "debugging", "easy")
    assert (task.agent_timeout_sec, task.verifier_timeout_sec) == (100.0, 20.0)
    assert task.build_context == tmp_path / "t1"
    assert task.test_command == "bash /tests/run-tests.sh" and task.grading == "pytest"
    assert [p.name for p in task.extra_test_files] == ["run-tests.sh"]
    assert task.solution_command == "bash /solution/solution.sh"


@pytest.mark.parametrize(
    ("mutate", "file", "field", "words"),
    [
        (lambda d: write(d / "task.toml", "[agent\ntimeout_sec = 1"), "task.toml", None, "not valid TOML"),
        (
            lambda d: write(d / "task.toml", "[agent]\ntimeout_sec = -5\n"),
            "task.toml",
            "[agent].timeout_sec",
            "greater",
        ),
        (
            lambda d: write(d / "task.toml", '[verifier]\ntimeout_sec = "soon"\n'),
            "task.toml",
            "[verifier].timeout_sec",
            "number",
        ),
        (
            lambda d: write(d / "task.toml", '[environment]\nmemory = "lots"\n'),
            "task.toml",
            "[environment].memory",
            "size",
        ),
        (lambda d: (d / "instruction.md").unlink(), "instruction.md", None, "missing"),
        (lambda d: write(d / "instruction.md", "  \n"), "instruction.md", None, "empty"),
        (lambda d: (d / "environment" / "Dockerfile").unlink(), "environment/Dockerfile", None, "missing"),
        (lambda d: (d / "tests" / "test.sh").unlink(), "tests/", None, "neither test.sh"),
    ],
)
def test_malformed_harbor_task_names_file_and_field(tmp_path, mutate, file, field, words) -> None:
    d = harbor_task(tmp_path)
    mutate(d)
    error = load_task(d)
    assert isinstance(error, TaskLoadError)
    assert (error.file, error.field) == (file, field)
    assert words in error.message
    assert error.task_dir.name in str(error) and file in str(error)


@pytest.mark.parametrize(
    ("yaml_text", "field", "words"),
    [
        ("difficulty: easy\n", "instruction", "required"),
        ("instruction: x\nmax_agent_timeout_sec: nope\n", "max_agent_timeout_sec", "number"),
        ("- just\n- a list\n", None, "mapping"),
        ("instruction: [unclosed\n", None, "not valid YAML"),
    ],
)
def test_malformed_terminal_bench_task(tmp_path, yaml_text, field, words) -> None:
    error = load_task(tb_task(tmp_path, yaml_text=yaml_text))
    assert isinstance(error, TaskLoadError)
    assert (error.file, error.field) == ("task.yaml", field)
    assert words in error.message


def test_terminal_bench_without_run_tests_runs_pytest_on_tests(tmp_path: Path) -> None:
    d = tb_task(tmp_path)
    (d / "run-tests.sh").unlink()
    task = load_task(d)
    assert isinstance(task, Task)
    assert (task.test_command, task.grading, task.extra_test_files) == (
        "pytest -rA /tests/test_outputs.py",
        "pytest",
        [],
    )
    (d / "tests" / "test_outputs.py").rename(d / "tests" / "test_other.py")
    assert load_task(d).test_command == "pytest -rA /tests"  # type: ignore[union-attr]
    (d / "tests" / "test_other.py").unlink()
    (d / "tests").rmdir()
    error = load_task(d)
    assert isinstance(error, TaskLoadError) and error.file == "run-tests.sh"


def test_a_malformed_task_does_not_stop_the_others(tmp_path: Path) -> None:
    harbor_task(tmp_path, "good-harbor")
    tb_task(tmp_path, "good-tb")
    bad = harbor_task(tmp_path, "bad")
    write(bad / "task.toml", "[agent]\ntimeout_sec = 0\n")
    (tmp_path / "not-a-task").mkdir()
    suite = load_tasks(tmp_path)
    assert [t.id for t in suite.tasks] == ["good-harbor", "good-tb"]
    assert [(e.task_dir.name, e.field) for e in suite.errors] == [("bad", "[agent].timeout_sec")]


def test_task_id_filter_and_unknown_ids(tmp_path: Path) -> None:
    harbor_task(tmp_path, "a")
    harbor_task(tmp_path, "b")
    assert [t.id for t in load_tasks(tmp_path, ["b"]).tasks] == ["b"]
    with pytest.raises(KeyError, match="zzz"):
        load_tasks(tmp_path, ["zzz"])
    assert [t.id for t in load_tasks(tmp_path / "a").tasks] == ["a"]
    with pytest.raises(FileNotFoundError):
        load_tasks(tmp_path / "missing")


def test_prebuilt_image_instead_of_dockerfile(tmp_path: Path) -> None:
    d = harbor_task(tmp_path, toml='[environment]\ndocker_image = "python:3.11-slim"\n')
    (d / "environment" / "Dockerfile").unlink()
    task = load_task(d)
    assert isinstance(task, Task)
    assert (task.image, task.dockerfile, task.build_context) == ("python:3.11-slim", None, None)


def test_compose_only_environment_is_reported(tmp_path: Path) -> None:
    d = harbor_task(tmp_path)
    (d / "environment" / "Dockerfile").unlink()
    write(d / "environment" / "docker-compose.yaml", "services: {}\n")
    error = load_task(d)
    assert isinstance(error, TaskLoadError)
    assert error.file == "environment/docker-compose.yaml" and "not supported" in error.message


def test_terminal_bench_keystroke_solution_becomes_a_script(tmp_path: Path) -> None:
    d = tb_task(tmp_path)
    (d / "solution.sh").unlink()
    write(d / "solution.yaml", "- command: cd /app\n  block: true\n- command: echo done > out.txt\n")
    task = load_task(d)
    assert isinstance(task, Task) and task.solution_command == "bash /solution/solution.sh"
    assert task.solution_files[0].read_text() == "cd /app\necho done > out.txt\n"
    write(d / "solution.yaml", "just text\n")
    error = load_task(d)
    assert isinstance(error, TaskLoadError) and error.file == "solution.yaml"
