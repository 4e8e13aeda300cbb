"""A terminal task as an environment: bash actions in one session, graded by the task's own tests after
`finish`. Real Docker and a real local fleet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rome.terminal_tasks.env import TaskEnvError, TerminalTaskEnv
from rome.terminal_tasks.task import load_task

SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"


def test_an_id_that_is_not_a_task_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskEnvError, match="is not a folder; pass terminal:<task dir>"):
        TerminalTaskEnv(f"terminal:{tmp_path / 'missing'}", admin_url=None)
    with pytest.raises(TaskEnvError, match="is not a valid task"):
        TerminalTaskEnv(f"terminal:{tmp_path}", admin_url=None)
    with pytest.raises(TaskEnvError, match="max_steps must be at least 1"):
        TerminalTaskEnv(f"terminal:{SUITE / 'trapezoid-integral'}", admin_url=None, max_steps=0)


@pytest.fixture(scope="module")
def admin_url() -> Iterator[str]:
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    # The fleet builds the task's image from the suite's folder: one of its build roots.
    with LocalFleet(slots=2, admin_args=["--build-context-root", str(SUITE)]) as fleet:
        yield fleet.url


@pytest.mark.docker
@pytest.mark.slow
def test_terminal_task_is_graded_by_its_tests(admin_url: str) -> None:
    task = SUITE / "trapezoid-integral"
    solution = (task / "solution" / "solve.sh").read_text()
    with TerminalTaskEnv(f"terminal:{task}", admin_url, max_steps=5) as env:
        instruction, info = env.reset()
        assert instruction == load_task(task).instruction
        assert info["task_id"] == "trapezoid-integral" and info["workdir"] == "/app"
        observation, reward, terminated, truncated, _ = env.step("cd /tmp && pwd")
        assert observation.splitlines()[-2:] == ["/tmp", "Exit code: 0"] and not terminated
        observation, _, _, _, _ = env.step("pwd")
        assert observation.startswith("/tmp")  # the session keeps its cwd
        observation, reward, terminated, truncated, _ = env.step(solution)
        assert observation.endswith("Exit code: 0") and reward == 0.0
        observation, reward, terminated, truncated, info = env.step("finish")
        assert (reward, terminated, truncated, observation) == (1.0, True, False, "tests passed"), info
        with pytest.raises(TaskEnvError, match="call reset"):
            env.step("ls")

        env.reset()  # a fresh sandbox: the solution's output is gone
        observation, reward, terminated, truncated, info = env.step("ls /app")
        assert "integral.txt" not in observation
        for _ in range(4):
            observation, reward, terminated, truncated, info = env.step("true")
            if truncated:
                break
        assert (reward, terminated, truncated, info["steps"]) == (0.0, False, True, 5)
