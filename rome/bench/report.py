"""Run summary on disk: summary.json, report.md and one PNG chart per domain."""

from __future__ import annotations

from pathlib import Path

from rome.bench.scoring import GroupScore, Summary, summarize
from rome.bench.trial import TrialResult


def _row(name: str, g: GroupScore) -> str:
    ks = " ".join(f"pass@{k}={v:.3f}" for k, v in g.pass_at_k.items())
    return f"| {name} | {g.tasks} | {g.trials} | {g.pass_at_1:.3f} | {g.avg_at_k:.3f} | {ks} |"


def _verdict(trial: TrialResult) -> str:
    return trial.verdict + (f" ({trial.cause})" if trial.cause else "")


def markdown(summary: Summary, trials: list[TrialResult], title: str) -> str:
    head = "| group | tasks | trials | pass@1 | avg@k | unbiased pass@k |\n|---|---|---|---|---|---|"
    lines = [f"# {title}", "", "## Overall", "", head, _row("all", summary.overall), ""]
    lines += ["## By domain", "", head, *(_row(k, v) for k, v in summary.by_category.items()), ""]
    lines += ["## By difficulty", "", head, *(_row(k, v) for k, v in summary.by_difficulty.items()), ""]
    lines += ["## Verdicts", "", "| verdict | trials |", "|---|---|"]
    lines += [f"| {verdict} | {count} |" for verdict, count in summary.verdicts.items()]
    if summary.infra_errors:
        lines += [
            "",
            "Infrastructure errors are not task failures: these trials are left out of every score.",
            "",
        ]
        lines += ["| cause | trials |", "|---|---|"]
        lines += [f"| {cause} | {count} |" for cause, count in summary.infra_errors.items()]
    if summary.unjudged_tasks:
        lines += ["", f"Not judged here (every trial an infra error): {', '.join(summary.unjudged_tasks)}"]
    lines += ["", "## Failure modes", "", "| mode | trials |", "|---|---|"]
    lines += [f"| {mode} | {count} |" for mode, count in summary.failure_modes.items()]
    lines += [
        "",
        "## Tasks",
        "",
        "| task | domain | difficulty | attempts | passed | mean reward |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s.task_id} | {s.category} | {s.difficulty} | {s.n} | {s.successes} | {s.mean_reward:.2f} |"
        for s in summary.tasks
    ]
    failed = [t for t in trials if t.error]
    if failed:
        lines += ["", "## Errors", ""]
        lines += [
            f"- `{t.task_id}` #{t.attempt}: {t.verdict}"
            + (f" ({t.cause})" if t.cause else "")
            + f": {t.error}"
            for t in failed
        ]
    noted = [t for t in trials if t.notes]
    if noted:
        lines += ["", "## Notes", ""]
        lines += [f"- `{t.task_id}` #{t.attempt}: {'; '.join(t.notes)}" for t in noted]
    return "\n".join(lines) + "\n"


def draw_domain_charts(summary: Summary, charts: Path) -> list[Path]:
    """One bar chart per domain (each task's pass rate over its attempts) and one of pass@1 by domain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    charts.mkdir(parents=True, exist_ok=True)
    written = []
    for category, group in summary.by_category.items():
        scores = [s for s in summary.tasks if s.category == category]
        fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(scores) + 2), 3.6))
        ax.bar([s.task_id for s in scores], [s.successes / s.n for s in scores], color="#3b7dd8")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("pass rate")
        ax.set_title(f"{category}: pass@1 {group.pass_at_1:.2f} over {group.tasks} tasks")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        fig.tight_layout()
        path = charts / f"{category}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    names = list(summary.by_category)
    ax.bar(names, [summary.by_category[n].pass_at_1 for n in names], color="#2f9e6b")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pass@1")
    ax.set_title(f"all domains: pass@1 {summary.overall.pass_at_1:.2f} over {summary.overall.tasks} tasks")
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    overview = charts / "all-domains.png"
    fig.savefig(overview, dpi=100)
    plt.close(fig)
    return [*written, overview]


def write_report(output: Path, trials: list[TrialResult], title: str) -> Summary:
    summary = summarize(t.model_dump() for t in trials)
    (output / "summary.json").write_text(summary.model_dump_json(indent=2))
    (output / "report.md").write_text(markdown(summary, trials, title))
    draw_domain_charts(summary, output / "charts")
    return summary
