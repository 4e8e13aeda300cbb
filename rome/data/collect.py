"""`rome data collect`: agents on the task set's valid instances, in ROCK sandboxes, every model call through
the ModelProxyService in deploy mode (recorded), one JSONL line of `TrajectoryRecord` per attempt.

The model is `oracle-teacher` (the oracle replayed as iFlow tool calls, see `teacher.py`), an
OpenAI-compatible URL, or `builtin:ID` (served here by ROLL's engine). When the upstream is a ROLL engine
server the proxy asks it for token ids, so each recorded call carries the prompt and output token ids.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from roll.rollout.terminal.config import CollectSettings
from rome.bench.runner import build_all
from rome.bench.trial import run_trial
from rome.data.agent import CollectingAgent
from rome.data.taskset import Manifest, read_manifest, write_atomic
from rome.data.teacher import TeacherServer, plan
from rome.data.types import ModelCall, TrajectoryRecord, VerifierResult, write_trajectories
from rome.data.validate import read_validation
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import Task, load_tasks

VERIFIER_OUTPUT_CAP = 4000


class CollectError(RuntimeError):
    """Collection cannot start: no valid task, an unknown agent, a model that does not answer."""


class CollectStats(BaseModel):
    tasks: int
    skipped_invalid: int
    attempts: int
    trajectories: int
    resolved: int
    errors: int
    seconds: float
    settings: CollectSettings
    source: str


@dataclass
class Endpoint:
    url: str  # OpenAI base URL ending in /v1
    model: str
    ours: bool  # a ROLL engine server: ask for token ids


def check_endpoint(url: str) -> Endpoint:
    """The endpoint's first listed model, or a `CollectError` saying the URL does not answer."""
    base = url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    try:
        response = httpx.get(f"{base}/models", timeout=10)
        response.raise_for_status()
        listed = response.json().get("data") or []
    except (httpx.HTTPError, ValueError, AttributeError) as error:
        raise CollectError(
            f"the model endpoint {base} does not answer "
            f"({type(error).__name__}: {error}); start it (for example "
            "`roll serve --model builtin:smollm2-135m-instruct --port 8000`) or pass another --model"
        ) from error
    if not listed:
        raise CollectError(f"{base}/models lists no model; point --model at a server that serves one")
    # ROLL's engine server lists its model as owned by "roll"; it can add token ids to its answers.
    return Endpoint(base, str(listed[0]["id"]), listed[0].get("owned_by") == "roll")


@contextlib.contextmanager
def model_endpoint(settings: CollectSettings) -> Iterator[tuple[Endpoint, TeacherServer | None]]:
    if settings.agent == "oracle-teacher":
        with TeacherServer() as teacher:
            yield Endpoint(teacher.url, "oracle-teacher", False), teacher
        return
    if not settings.model:
        raise CollectError("--agent iflow needs --model: an OpenAI-compatible URL or builtin:ID")
    if settings.model.startswith("builtin:") or Path(settings.model).is_dir():
        from roll.engine.server.loopback import serve_on_loopback
        from roll.engine.torch_engine import TorchEngine
        from roll.models import load_model

        loaded = load_model(settings.model)
        with serve_on_loopback(TorchEngine(loaded), loaded) as url:
            yield Endpoint(url, loaded.model_id, True), None
        return
    if not settings.model.startswith(("http://", "https://")):
        raise CollectError(f"--model {settings.model!r} is neither a URL, nor builtin:ID, nor a model folder")
    yield check_endpoint(settings.model), None


