"""benchmarks/learning.py's ledger: kept runs remake the table; runs of two recipes are told apart."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_learning() -> ModuleType:
    spec = importlib.util.spec_from_file_location("learning_bench", ROOT / "benchmarks" / "learning.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kept_runs_carry_their_evals_and_merge_into_one_ledger(tmp_path: Path) -> None:
    learning = load_learning()
    out, keep = tmp_path / "runs", tmp_path / "kept"
    (out / "ipa-s0").mkdir(parents=True)
    (out / "ipa-s0" / "eval.jsonl").write_text('{"step": 0}\n')
    keep.mkdir()
    (keep / "runs.json").write_text(json.dumps({"ipa-s1": {"minutes": 40.0}}))
    learning.keep_run(out, keep, "ipa-s0", {"minutes": 50.0})
    assert (keep / "ipa-s0" / "eval.jsonl").read_text() == '{"step": 0}\n'
    assert json.loads((keep / "runs.json").read_text()) == {
        "ipa-s1": {"minutes": 40.0},
        "ipa-s0": {"minutes": 50.0},
    }


def test_the_digest_covers_settings_not_comments_and_the_sft_config(tmp_path: Path) -> None:
    learning = load_learning()
    sft = tmp_path / "sft.yaml"
    sft.write_text("steps: 8\n")
    config = tmp_path / "ipa.yaml"
    config.write_text(f"warm_start:\n  sft_config: {sft}\n")
    first = learning.provenance(config, ["steps=16"])
    sft.write_text("steps: 12\n")
    second = learning.provenance(config, ["steps=16"])
    assert first["config_sha256"] != second["config_sha256"]
    config.write_text(f"# a comment changes no setting\nwarm_start: {{sft_config: {sft}}}\n")
    assert learning.provenance(config, ["steps=16"])["config_sha256"] == second["config_sha256"]
    assert first["overrides"] == ["steps=16"]
    ledger = {"a": first, "b": first, "c": second, "old": {"minutes": 1.0}}
    assert len(learning.recipes(["a", "b", "old"], ledger)) == 1
    assert len(learning.recipes(["a", "c"], ledger)) == 2
    ledger["d"] = learning.provenance(config, [])
    assert len(learning.recipes(["c", "d"], ledger)) == 2


def test_a_setting_moved_from_an_override_into_the_config_is_the_same_recipe(tmp_path: Path) -> None:
    learning = load_learning()
    config = tmp_path / "ipa.yaml"
    config.write_text("loss:\n  kl_coef: 0.1\n")
    overridden = learning.provenance(config, ["loss.kl_coef=0.5", "loss.mask_truncated=true"])
    config.write_text("loss:\n  kl_coef: 0.5\n  mask_truncated: true\n")
    shipped = learning.provenance(config, [])
    assert overridden["config_sha256"] != shipped["config_sha256"]
    assert overridden["recipe_sha256"] == shipped["recipe_sha256"]
    stronger = learning.provenance(config, ["loss.kl_coef=1.0"])
    ledger = {"overridden": overridden, "shipped": shipped, "stronger": stronger}
    assert learning.recipes(["overridden", "shipped"], ledger) == {shipped["recipe_sha256"]}
    assert len(learning.recipes(["shipped", "stronger"], ledger)) == 2


def test_entries_from_before_the_settings_digest_are_told_apart_by_config_and_overrides() -> None:
    learning = load_learning()
    ledger = {
        "a": {"config_sha256": "x", "overrides": ["steps=2"]},
        "b": {"config_sha256": "x", "overrides": ["steps=2"]},
        "c": {"config_sha256": "x", "overrides": []},
    }
    assert len(learning.recipes(["a", "b"], ledger)) == 1
    assert len(learning.recipes(["a", "c"], ledger)) == 2


def test_the_operations_table_counts_each_operation_a_run_solved(tmp_path: Path) -> None:
    learning = load_learning()
    config = tmp_path / "ipa.yaml"
    config.write_text("env:\n  data:\n    families: {numeric: {level: 1}}\n    eval_per_family: 1\n")
    # numeric's seeds 0-7 ask sum, mean, sum, sum, sum, mean, max, sum; held-out seed 100000 asks the largest.
    runs = [
        [
            {"label": "after SFT", "seed_rewards": {"numeric-100000@0": 0.0}},
            {"label": "after RL", "seed_rewards": {"numeric-100000@0": 1.0}},
        ],
        [
            {"label": "after SFT", "seed_rewards": {"numeric-100000@0": 1.0}},
            {"label": "after RL", "seed_rewards": {"numeric-100000@0": 1.0}},
        ],
    ]
    assert learning.by_operation(config, [], runs).splitlines()[2:] == [
        "| numeric | max | 1 | 1 | 1/2 | 2/2 |",
        "| numeric | mean | 2 | 0 | 0/0 | 0/0 |",
        "| numeric | sum | 5 | 0 | 0/0 | 0/0 |",
    ]


def _evals(sft_won: list[str], rl_won: list[str], instances: int = 16) -> str:
    def record(label: str, won: list[str]) -> dict[str, object]:
        return {
            "label": label,
            "episodes": instances,
            "success": len(won) / instances,
            "won_seeds": won,
            "seed_rewards": {f"t-{i}@0": float(f"t-{i}@0" in won) for i in range(instances)},
        }

    return "".join(
        json.dumps(record(label, won)) + "\n" for label, won in (("after SFT", sft_won), ("after RL", rl_won))
    )


def test_several_folders_pool_their_runs_into_one_verdict(tmp_path: Path) -> None:
    won = [f"t-{i}@0" for i in range(16)]
    runs = {
        ("a", 0): (won[:2], won[:10]),  # +8/-0: significant, +50 points
        ("a", 1): (won[:2], won[:2]),  # no change
        ("b", 0): (won[:4], won[2:6]),  # +2/-2
    }
    for (folder, seed), (sft, rl) in runs.items():
        (tmp_path / folder / f"ipa-s{seed}").mkdir(parents=True)
        (tmp_path / folder / f"ipa-s{seed}" / "eval.jsonl").write_text(_evals(sft, rl))
    command = [sys.executable, str(ROOT / "benchmarks" / "learning.py"), "--config", "configs/ipa.yaml"]
    folders = ["--out", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--table-only"]
    done = subprocess.run(
        [*command, *folders, "--seeds", "0", "1"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.splitlines()[-1])["configs"]["configs/ipa.yaml"]
    assert [run["name"] for run in result["runs"]] == ["a/ipa-s0", "a/ipa-s1", "b/ipa-s0", "b/ipa-s1"]
    # b has no seed 1: it stays in the table as a run that did not finish.
    assert result["verdict"] == {
        "runs": 4,
        "finished": 3,
        "significant": 1,
        "mean_points": (50.0 + 0.0 + 0.0) / 3,
        "points_sd": pytest.approx(((100 / 3) ** 2 + 2 * (50 / 3) ** 2) ** 0.5 / 2**0.5),
        "min_points": 0.0,
        "max_points": 50.0,
        "sft_above_base": 0,
    }
    assert "2 folders pooled: RL > SFT with p < 0.05 in 1 of 4 runs" in " ".join(done.stdout.split())
    training = subprocess.run([*command, *folders[:4]], cwd=ROOT, capture_output=True, text=True, check=False)
    assert training.returncode == 2
    assert "give several --out with --table-only" in training.stderr


def test_the_table_evaluates_the_base_model_though_the_config_skips_it_and_the_recipe_is_the_same(
    tmp_path: Path,
) -> None:
    learning = load_learning()
    config = tmp_path / "ipa.yaml"
    config.write_text("warm_start:\n  sft_config: sft.yaml\n  eval_base: false\n")
    skipped = learning.provenance(config, [])
    assert "warm_start.eval_base=true" in learning.seeded(3, tmp_path / "runs", config)
    config.write_text("warm_start:\n  sft_config: sft.yaml\n  eval_base: true\n")
    evaluated = learning.provenance(config, [])
    assert skipped["config_sha256"] == evaluated["config_sha256"]
    assert skipped["recipe_sha256"] == evaluated["recipe_sha256"]
    config.write_text("warm_start:\n  sft_config: sft.yaml\n  seed: 4\n")
    assert learning.provenance(config, [])["recipe_sha256"] != evaluated["recipe_sha256"]
    config.write_text("warm_start: null\nsteps: 4\n")  # no SFT, so no base model apart from the policy
    assert not any("eval_base" in override for override in learning.seeded(3, tmp_path / "runs", config))
