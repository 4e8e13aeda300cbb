"""Scoring maths against hand-computed values."""

import pytest

from rome.bench.scoring import ks_for, pass_at_k, summarize


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 1, 1, 0.25),
        (5, 0, 3, 0.0),
        (5, 5, 3, 1.0),
        (4, 2, 3, 1.0),  # fewer than k failures: some k-subset always holds a success
        (20, 1, 10, 0.5),  # 1 - C(19,10)/C(20,10) = 1 - 10/20
    ],
)
def test_unbiased_pass_at_k(n, c, k, expected) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="attempts"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_ks_reported() -> None:
    assert ks_for(1) == [1]
    assert ks_for(3) == [1, 2, 3]
    assert ks_for(4) == [1, 2, 4]
    assert ks_for(6) == [1, 2, 4, 6]


def trial(task: str, category: str, difficulty: str, reward: float, mode: str | None = None) -> dict:
    return {
        "task_id": task,
        "category": category,
        "difficulty": difficulty,
        "reward": reward,
        "failure_mode": mode,
    }


def test_summary_by_domain_and_difficulty() -> None:
    trials = [trial("A", "x", "easy", r) for r in (1, 0, 1, 0)]
    trials += [
        trial("B", "x", "hard", r, m) for r, m in ((0, "agent_timeout"), (0.5, None), (0, None), (1, None))
    ]
    trials += [trial("C", "y", "easy", 1) for _ in range(4)]
    s = summarize(trials)
    # A passes 2/4, B 1/4 (a partial reward of 0.5 is not a pass), C 4/4.
    assert s.overall.pass_at_1 == pytest.approx((0.5 + 0.25 + 1) / 3)
    assert s.overall.avg_at_k == pytest.approx((0.5 + 0.375 + 1) / 3)
    # pass@2: A 1 - C(2,2)/C(4,2) = 5/6; B 1 - C(3,2)/C(4,2) = 1/2; C 1.
    assert s.overall.pass_at_k[2] == pytest.approx((5 / 6 + 0.5 + 1) / 3)
    assert s.overall.pass_at_k[4] == pytest.approx(1.0)
    assert sorted(s.overall.pass_at_k) == [1, 2, 4]
    assert (s.overall.tasks, s.overall.trials) == (3, 12)
    assert s.by_category["x"].pass_at_1 == pytest.approx(0.375)
    assert s.by_category["y"].pass_at_1 == pytest.approx(1.0)
    assert s.by_difficulty["easy"].pass_at_1 == pytest.approx(0.75)
    assert s.by_difficulty["hard"].pass_at_1 == pytest.approx(0.25)
    assert s.failure_modes == {"agent_timeout": 1, "none": 11}


def test_uneven_attempts_use_the_smallest_count_for_pass_at_k() -> None:
    trials = [trial("A", "x", "easy", 1), trial("A", "x", "easy", 0), trial("B", "x", "easy", 0)]
    s = summarize(trials)
    assert sorted(s.overall.pass_at_k) == [1]
    assert s.overall.pass_at_1 == pytest.approx(0.25)