class Recordings:
    """The proxy's deploy recording, read as it grows, grouped by episode."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._by_episode: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def take(self, episode_id: str) -> list[dict[str, Any]]:
        with self._lock:
            if self.path.is_file():
                with self.path.open("rb") as handle:
                    handle.seek(self._offset)
                    data = handle.read()
                complete = data[: data.rfind(b"\n") + 1]
                self._offset += len(complete)
                for line in complete.decode("utf-8").splitlines():
                    recording = json.loads(line)
                    self._by_episode.setdefault(str(recording.get("episode_id")), []).append(recording)
            return self._by_episode.pop(episode_id, [])


def model_call(recording: dict[str, Any]) -> ModelCall:
    response = recording.get("response") or {}
    choice = (response.get("choices") or [{}])[0]
    return ModelCall(
        context_messages=len(recording.get("request", {}).get("messages") or []),
        response=choice.get("message") or {},
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=response.get("prompt_token_ids"),
        output_token_ids=choice.get("token_ids"),
        output_logprobs=choice.get("token_logprobs"),
        weight_version=choice.get("weight_version", response.get("weight_version")),
        usage=response.get("usage") or {},
        latency_s=float(recording.get("latency_s") or 0.0),
    )


def valid_tasks(root: Path) -> tuple[Manifest, list[Task], int]:
    manifest = read_manifest(root)
    suite = load_tasks(root)
    validation = read_validation(root)
    if validation is None:
        return manifest, suite.tasks, 0
    valid = set(validation.valid)
    tasks = [t for t in suite.tasks if t.id in valid]
    return manifest, tasks, len(suite.tasks) - len(tasks)


def collect(
    root: Path,
    out: Path,
    settings: CollectSettings,
    provider: SandboxProvider,
    on_record: Callable[[TrajectoryRecord], None] | None = None,
    only: set[str] | None = None,
) -> CollectStats:
    """Run every (valid task, attempt), or only the valid tasks in `only`; write the trajectories to `out`
    (a temporary file, renamed)."""
    started = time.monotonic()
    manifest, tasks, skipped = valid_tasks(root)
    if only is not None:
        tasks = [t for t in tasks if t.id in only]
    if not tasks:
        raise CollectError(f"{root} has no valid instance to collect on; see {root / 'validation.json'}")
    if settings.agent_timeout_s is not None:
        tasks = [t.model_copy(update={"agent_timeout_sec": settings.agent_timeout_s}) for t in tasks]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.partial"
    calls_path = out.parent / f".{out.name}.calls.jsonl"
    calls_path.unlink(missing_ok=True)
    records: list[TrajectoryRecord] = []
    lock = threading.Lock()
    from rock.proxy.server import ProxyThread
    from rock.proxy.types import ProxyConfig

    with contextlib.ExitStack() as stack:
        endpoint, teacher = stack.enter_context(model_endpoint(settings))
        config = ProxyConfig(
            mode="deploy",
            upstream_url=endpoint.url,
            record_path=calls_path,
            request_extra={"return_token_ids": True} if endpoint.ours else {},
        )
        proxy = stack.enter_context(ProxyThread(config))
        recordings = Recordings(calls_path)
        builds = build_all(tasks, workers=min(settings.concurrency, 2), provider=provider)

        def one(task: Task, attempt: int) -> TrajectoryRecord:
            episode = f"{task.id}.{attempt}.{uuid.uuid4().hex[:8]}"
            model = endpoint.model
            if teacher is not None:
                model = f"oracle-teacher/{episode}"
                turns = plan(task.path, attempt, settings.mistake_rate)
                teacher.register(model, turns, settings.prompt_profile)
            agent = CollectingAgent(
                settings.agent,
                f"{proxy.url}/episodes/{episode}/v1",
                model,
                settings.max_turns,
                settings.prompt_profile,
                settings.environment,
            )
            build = builds[task.id]
            t0 = time.monotonic()
            trial = run_trial(task, attempt, agent, provider, build.image, build.error, model=endpoint.model)
            entry = manifest.instances.get(task.id)
            record = TrajectoryRecord(
                id=f"{task.id}#{attempt}",
                task_id=task.id,
                task_path=str(task.path),
                family=entry.family if entry else None,
                seed=entry.seed if entry else None,
                difficulty=task.difficulty,
                domain=task.category,
                attempt=attempt,
                agent=settings.agent,
                model=endpoint.model,
                instruction=task.instruction,
                messages=agent.messages,
                tools=agent.tools,
                calls=[model_call(r) for r in recordings.take(episode)],
                verifier=VerifierResult(
                    reward=trial.reward,
                    passed=trial.passed,
                    failure_mode=trial.failure_mode,
                    error=trial.error,
                    output=trial.verifier_output[-VERIFIER_OUTPUT_CAP:],
                ),
                agent_error=trial.error if trial.failure_mode in ("agent_error", "agent_timeout") else None,
                duration_s=time.monotonic() - t0,
            )
            with lock, partial.open("a", encoding="utf-8") as handle:
                handle.write(record.model_dump_json() + "\n")
            return record

        partial.unlink(missing_ok=True)
        with ThreadPoolExecutor(max_workers=settings.concurrency) as pool:
            futures = [pool.submit(one, t, a) for t in tasks for a in range(settings.attempts)]
            for future in as_completed(futures):
                record = future.result()
                records.append(record)
                if on_record is not None:
                    on_record(record)
    records.sort(key=lambda r: (r.task_id, r.attempt))
    write_trajectories(out, records)
    partial.unlink(missing_ok=True)
    calls_path.unlink(missing_ok=True)
    stats = CollectStats(
        tasks=len(tasks),
        skipped_invalid=skipped,
        attempts=settings.attempts,
        trajectories=len(records),
        resolved=sum(r.verifier.passed for r in records),
        errors=sum(r.verifier.failure_mode is not None for r in records),
        seconds=time.monotonic() - started,
        settings=settings,
        source=str(root.resolve()),
    )
    write_atomic(stats_path(out), stats.model_dump_json(indent=2) + "\n")
    return stats


def stats_path(path: Path) -> Path:
    return path.with_name(path.name + ".stats.json")
