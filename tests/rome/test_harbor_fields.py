"""Harbor task.toml fields without Docker: loading the fixture tasks, env references, artifacts, min_reward,
healthcheck polling (real shell commands on this host, a stepped clock), and per-phase network policies."""

import subprocess
import time
from pathlib import Path

import pytest

from rome.terminal_tasks.harbor_fields import Artifact, Healthcheck, read_min_reward, resolve_env
from rome.terminal_tasks.healthcheck import wait_healthy
from rome.terminal_tasks.network import NetworkNeeds, phase_policies
from rome.terminal_tasks.sandbox import CommandResult
from rome.terminal_tasks.task import Task, TaskLoadError, load_task

FIXTURES = Path(__file__).parent / "harbor_tasks"


def test_the_multi_step_fixture_loads_every_field() -> None:
    task = load_task(FIXTURES / "harbor-steps-features")
    assert isinstance(task, Task), task
    assert task.workdir == "/app" and task.verifier_env == {"GREETING_WORD": "Hello"}
    assert [a.target for a in task.artifacts] == ["app/final.txt"]
    scaffold, greet = task.steps
    assert scaffold.min_reward == {"reward": 1.0}
    # A non-empty step env replaces the task's; a step without one inherits it.
    assert scaffold.verifier_env == {"EXPECTED_NAME": "Ada"}
    assert greet.verifier_env == {"GREETING_WORD": "Hello"}
    assert scaffold.healthcheck is not None and scaffold.healthcheck.retries == 3
    assert scaffold.healthcheck.interval_sec == 0.2 and scaffold.healthcheck.start_period_sec == 0
    assert [(a.source, a.target, a.exclude) for a in scaffold.artifacts] == [
        ("/app/config.txt", "app/config.txt", ()),
        ("/app/out", "scaffold-out", ("*.tmp",)),
    ]
    assert scaffold.workdir_dir == task.path / "steps" / "scaffold" / "workdir" and greet.workdir_dir is None
    view = task.for_step(scaffold)
    assert (view.verifier_env, view.healthcheck, view.step_workdir_dir) == (
        {"EXPECTED_NAME": "Ada"},
        scaffold.healthcheck,
        scaffold.workdir_dir,
    )
    assert task.network.agent == "none"


def test_the_single_step_fixture_loads_every_field(monkeypatch) -> None:
    monkeypatch.delenv("ROME_BENCH_FIXTURE_UNSET", raising=False)
    task = load_task(FIXTURES / "harbor-environment-features")
    assert isinstance(task, Task), task
    assert task.workdir == "/srv/work" and task.agent_env == {"TARGET": "/srv/work/answer.txt"}
    assert task.verifier_env == {"EXPECTED_ANSWER": "42"}
    assert task.healthcheck == Healthcheck(
        command=task.healthcheck.command, start_period_sec=60, start_interval_sec=0.2, retries=1
    )
    assert [a.target for a in task.artifacts] == ["report"]


def test_env_references_read_the_environment_or_their_default() -> None:
    table = {"A": "${X}", "B": "${Y:-fallback}", "C": "plain ${X}", "D": 3}
    assert resolve_env(table, "[verifier].env", {"X": "x"}) == {
        "A": "x",
        "B": "fallback",
        "C": "plain ${X}",
        "D": "3",
    }
    with pytest.raises(ValueError, match=r"needs \$X in the environment"):
        resolve_env({"A": "${X}"}, "[verifier].env", {})


def test_a_missing_reference_is_a_load_error_naming_the_key(tmp_path: Path) -> None:
    d = tmp_path / "t"
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm\n")
    (d / "tests" / "test.sh").write_text("true\n")
    (d / "instruction.md").write_text("x\n")
    (d / "task.toml").write_text('[verifier]\nenv = { KEY = "${ROME_BENCH_SURELY_UNSET_1}" }\n')
    error = load_task(d)
    assert isinstance(error, TaskLoadError) and "[verifier].env.KEY" in error.message


@pytest.mark.parametrize(
    "entry",
    ["relative/path", {"source": "/a", "destination": "../up"}, {"source": "/a", "destination": "/abs"}],
)
def test_artifacts_refuse_paths_that_leave_their_folders(entry) -> None:
    with pytest.raises(ValueError):
        Artifact.model_validate(entry)


def test_min_reward_is_a_number_or_a_table_of_metrics() -> None:
    assert read_min_reward(0.5, "x") == {"reward": 0.5}
    assert read_min_reward({"accuracy": 0.9, "reward": 1}, "x") == {"accuracy": 0.9, "reward": 1.0}
    for bad in (True, {}, "1.0", {"a": "b"}):
        with pytest.raises(ValueError):
            read_min_reward(bad, "x")


