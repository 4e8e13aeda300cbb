"""Headless Chromium (Debian's chromium and chromium-driver, installed by scripts/setup.sh) driven by
selenium, for the viewer and fleet page tests: console errors collected, screenshots kept as artifacts."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".ale" / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,800",
)


@contextmanager
def chromium() -> Iterator[Any]:
    """A fresh headless Chromium (its own throw-away profile) at 1280x800, through chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).exists()):
        pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} is missing: run ./scripts/setup.sh (it installs Debian's "
                    "chromium and chromium-driver)")  # fmt: skip
    profile = Path(tempfile.mkdtemp(prefix="ale-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    # --window-size sizes the window, not the page: grow it so the viewport itself is 1280x800.
    width, height = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(1280 + (1280 - width), 800 + (800 - height))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: Any) -> list[str]:
    """The page's console messages at SEVERE level (errors, uncaught exceptions, failed loads)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def keep_screenshot(driver: Any, tmp_path: Path, name: str) -> Path:
    """Save a screenshot in the test's tmp folder and under .ale/test-artifacts/ (kept after the run)."""
    shot = tmp_path / name
    driver.save_screenshot(str(shot))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / name)
    return shot
