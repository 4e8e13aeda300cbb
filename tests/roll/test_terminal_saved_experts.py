"""A new run starts each task from the expert an earlier run saved under `<output>/experts/`, when the file
fits the task's current files; a stale or malformed file is rejected with a message and the task starts
from its oracle (a real suite task, copied so that its files can be changed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rock.proxy.types import EpisodeRecord, RecordedChunk
from roll.rollout.terminal.resampling.expert import ExpertStep, oracle_expert
from roll.rollout.terminal.resampling.expert_book import ORACLE, ExpertBook
from roll.rollout.terminal.resampling.expert_store import task_fingerprint
from roll.types import Chunk
from rome.terminal_tasks.task import Task, load_task

SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"


@pytest.fixture
def task(tmp_path: Path) -> Task:
    folder = tmp_path / "tasks" / "find-large-files"
    shutil.copytree(SUITE / "find-large-files", folder)
    loaded = load_task(folder)
    assert isinstance(loaded, Task)
    return loaded


def book_for(task: Task, folder: Path) -> ExpertBook:
    """The book a run builds at start-up: the oracle, the experts folder, the task's current fingerprint."""
    return ExpertBook({task.id: oracle_expert(task)}, folder, {task.id: task_fingerprint(task.path)})


def final_answer(episode_id: str, text: str) -> EpisodeRecord:
    """A recorded episode whose only call the policy answered with `text` (no tool call)."""
    chunk = Chunk(context_ids=[1], output_ids=[2], output_logprobs=[0.0])
    answer = {"role": "assistant", "content": text}
    return EpisodeRecord(
        episode_id=episode_id, chunks=[RecordedChunk(chunk=chunk, messages=[], answer=answer, latency_s=0.0)]
    )


def saved_run(task: Task, folder: Path) -> ExpertBook:
    """An earlier run whose policy finished the task in its own words after the oracle's command."""
    book = book_for(task, folder)
    book.load_saved()
    assert book.offer(task.id, book.current(task.id), 1, final_answer("e1", "Listed."), round_index=3)
    return book


def test_the_fingerprint_covers_every_file_of_the_task(task: Task, tmp_path: Path):
    copy = tmp_path / "copy"
    shutil.copytree(task.path, copy)
    assert task_fingerprint(copy) == task_fingerprint(task.path)
    (copy / "tests" / "test.sh").write_text((copy / "tests" / "test.sh").read_text() + "\n")
    changed = task_fingerprint(copy)
    assert changed != task_fingerprint(task.path)
    (copy / "tests" / "test.sh").rename(copy / "tests" / "check.sh")  # same content, another name
    assert task_fingerprint(copy) not in (changed, task_fingerprint(task.path))


def test_a_new_run_starts_from_the_saved_expert(task: Task, tmp_path: Path):
    folder = tmp_path / "run" / "experts"
    earlier = saved_run(task, folder).current(task.id)
    assert json.loads((folder / f"{task.id}.json").read_text())["task_fingerprint"] == task_fingerprint(
        task.path
    )

    book = book_for(task, folder)
    (start,) = book.load_saved().values()
    assert start.source == "saved" and start.problem is None
    assert start.describe() == (
        f"find-large-files: starts from its saved expert {folder / 'find-large-files.json'} "
        "(2 steps, 1 the policy's own)"
    )
    assert start.to_json() == {
        "source": "saved",
        "path": str(folder / "find-large-files.json"),
        "steps": 2,
        "policy_steps": 1,
        "problem": None,
    }
    expert = book.current(task.id)
    assert expert == earlier
    assert expert.steps == [oracle_expert(task)[0], ExpertStep(None, "Listed.")]
    assert expert.origins == [ORACLE, "e1"]
    assert [r["round"] for r in expert.refreshes] == [3]
    # The loaded expert is the one the next refresh competes with: the same again is no better.
    assert not book.offer(task.id, expert, 1, final_answer("e2", "Listed again."), round_index=0)


