"""Harbor multi-step tasks and network keys: loading, reward roll-up, policy grants (no Docker needed)."""

from pathlib import Path

import pytest

from rome.terminal_tasks.network import NetworkNeeds, grant, read_needs
from rome.terminal_tasks.steps import TaskStep, aggregate
from rome.terminal_tasks.task import Task, TaskLoadError, load_task

STEPS_TOML = """
schema_version = "1.1"
multi_step_reward_strategy = "{strategy}"
[agent]
timeout_sec = 50
[verifier]
timeout_sec = 40
[[steps]]
name = "one"
min_reward = 1.0
[steps.agent]
timeout_sec = 7
[[steps]]
name = "two"
contributes_to_mean = false
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def steps_task(root: Path, strategy: str = "mean") -> Path:
    d = root / "ms"
    write(d / "task.toml", STEPS_TOML.format(strategy=strategy))
    write(d / "environment" / "Dockerfile", "FROM debian:bookworm\n")
    write(d / "tests" / "helpers.sh", "ok() { echo 1 > /logs/verifier/reward.txt; }\n")
    write(d / "steps" / "one" / "instruction.md", "Make a.\n")
    write(d / "steps" / "one" / "tests" / "test.sh", "source /tests/helpers.sh; ok\n")
    write(d / "steps" / "one" / "solution" / "solve.sh", "touch /a\n")
    write(d / "steps" / "two" / "instruction.md", "Make b.\n")
    write(d / "steps" / "two" / "tests" / "test_outputs.py", "def test_b():\n    pass\n")
    return d


def test_steps_load_in_order_with_their_own_parts(tmp_path: Path) -> None:
    task = load_task(steps_task(tmp_path))
    assert isinstance(task, Task)
    one, two = task.steps
    assert (one.name, one.instruction, one.test_command, one.grading) == (
        "one",
        "Make a.",
        "bash /tests/test.sh",
        "reward-file",
    )
    assert (one.agent_timeout_sec, one.verifier_timeout_sec, one.min_reward) == (7, 40, {"reward": 1.0})
    assert one.solution_command == "bash /solution/solve.sh" and one.solution_files[0].name == "solve.sh"
    assert (two.test_command, two.grading, two.solution_command, two.contributes_to_mean) == (
        "pytest -rA /tests/test_outputs.py",
        "pytest",
        None,
        False,
    )
    view = task.for_step(two)
    assert (view.instruction, view.agent_timeout_sec, view.steps, view.step_tests_dir) == (
        "Make b.",
        50,
        [],
        two.tests_dir,
    )
    assert view.tests_dir == task.path / "tests"  # the shared helpers go in first


def test_a_step_may_use_the_shared_test_sh(tmp_path: Path) -> None:
    d = steps_task(tmp_path)
    (d / "steps" / "two" / "tests" / "test_outputs.py").unlink()
    write(d / "tests" / "test.sh", "echo 1 > /logs/verifier/reward.txt\n")
    task = load_task(d)
    assert isinstance(task, Task) and task.steps[1].test_command == "bash /tests/test.sh"
    assert task.steps[1].tests_dir == d / "steps" / "two" / "tests"


@pytest.mark.parametrize(
    ("mutate", "file", "field", "words"),
    [
        (
            lambda d: (d / "steps" / "one" / "instruction.md").unlink(),
            "steps/one/instruction.md",
            None,
            "missing",
        ),
        (
            lambda d: (d / "steps" / "two" / "tests" / "test_outputs.py").unlink(),
            "steps/two/tests/",
            None,
            "no test",
        ),
        (
            lambda d: write(d / "task.toml", "[[steps]]\nname = 3\n"),
            "task.toml",
            "[[steps]][0].name",
            "string",
        ),
        (lambda d: write(d / "task.toml", "steps = []\n"), "task.toml", "steps", "non-empty"),
        (
            lambda d: write(d / "task.toml", 'multi_step_reward_strategy = "max"\n[[steps]]\nname = "one"\n'),
            "task.toml",
            "multi_step_reward_strategy",
            "mean",
        ),
    ],
)
def test_malformed_steps_name_file_and_field(tmp_path, mutate, file, field, words) -> None:
    d = steps_task(tmp_path)
    mutate(d)
    error = load_task(d)
    assert isinstance(error, TaskLoadError), error
    assert (error.file, error.field) == (file, field)
    assert words in error.message


def _step(name: str, counts: bool = True) -> TaskStep:
    return TaskStep(
        name=name,
        instruction="x",
        tests_dir=None,
        test_command="true",
        grading="reward-file",
        agent_timeout_sec=1,
        verifier_timeout_sec=1,
        contributes_to_mean=counts,
    )


def test_reward_roll_up_as_harbor_defines_it() -> None:
    steps = [_step("a"), _step("b"), _step("c", counts=False)]
    assert aggregate([1.0, 0.5, 0.0], steps, "mean") == 0.75
    assert aggregate([1.0, None, None], steps, "mean") == 0.5  # an early stop: the steps not run count 0
    assert aggregate([1.0, 1.0, 0.25], steps, "final") == 0.25
    assert aggregate([1.0, None, None], steps, "final") == 0.0


@pytest.mark.parametrize(
    ("toml", "agent", "verifier", "keys"),
    [
        ("", "packages", "packages", ()),
        ("[environment]\nallow_internet = false\n", "none", "none", ("[environment].allow_internet",)),
        ("[environment]\nallow_internet = true\n", "full", "full", ("[environment].allow_internet",)),
        (
            '[environment]\nnetwork_mode = "no-network"\n[verifier]\nnetwork_mode = "public"\n',
            "none",
            "full",
            ("[environment].network_mode", "[verifier].network_mode"),
        ),
        (
            '[agent.network]\nmode = "allowlist"\nallowed_hosts = ["pypi.org"]\n',
            "allowlist",
            "packages",
            ("[agent.network].mode",),
        ),
        (
            '[environment.network]\nnetwork_mode = "none"\n[verifier.network]\nallow_internet = true\n',
            "none",
            "full",
            ("[environment.network].network_mode", "[verifier.network].allow_internet"),
        ),
    ],
)
def test_every_network_key_maps_to_a_policy(toml, agent, verifier, keys) -> None:
    import tomllib

    needs = read_needs(tomllib.loads(toml))
    assert (needs.agent, needs.verifier, needs.keys) == (agent, verifier, keys)


def test_an_unknown_network_mode_is_a_load_error(tmp_path: Path) -> None:
    d = steps_task(tmp_path)
    write(d / "task.toml", '[environment]\nnetwork_mode = "wifi"\n[[steps]]\nname = "one"\n')
    error = load_task(d)
    assert isinstance(error, TaskLoadError) and "wifi" in error.message and "no-network" in error.message


def test_grants_full_only_with_the_operators_consent() -> None:
    assert grant("full", allow_internet=True, package_cache=True) == ("full", None)
    policy, note = grant("full", allow_internet=False, package_cache=True)
    assert policy == "packages" and "--allow-internet" in (note or "")
    policy, note = grant("packages", allow_internet=False, package_cache=False)
    assert policy == "none" and "--package-cache" in (note or "")
    assert grant("none", allow_internet=True, package_cache=True) == ("none", None)
    assert NetworkNeeds().agent == "packages"