class HostShell:
    """Runs probes as real shell commands on this host (the probe's logic is what is under test)."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        self.runs += 1
        t0 = time.monotonic()
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        return CommandResult(
            output=done.stdout + done.stderr,
            exit_code=done.returncode,
            duration_sec=time.monotonic() - t0,
            timed_out=False,
        )


class SteppedClock:
    """Time moves only when the poller sleeps: the schedule is checked without waiting for it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def counting_probe(tmp_path: Path, passes_from: int) -> str:
    counter = tmp_path / "probes"
    return f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; [ $n -ge {passes_from} ]"


def test_a_check_passing_within_its_retries_is_healthy(tmp_path: Path) -> None:
    clock, shell = SteppedClock(), HostShell()
    check = Healthcheck(command=counting_probe(tmp_path, 2), interval_sec=5, retries=3)
    report = wait_healthy(shell, check, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert (report.healthy, report.probes, report.failures, clock.sleeps) == (True, 3, 2, [5, 5])


def test_retries_consecutive_failures_make_it_unhealthy(tmp_path: Path) -> None:
    clock, shell = SteppedClock(), HostShell()
    check = Healthcheck(command=counting_probe(tmp_path, 5), interval_sec=2, retries=3)
    report = wait_healthy(shell, check, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert (report.healthy, report.probes, report.failures) == (False, 3, 3)
    assert "unhealthy after 3" in report.describe("environment")


def test_failures_in_the_start_period_do_not_count(tmp_path: Path) -> None:
    clock, shell = SteppedClock(), HostShell()
    # Start period 10 s probed every 1 s: the 4 failures in it are free; after it, interval 3 s, retries 2.
    check = Healthcheck(
        command=counting_probe(tmp_path, 100),
        start_period_sec=10,
        start_interval_sec=1,
        interval_sec=3,
        retries=2,
    )
    report = wait_healthy(shell, check, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert not report.healthy and report.failures == 2
    assert clock.sleeps == [1.0] * 10 + [3.0]
    assert report.probes == 12


def test_a_probe_that_times_out_is_a_failure(tmp_path: Path) -> None:
    class TimedOut(HostShell):
        def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
            return CommandResult(output="", exit_code=None, duration_sec=timeout, timed_out=True)

    clock = SteppedClock()
    report = wait_healthy(TimedOut(), Healthcheck(command="true", retries=1), clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert not report.healthy


def test_each_phase_gets_its_own_policy_when_the_sandbox_can_switch() -> None:
    needs = NetworkNeeds(agent="none", verifier="full")
    # The sandbox was granted packages for the larger wish (no --allow-internet): the agent gets less.
    assert phase_policies(needs, "packages", can_switch=True) == {"agent": "none", "verifier": "packages"}
    assert phase_policies(needs, "packages", can_switch=False) == {
        "agent": "packages",
        "verifier": "packages",
    }
    assert phase_policies(NetworkNeeds(agent="allowlist", verifier="none"), "allowlist", True) == {
        "agent": "allowlist",
        "verifier": "none",
    }


@pytest.mark.parametrize(
    ("name", "local", "differs"),
    [
        ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "ale/python:3.11", "not Python 3.13"),
        ("ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624", "ale/debian:bookworm", "not Ubuntu 24.04"),
        ("python:3.13-slim", "ale/python:3.11", "not the Python version it names"),
        ("ubuntu:24.04", "ale/debian:bookworm", "not Ubuntu"),
        ("python:3.11-slim", "ale/python:3.11", None),
        ("debian:bookworm-slim", "ale/debian:bookworm", None),
    ],
)
def test_terminal_bench_bases_map_to_local_images_with_a_note(name, local, differs) -> None:
    from rock.images.aliases import ImageAliases, difference

    assert ImageAliases().lookup(name) == local
    note = difference(name)
    assert (note is None) if differs is None else (note is not None and differs in note)
    # The user's own entry is what they chose: no note.
    assert difference(name, ImageAliases(aliases={name: "my/image:1"})) is None


def test_a_trial_notes_each_base_that_differs(tmp_path: Path) -> None:
    from rome.bench.check import image_notes
    from rome.terminal_tasks.task import base_images

    d = tmp_path / "t"
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "environment" / "Dockerfile").write_text(
        "FROM --platform=linux/amd64 ghcr.io/laude-institute/t-bench/python-3-13:20250620 AS build\n"
        "FROM build\nFROM python:3.11-slim\n"
    )
    (d / "tests" / "test.sh").write_text("true\n")
    (d / "instruction.md").write_text("x\n")
    (d / "task.toml").write_text("")
    task = load_task(d)
    assert isinstance(task, Task)
    assert base_images(task) == ["ghcr.io/laude-institute/t-bench/python-3-13:20250620", "python:3.11-slim"]
    (note,) = image_notes(task)
    assert note.startswith("ghcr.io/laude-institute/t-bench/python-3-13:20250620 is built as Python 3.11")
