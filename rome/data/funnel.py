"""The funnel of a whole run: generated -> valid -> collected -> resolved -> kept per filter stage ->
exported, overall and per family, as report.md and funnel.png, from the files each stage leaves behind."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from rome.data.taskset import read_manifest, write_atomic
from rome.data.types import read_trajectories
from rome.data.validate import read_validation


class FunnelStage(BaseModel):
    name: str
    total: int
    by_family: dict[str, int]


def _family(task_id: str, families: dict[str, str]) -> str:
    return families.get(task_id, "other")


def funnel(tasks: Path, collected: Path, filtered: Path, exported: Path) -> list[FunnelStage]:
    manifest = read_manifest(tasks)
    families = {task_id: entry.family for task_id, entry in manifest.instances.items()}
    stages = [FunnelStage(name="generated", total=len(families), by_family=dict(Counter(families.values())))]
    validation = read_validation(tasks)
    if validation is not None:
        valid = validation.valid
        stages.append(
            FunnelStage(
                name="valid", total=len(valid), by_family=dict(Counter(_family(t, families) for t in valid))
            )
        )
    records = list(read_trajectories(collected))
    stages.append(
        FunnelStage(
            name="collected",
            total=len(records),
            by_family=dict(Counter(_family(r.task_id, families) for r in records)),
        )
    )
    resolved = [r for r in records if r.verifier.passed]
    stages.append(
        FunnelStage(
            name="resolved",
            total=len(resolved),
            by_family=dict(Counter(_family(r.task_id, families) for r in resolved)),
        )
    )
    report = json.loads(filtered.with_name(filtered.name + ".report.json").read_text())
    drops = {stage["stage"]: set(stage["dropped"]) for stage in report["stages"]}
    remaining = list(records)
    for stage in report["stages"]:
        remaining = [r for r in remaining if r.id not in drops[stage["stage"]]]
        stages.append(
            FunnelStage(
                name=f"kept: {stage['stage']}",
                total=len(remaining),
                by_family=dict(Counter(_family(r.task_id, families) for r in remaining)),
            )
        )
    lines = [json.loads(line) for line in exported.read_text().splitlines() if line.strip()]
    stages.append(
        FunnelStage(
            name="exported",
            total=len(lines),
            by_family=dict(Counter(_family(line["task_id"], families) for line in lines)),
        )
    )
    return stages


def write_funnel(stages: list[FunnelStage], out: Path) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    families = sorted({f for s in stages for f in s.by_family})
    header = "| stage | total | " + " | ".join(families) + " |"
    lines = ["# ROME data funnel", "", header, "|" + "---|" * (len(families) + 2)]
    for stage in stages:
        cells = " | ".join(str(stage.by_family.get(f, 0)) for f in families)
        lines.append(f"| {stage.name} | {stage.total} | {cells} |")
    lines += ["", "![funnel](funnel.png)", ""]
    markdown = out / "report.md"
    write_atomic(markdown, "\n".join(lines))
    figure, axis = plt.subplots(figsize=(9, 0.5 * len(stages) + 1.5))
    names = [s.name for s in stages][::-1]
    left = [0] * len(stages)
    for family in families:
        values = [s.by_family.get(family, 0) for s in stages][::-1]
        axis.barh(names, values, left=left, label=family)
        left = [a + b for a, b in zip(left, values, strict=True)]
    for y, total in enumerate([s.total for s in stages][::-1]):
        axis.text(total, y, f" {total}", va="center")
    axis.set_xlabel("instances / trajectories")
    axis.set_title("ROME data funnel")
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    png = out / "funnel.png"
    partial = out / ".funnel.png.partial.png"
    figure.savefig(partial, dpi=110)
    plt.close(figure)
    partial.replace(png)
    return markdown, png
