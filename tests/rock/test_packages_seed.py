"""`rock packages seed --if-needed`: set-up's check skips a seed the folder already holds."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rock.cli import app
from rock.packages.cli import SEED_APT, SEED_PYPI
from rock.packages.seed import seeded_with, write_seeded

DEFAULTS = {"pip": list(SEED_PYPI), "apt": list(SEED_APT), "apt_image": "ale/debian:bookworm"}


def test_a_folder_seeded_with_the_same_packages_is_not_seeded_again(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pypi").mkdir()
    write_seeded(tmp_path, DEFAULTS)
    assert seeded_with(tmp_path) == DEFAULTS

    def no_cache(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cache was started although the folder holds these packages")

    monkeypatch.setattr("rock.packages.cache.PackageCache", no_cache)
    result = CliRunner().invoke(app, ["packages", "seed", str(tmp_path), "--if-needed"])
    assert result.exit_code == 0 and "seeded before" in result.output


def test_another_list_a_lost_pypi_half_or_no_record_means_seeding(tmp_path: Path) -> None:
    assert seeded_with(tmp_path) is None
    write_seeded(tmp_path, DEFAULTS)
    assert seeded_with(tmp_path) is None  # the record without the PyPI half it describes
    (tmp_path / "pypi").mkdir()
    assert seeded_with(tmp_path) == DEFAULTS
    assert seeded_with(tmp_path) != DEFAULTS | {"pip": [*SEED_PYPI, "requests"]}
    (tmp_path / "seeded.json").write_text("{not json")
    assert seeded_with(tmp_path) is None
