"""The learning table's arithmetic on hand-made eval records: instance-by-instance pairing, the sign test,
the out-of-family row, run-against-run pairing and the verdict over seeds."""

from __future__ import annotations

import pytest

from roll.pipeline.comparison import final_vs, paired, run_row, verdict


def record(label: str, won: list[str], instances: int = 8, **extra: object) -> dict[str, object]:
    rewards = {f"t{i}@0": float(f"t{i}@0" in won) for i in range(instances)}
    return {
        "label": label,
        "episodes": instances,
        "success": len(won) / instances,
        "won_seeds": sorted(won),
        "seed_rewards": rewards,
        **extra,
    }


def test_paired_counts_gained_and_lost_instances_and_their_sign_test() -> None:
    result = paired(
        record("after SFT", ["t0@0", "t1@0"]), record("after RL", ["t1@0", "t2@0", "t3@0", "t4@0"])
    )
    assert (result.gained, result.lost) == (3, 1)
    # Two-sided exact sign test on 3 vs 1: 2 * (C(4,0) + C(4,1)) / 2**4 = 10/16.
    assert result.p == pytest.approx(0.625)
    assert result.points == pytest.approx(25.0)


def test_a_run_row_keeps_the_out_of_family_set_apart() -> None:
    other_sft = record("after SFT", ["t0@0"], instances=4)
    other_rl = record("after RL", [], instances=4)
    evals = [
        record("base", []),
        record("after SFT", ["t0@0"], out_of_family=other_sft),
        record("after RL", [f"t{i}@0" for i in range(7)], out_of_family=other_rl),
    ]
    row = run_row("ipa-s0", evals)
    assert (row.base, row.sft, row.rl) == (0.0, 0.125, 0.875)
    assert row.rl_vs_sft is not None and (row.rl_vs_sft.gained, row.rl_vs_sft.lost) == (6, 0)
    assert row.rl_vs_sft.p == pytest.approx(2 / 2**6)  # 0.03125
    assert row.sft_vs_base is not None and (row.sft_vs_base.gained, row.sft_vs_base.lost) == (1, 0)
    assert row.out_of_family is not None and (row.out_of_family.gained, row.out_of_family.lost) == (0, 1)
    assert row.as_json()["out_of_family"]["points"] == pytest.approx(-25.0)


def test_a_failed_run_stays_in_the_table_and_the_verdict() -> None:
    gained = run_row("s0", [record("after SFT", []), record("after RL", [f"t{i}@0" for i in range(6)])])
    flat = run_row("s1", [record("after SFT", ["t0@0"]), record("after RL", ["t0@0"])])
    crashed = run_row("s2", [record("after SFT", [])])
    assert crashed.rl is None and crashed.rl_vs_sft is None
    summary = verdict([gained, flat, crashed])
    assert (summary.runs, summary.finished, summary.significant) == (3, 2, 1)
    assert summary.sft_above_base == 0  # no run evaluated its base model
    assert summary.mean_points == pytest.approx((75.0 + 0.0) / 2)


def test_ipa_against_grpo_compares_the_same_instances_only() -> None:
    ipa = [record("after RL", ["t0@0", "t1@0", "t2@0"])]
    grpo = [record("after RL", ["t0@0"])]
    result = final_vs(ipa, grpo)
    assert result is not None and (result.gained, result.lost) == (2, 0)
    assert final_vs(ipa, [record("after RL", ["t0@0"], instances=4)]) is None


def test_sft_above_base_counts_runs_whose_sft_solved_more() -> None:
    better = run_row("s0", [record("base", []), record("after SFT", ["t0@0"]), record("after RL", [])])
    tie = run_row("s1", [record("base", ["t1@0"]), record("after SFT", ["t2@0"]), record("after RL", [])])
    assert tie.sft_vs_base is not None and (tie.sft_vs_base.gained, tie.sft_vs_base.lost) == (1, 1)
    assert verdict([better, tie]).sft_above_base == 1


def test_the_verdict_gives_the_spread_of_the_gains() -> None:
    after = [f"t{i}@0" for i in range(8)]
    rows = [
        run_row(f"s{n}", [record("after SFT", []), record("after RL", after[:won])])
        for n, won in enumerate((1, 2, 6))
    ]
    summary = verdict([*rows, run_row("s3", [record("after SFT", [])])])
    # gains 12.5, 25 and 75 points: mean 37.5, deviations -25, -12.5 and 37.5,
    # sample variance (625 + 156.25 + 1406.25) / 2
    assert summary.mean_points == pytest.approx(37.5)
    assert summary.points_sd == pytest.approx(1093.75**0.5)
    assert (summary.min_points, summary.max_points) == (12.5, 75.0)
    one = verdict(rows[:1])
    assert one.points_sd is None and one.min_points == one.max_points == 12.5
    none = verdict([run_row("s3", [record("after SFT", [])])])
    assert none.mean_points is None and none.points_sd is None and none.min_points is None
