"""Scores over trial results: pass@1, avg@k and the unbiased pass@k estimator, by domain and difficulty."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel

PASS_THRESHOLD = 1.0


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n attempts with c successes: 1 - C(n-c, k) / C(n, k) (Chen et al., 2021).

    Computed as a product so large n does not overflow: 1 - prod_{i=n-c+1..n} (1 - k / i).
    """
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"pass@k needs 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts per task, only {n} were run")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


class TaskScore(BaseModel):
    task_id: str
    category: str
    difficulty: str
    n: int
    successes: int
    mean_reward: float


class GroupScore(BaseModel):
    tasks: int
    trials: int
    pass_at_1: float
    avg_at_k: float
    pass_at_k: dict[int, float]


class Summary(BaseModel):
    overall: GroupScore
    by_category: dict[str, GroupScore]
    by_difficulty: dict[str, GroupScore]
    tasks: list[TaskScore]
    failure_modes: dict[str, int]
    verdicts: dict[str, int] = {}
    # Trials this machine could not judge (verdict infra_error), by cause: they are left out of every score,
    # so an infrastructure failure never counts as a task failure. Tasks with no judged trial are listed here.
    infra_errors: dict[str, int] = {}
    unjudged_tasks: list[str] = []


def ks_for(n: int) -> list[int]:
    """The k values reported for n attempts per task: 1, 2, 4, ... up to n, and n itself."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if n >= 1 and ks[-1] != n:
        ks.append(n)
    return ks


def group_score(scores: list[TaskScore]) -> GroupScore:
    """pass@1 and avg@k are means over tasks; pass@k uses the smallest attempt count among the tasks."""
    if not scores:
        return GroupScore(tasks=0, trials=0, pass_at_1=0.0, avg_at_k=0.0, pass_at_k={})
    n_min = min(s.n for s in scores)
    return GroupScore(
        tasks=len(scores),
        trials=sum(s.n for s in scores),
        pass_at_1=sum(s.successes / s.n for s in scores) / len(scores),
        avg_at_k=sum(s.mean_reward for s in scores) / len(scores),
        pass_at_k={
            k: sum(pass_at_k(s.n, s.successes, k) for s in scores) / len(scores) for k in ks_for(n_min)
        },
    )


def summarize(trials: Iterable[dict]) -> Summary:
    """Summarize trial records (dicts with task_id, category, difficulty, reward, failure_mode, verdict).

    Trials whose verdict is infra_error are counted by cause and left out of the scores.
    """
    by_task: dict[str, list[dict]] = defaultdict(list)
    failures: dict[str, int] = defaultdict(int)
    verdicts: dict[str, int] = defaultdict(int)
    infra: dict[str, int] = defaultdict(int)
    seen: list[str] = []
    for trial in trials:
        failures[trial.get("failure_mode") or "none"] += 1
        verdict = trial.get("verdict")
        if verdict:
            verdicts[verdict] += 1
        if trial["task_id"] not in seen:
            seen.append(trial["task_id"])
        if verdict == "infra_error":
            infra[trial.get("cause") or "unknown"] += 1
            continue
        by_task[trial["task_id"]].append(trial)
    scores = [
        TaskScore(
            task_id=task_id,
            category=ts[0]["category"],
            difficulty=ts[0]["difficulty"],
            n=len(ts),
            successes=sum(1 for t in ts if (t.get("reward") or 0.0) >= PASS_THRESHOLD),
            mean_reward=sum(float(t.get("reward") or 0.0) for t in ts) / len(ts),
        )
        for task_id, ts in sorted(by_task.items())
    ]

    def grouped(key: str) -> dict[str, GroupScore]:
        groups: dict[str, list[TaskScore]] = defaultdict(list)
        for s in scores:
            groups[getattr(s, key)].append(s)
        return {name: group_score(members) for name, members in sorted(groups.items())}

    return Summary(
        overall=group_score(scores),
        by_category=grouped("category"),
        by_difficulty=grouped("difficulty"),
        tasks=scores,
        failure_modes=dict(sorted(failures.items())),
        verdicts=dict(sorted(verdicts.items())),
        infra_errors=dict(sorted(infra.items())),
        unjudged_tasks=sorted(t for t in seen if t not in by_task),
    )
