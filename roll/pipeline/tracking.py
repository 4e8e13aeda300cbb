"""What a run records: per-step metrics (JSONL + TensorBoard), evaluations, checkpoints, and the summary."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

from roll.types import Trajectory

LATEST = "latest"
PIPELINE_STATE = "pipeline.json"
LOGS = ("metrics.jsonl", "eval.jsonl")


class ResumeError(RuntimeError):
    """resume=true found nothing to resume from but a log it would lose; nothing was touched."""


def episode_metrics(trajectories: list[Trajectory], step: int | None = None) -> dict[str, float]:
    """Means over episodes (reward is the env's, before any normalisation; imitation trajectories are
    counted apart, as they are no episodes); staleness over every trained chunk when `step` is given."""
    episodes = [t for t in trajectories if not t.metadata.get("imitation")]
    if not episodes:
        return {"episodes": 0}
    imitation = len(trajectories) - len(episodes)
    all_trajectories, trajectories = trajectories, episodes
    meta = [t.metadata for t in trajectories]
    turns = sum(m["turns"] for m in meta)
    out: dict[str, float] = {
        "episodes": len(trajectories),
        "reward": statistics.fmean(
            m.get("env_reward", t.reward) for t, m in zip(trajectories, meta, strict=True)
        ),
        "success": statistics.fmean(float(m["success"]) for m in meta),
        "format_error_rate": sum(m["format_errors"] for m in meta) / max(turns, 1),
        "turns": turns / len(meta),
        "output_tokens": statistics.fmean(m["output_tokens"] for m in meta),
        "truncated_output_rate": sum(m["truncated_outputs"] for m in meta) / max(turns, 1),
        "episode_gen_s": statistics.fmean(m["gen_s"] for m in meta),
        "episode_env_s": statistics.fmean(m["env_s"] for m in meta),
        # Terminal episodes say how they ended: these count as played (the policy's calls train) but mean the
        # agent ran out of time, or its model calls failed through the proxy, rather than finishing.
        "agent_timeouts": sum(m.get("end") == "agent_timeout" for m in meta),
        "agent_errors": sum(m.get("end") == "agent_error" for m in meta),
        # Terminal episodes whose agent changed the grading toolchain or left a process the cull could not
        # kill: graded 0 without running their tests (rome.terminal_tasks.grading_guard).
        "tampered": sum(bool(m.get("tampered")) for m in meta),
        # Model calls the proxy refused to record as chunks (something besides the agent called the model,
        # or past the chunk cap): rock.proxy.continuity.
        "refused_calls": sum(m.get("refused_calls", 0) for m in meta),
    }
    out |= success_by_start(meta)
    for key in ("sandbox_s", "agent_s", "verifier_s"):  # where a terminal episode's time went
        if all(key in m for m in meta):
            out[f"episode_{key}"] = statistics.fmean(m[key] for m in meta)
    if imitation:
        out["imitation_trajectories"] = imitation
    if step is not None:
        lags = [step - c.weight_version for t in all_trajectories for c in t.chunks]
        out["staleness_mean"] = statistics.fmean(lags)
        out["staleness_max"] = max(lags)
    return out


def success_by_start(meta: list[dict[str, Any]]) -> dict[str, float]:
    """Terminal episodes by start point k (k expert steps prefilled, initialized resampling): how many
    started there and their success rate, as `episodes_by_start/k` and `success_by_start/k`."""
    outcomes: dict[int, list[float]] = {}
    for m in meta:
        if "start" in m:
            outcomes.setdefault(m["start"], []).append(float(m["success"]))
    out: dict[str, float] = {}
    for start, wins in sorted(outcomes.items()):
        out[f"episodes_by_start/{start}"] = len(wins)
        out[f"success_by_start/{start}"] = statistics.fmean(wins)
    return out


class RunLog:
    """runs/<name>/: metrics.jsonl, eval.jsonl, tensorboard/, checkpoints/step_N/ with a `latest` marker."""

    def __init__(self, run_dir: Path, resume_step: int | None) -> None:
        self.dir = run_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.checkpoints = run_dir / "checkpoints"
        for name in LOGS:
            self._keep_until(run_dir / name, resume_step)
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(run_dir / "tensorboard"))

    @staticmethod
    def _keep_until(path: Path, step: int | None) -> None:
        """A resumed run rewrites the steps after its checkpoint; a fresh run starts the files anew."""
        if step is None or not path.exists():
            path.unlink(missing_ok=True)
            return
        kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(line + "\n" for line in kept))

    def _append(self, name: str, record: dict[str, Any], prefix: str) -> None:
        with (self.dir / name).open("a") as out:
            out.write(json.dumps(record) + "\n")
        for key, value in record.items():
            if isinstance(value, int | float) and key != "step":
                self._writer.add_scalar(f"{prefix}/{key}", value, record["step"])
        self._writer.flush()

    def log_step(self, record: dict[str, Any]) -> None:
        self._append("metrics.jsonl", record, "train")

    def log_eval(self, record: dict[str, Any]) -> None:
        self._append("eval.jsonl", record, "eval")

    def evals(self) -> list[dict[str, Any]]:
        path = self.dir / "eval.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def checkpoint_dir(self, step: int) -> Path:
        return self.checkpoints / f"step_{step:06d}"

    def mark_checkpoint(self, step: int, state: dict[str, Any], keep: int) -> None:
        """Written after the trainer's files: a checkpoint without this marker is incomplete and ignored.
        Then only this one and the `keep - 1` newest before it stay (each holds the weights and the
        optimizer state); folders of later steps are what a killed run left and a resumed one redoes."""
        current = self.checkpoint_dir(step)
        (current / PIPELINE_STATE).write_text(json.dumps(state))
        (self.checkpoints / LATEST).write_text(current.name)
        earlier = sorted(folder for folder in self.checkpoints.glob("step_*") if folder.name < current.name)
        later = [folder for folder in self.checkpoints.glob("step_*") if folder.name > current.name]
        for old in [*earlier[: max(len(earlier) - (keep - 1), 0)], *later]:
            shutil.rmtree(old)

    @staticmethod
    def resume_point(run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
        """What resume=true continues from: the latest checkpoint, or None for a run that has logged
        nothing yet. A run that logged steps but was stopped before its first checkpoint is refused, since
        starting over would rewrite its metrics.jsonl and eval.jsonl."""
        found = RunLog.find_checkpoint(run_dir)
        logged = [name for name in LOGS if (run_dir / name).is_file() and (run_dir / name).stat().st_size]
        if found is None and logged:
            raise ResumeError(
                f"resume=true, but {run_dir} has no complete checkpoint yet (the run stopped before its "
                f"first save; see save_every), only {' and '.join(logged)}, which starting over would "
                "rewrite. Nothing was changed. Run without resume=true to start over in this folder, or give "
                "the new run another name= (or output_dir=) to keep these logs."
            )
        return found

    @staticmethod
    def find_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
        """The latest complete checkpoint of a run and its pipeline state, if any."""
        marker = run_dir / "checkpoints" / LATEST
        if not marker.is_file():
            return None
        folder = run_dir / "checkpoints" / marker.read_text().strip()
        return folder, json.loads((folder / PIPELINE_STATE).read_text())

    def close(self) -> None:
        self._writer.close()
