"""`roll view` in a real browser: the page of a run opens from disk with no console error, its charts
render, a held-out cell opens that episode's transcript, and the SFT-vs-RL diff shows both episodes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from roll.cli import app
from tests.view.browser import chromium, console_errors, keep_screenshot
from tests.view.run_fixture import write_run


def wait_for(condition, seconds: float = 20.0):  # type: ignore[no-untyped-def]
    """Poll `condition` until it returns something truthy (bounded: a page that never gets there fails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"the page did not reach the expected state within {seconds} s")


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = write_run(tmp_path_factory.mktemp("runs") / "ipa")
    result = CliRunner().invoke(app, ["view", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir / "view" / "index.html"


def test_run_viewer_renders_charts_and_opens_transcripts(viewer: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with chromium() as driver:
        driver.get(viewer.as_uri())
        charts = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".chart .main-svg"))
        titles = [c.get_attribute("data-title") for c in driver.find_elements(By.CSS_SELECTOR, ".chart")]
        assert {"held-out success (2 tasks)", "train success by start point k", "loss", "entropy"} <= set(
            titles
        )
        assert "failed episodes per step" in titles and len(charts) >= len(titles)
        # Every chart drew its data: plotly puts one trace group per series into the plot.
        assert all(
            c.find_elements(By.CSS_SELECTOR, ".trace")
            for c in driver.find_elements(By.CSS_SELECTOR, ".chart")
        )
        keep_screenshot(driver, tmp_path, "roll-view-curves.png")

        driver.find_element(By.CSS_SELECTOR, "nav button[data-tab='held-out']").click()
        gained = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#held-out td.gained"))
        assert len(gained) == 1 and "won" in gained[0].text
        assert len(driver.find_elements(By.CSS_SELECTOR, "#held-out td.dropped")) == 1
        gained[0].click()
        panel = driver.find_element(By.ID, "transcript")
        wait_for(panel.is_displayed)
        body = driver.find_element(By.ID, "transcript-body").text
        assert "Solve csv-total in /app." in body and "python3 solve.py" in body and "Done." in body
        assert "task_id: csv-total" in body and "label: after RL" in body
        assert driver.find_elements(
            By.CSS_SELECTOR, "#transcript-body .tag.masked"
        )  # chunk 0 is not relevant
        keep_screenshot(driver, tmp_path, "roll-view-transcript.png")
        driver.find_element(By.ID, "close").click()
        wait_for(lambda: not panel.is_displayed())

        driver.find_element(By.CSS_SELECTOR, "nav button[data-tab='diff']").click()
        left = wait_for(lambda: driver.find_element(By.ID, "diff-a").text)
        right = driver.find_element(By.ID, "diff-b").text
        assert left.startswith("after SFT: lost") and right.startswith("after RL: won")

        driver.find_element(By.CSS_SELECTOR, "nav button[data-tab='training episodes']").click()
        rows = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#training tbody tr"))
        assert len(rows) == 6
        prefilled = next(r for r in rows if r.text.split()[3] == "2")  # start k = 2: two expert steps
        prefilled.click()
        wait_for(panel.is_displayed)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#transcript-body .step.copied")) == 2
        assert console_errors(driver) == []
