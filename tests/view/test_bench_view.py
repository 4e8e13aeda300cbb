"""rome-bench trials as ATIF (trials/<task>__<attempt>/agent/trajectory.json) and `rome-bench view` in a
real browser: pass@k charts, verdict classes, a trial's cell opening its transcript."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import atif
import pytest
from typer.testing import CliRunner

from rome.bench.atif import trajectory_path
from rome.bench.cli import app
from tests.view.bench_fixture import write_bench_run
from tests.view.browser import chromium, console_errors, keep_screenshot
from tests.view.test_roll_view_browser import wait_for

if TYPE_CHECKING:
    from rome.terminal_tasks.sandbox import SandboxProvider


def test_every_trial_folder_holds_a_valid_atif_trajectory(tmp_path: Path) -> None:
    run = write_bench_run(tmp_path / "bench")
    oracle = atif.Trajectory.model_validate_json(trajectory_path(run, "csv-sales-rollup", 0).read_text())
    assert oracle.agent.name == "oracle" and [s.source for s in oracle.steps] == ["user", "agent", "system"]
    command = oracle.steps[1]
    assert command.llm_call_count == 0 and command.tool_calls is not None
    assert command.tool_calls[0].arguments == {"command": "bash /solution/solve.sh"}
    assert command.observation is not None and "solution output" in str(
        command.observation.results[0].content
    )
    verifier = oracle.steps[2]
    assert verifier.message == "verifier: reward 1 (passed)" and oracle.extra["verdict"] == "passed"

    talking = atif.Trajectory.model_validate_json(trajectory_path(run, "csv-sales-rollup", 1).read_text())
    assert talking.agent.name == "iflow"
    assert [s.source for s in talking.steps] == ["system", "user", "agent", "agent", "system"]
    assert talking.steps[2].observation is not None
    assert "wrote /app/out.csv" in str(talking.steps[2].observation.results[0].content)


def test_a_folder_that_is_no_bench_run_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert result.exit_code == 2 and "rome-bench terminal-pro" in result.output


@pytest.mark.slow
def test_bench_viewer_in_a_browser(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    run = write_bench_run(tmp_path / "bench")
    result = CliRunner().invoke(app, ["view", str(run)])
    assert result.exit_code == 0, result.output
    with chromium() as driver:
        driver.get((run / "view" / "index.html").as_uri())
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".chart .main-svg"))
        titles = [c.get_attribute("data-title") for c in driver.find_elements(By.CSS_SELECTOR, ".chart")]
        assert titles == ["pass@k by domain", "pass rate by task", "verdicts"]
        keep_screenshot(driver, tmp_path, "rome-bench-view.png")
        driver.find_element(By.CSS_SELECTOR, "nav button[data-tab='trials']").click()
        cells = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#trials td.cell"))
        classes = sorted(c.get_attribute("class").split()[-1] for c in cells)
        assert classes == ["verdict-agent_error", "verdict-failed", "verdict-infra_error", "verdict-passed"]
        next(c for c in cells if "verdict-failed" in c.get_attribute("class")).click()
        panel = driver.find_element(By.ID, "transcript")
        wait_for(panel.is_displayed)
        body = driver.find_element(By.ID, "transcript-body").text
        assert "python3 solve.py" in body and "verifier: reward 0 (failed)" in body
        driver.find_element(By.CSS_SELECTOR, "nav button[data-tab='verdicts']").click()
        assert "sandbox lost" in wait_for(lambda: driver.find_element(By.ID, "verdicts").text)
        assert console_errors(driver) == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_real_oracle_trial_writes_its_trajectory_and_the_viewer_shows_it(tmp_path: Path) -> None:
    from rome.bench.cli import DEFAULT_TASKS
    from rome.bench.runner import run_trials, sandbox_provider
    from rome.terminal_tasks.task import load_tasks

    suite = load_tasks(DEFAULT_TASKS, ["nim-winning-moves"])
    with sandbox_provider("docker") as provider:
        (trial,) = run_trials(suite.tasks, "oracle", tmp_path / "run", 1, 1, provider=provider)
    assert trial.passed, trial.error
    document = atif.Trajectory.model_validate_json(
        trajectory_path(tmp_path / "run", "nim-winning-moves", 0).read_text()
    )
    command = document.steps[1]
    assert command.tool_calls is not None and "solve" in command.tool_calls[0].arguments["command"]
    assert document.steps[-1].message == "verifier: reward 1 (passed)"
    assert document.extra is not None and document.extra["domain"] == trial.category
    result = CliRunner().invoke(app, ["view", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output


@pytest.mark.docker
@pytest.mark.slow
def test_an_iflow_trial_keeps_its_chat_as_atif(
    rock_provider: SandboxProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """iFlow's real loop in a ROCK sandbox; only the model's choices are scripted (a test double)."""
    from iflow.testing import ScriptedOpenAIServer, call, say
    from rome.bench.cli import DEFAULT_TASKS
    from rome.bench.runner import run_trials
    from rome.terminal_tasks.task import load_tasks

    monkeypatch.setenv("IFLOW_HOME", str(tmp_path / "iflow-home"))
    suite = load_tasks(DEFAULT_TASKS, ["nim-winning-moves"])
    replies = [call("run_shell_command", command="head -2 positions.txt"), say("I give up.")]
    with ScriptedOpenAIServer(replies) as llm:
        (trial,) = run_trials(
            suite.tasks, "iflow", tmp_path / "run", 1, 1, model=llm.url, provider=rock_provider
        )
    assert trial.verdict == "failed"
    document = atif.Trajectory.model_validate_json(
        trajectory_path(tmp_path / "run", "nim-winning-moves", 0).read_text()
    )
    sources = [s.source for s in document.steps]
    assert sources[0] == "system" and sources[-3:] == ["agent", "agent", "system"]
    shell = document.steps[-3]
    assert shell.tool_calls is not None and shell.tool_calls[0].arguments == {
        "command": "head -2 positions.txt"
    }
    assert shell.observation is not None and "Exit code: 0" in str(shell.observation.results[0].content)
    assert document.steps[-2].message == "I give up."
    assert document.steps[-1].message == "verifier: reward 0 (failed)"