def test_without_a_saved_expert_a_task_starts_from_its_oracle(task: Task, tmp_path: Path):
    folder = tmp_path / "run" / "experts"
    book = book_for(task, folder)
    (start,) = book.load_saved().values()
    assert start.source == "oracle" and start.problem is None
    assert start.describe() == (
        f"find-large-files: starts from the oracle expert (2 steps); no saved expert at "
        f"{folder / 'find-large-files.json'}"
    )
    assert book.current(task.id).steps == oracle_expert(task)


def test_a_saved_expert_of_changed_task_files_is_rejected(task: Task, tmp_path: Path):
    folder = tmp_path / "run" / "experts"
    saved_run(task, folder)
    before = task_fingerprint(task.path)
    (task.path / "instruction.md").write_text("List the files under /srv/data larger than 1 MiB.\n")
    now = task_fingerprint(task.path)

    book = book_for(task, folder)
    (start,) = book.load_saved().values()
    problem = f"the task's files changed since it was saved (fingerprint {before[:12]}, now {now[:12]})"
    assert start.source == "oracle" and start.problem == problem
    assert start.describe() == (
        f"find-large-files: starts from the oracle expert (2 steps): the saved expert "
        f"{folder / 'find-large-files.json'} is not used: {problem}. Delete it or pick another output "
        "folder; the task's next refresh overwrites it"
    )
    assert book.current(task.id).origins == [ORACLE, ORACLE]
    assert book.current(task.id).steps == oracle_expert(task)


VALID: dict[str, Any] = {
    "steps": [{"command": "ls /srv/data", "content": ""}, {"command": None, "content": "Done."}],
    "origins": ["e1", "e1"],
    "refreshes": [],
}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            "{not json",
            "it is not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))",
        ),
        (
            b"\xff\xfe",
            "it is not UTF-8 text ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)",
        ),
        (None, "it cannot be read (Is a directory)"),
        ("[1, 2]", "it is not a JSON object"),
        (
            {**VALID, "task_fingerprint": None},
            "it records no task fingerprint (saved by an older version), so it may not fit the task's files",
        ),
        ({**VALID, "steps": []}, "'steps' must be a non-empty list"),
        (
            {**VALID, "steps": [{"command": "ls"}, VALID["steps"][1]]},
            "step 0 must be an object with exactly 'command' and 'content'",
        ),
        (
            {**VALID, "steps": [{"command": "  ", "content": ""}, VALID["steps"][1]]},
            "step 0: 'command' must be a non-empty string or null",
        ),
        (
            {**VALID, "steps": [VALID["steps"][0], {"command": None, "content": 7}]},
            "step 1: 'content' must be a string",
        ),
        ({**VALID, "origins": ["e1"]}, "'origins' must be a list of 2 strings, one per step"),
        ({**VALID, "refreshes": {"round": 0}}, "'refreshes' must be a list of objects"),
    ],
    ids=[
        *("json", "utf8", "directory", "object", "fingerprint", "steps"),
        *("keys", "command", "content", "origins", "refreshes"),
    ],
)
def test_a_malformed_saved_expert_is_rejected(task: Task, tmp_path: Path, content: Any, problem: str):
    folder = tmp_path / "experts"
    folder.mkdir()
    path = folder / f"{task.id}.json"
    fingerprint = task_fingerprint(task.path)
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps({"task_fingerprint": fingerprint, **content}))

    book = book_for(task, folder)
    (start,) = book.load_saved().values()
    assert start.source == "oracle" and start.problem == problem
    assert start.describe() == (
        f"find-large-files: starts from the oracle expert (2 steps): the saved expert {path} is not used: "
        f"{problem}. Delete it or pick another output folder; the task's next refresh overwrites it"
    )
    assert book.current(task.id).steps == oracle_expert(task)
    # The valid file with the right fingerprint is taken (so each case above fails for its own reason).
    if path.is_dir():
        path.rmdir()
    path.write_text(json.dumps({"task_fingerprint": fingerprint, **VALID}))
    assert book_for(task, folder).load_saved()[task.id].source == "saved"
