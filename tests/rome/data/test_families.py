"""Task families: every family and level loads as a rome-bench task, deterministically in its seed."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from rome.data.families import FAMILIES, KnobError, UnknownFamily, get_family
from rome.data.families.fix_bug import PROGRAMS, _sed
from rome.data.novelty import overlap
from rome.data.taskset import TaskSetError, generate, is_eval_seed, read_manifest, split
from rome.terminal_tasks.task import load_tasks


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(
            str(path.relative_to(root)).encode() + f"{path.stat().st_mode:o}".encode() + path.read_bytes()
        )
    return h.hexdigest()


@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_family_loads_with_the_bench_loader(tmp_path: Path, level: int) -> None:
    for name in FAMILIES:
        generate(name, 2, 10, tmp_path, {"level": level})
    suite = load_tasks(tmp_path)
    assert suite.errors == []
    assert len(suite.tasks) == 2 * len(FAMILIES)
    for task in suite.tasks:
        assert task.difficulty == {1: "easy", 2: "medium", 3: "hard"}[level]
        assert task.solution_command == "bash /solution/solve.sh"
        assert task.grading == "reward-file"
        assert not task.allow_internet
        assert task.dockerfile is not None and "RUN" not in task.dockerfile.read_text()


def test_level_one_is_one_or_two_commands() -> None:
    for family in FAMILIES.values():
        for seed in range(20):
            instance = family.make(seed, {"level": 1})
            assert 1 <= len(instance.steps) <= 2, (family.name, seed)


def test_generation_is_deterministic_in_the_seed(tmp_path: Path) -> None:
    for name in FAMILIES:
        generate(name, 3, 7, tmp_path / "a")
        generate(name, 3, 7, tmp_path / "b")
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b")
    first = FAMILIES["csv-rollup"].make(7, {"level": 2})
    other = FAMILIES["csv-rollup"].make(8, {"level": 2})
    assert first.files != other.files


def test_regenerating_is_a_no_op_and_a_clash_is_refused(tmp_path: Path) -> None:
    assert generate("numeric", 2, 0, tmp_path, {"level": 1}).written == ["numeric-0", "numeric-1"]
    before = tree_digest(tmp_path)
    again = generate("numeric", 2, 0, tmp_path, {"level": 1})
    assert again.written == [] and again.unchanged == ["numeric-0", "numeric-1"]
    with pytest.raises(TaskSetError, match="already holds a different task"):
        generate("numeric", 1, 0, tmp_path, {"level": 3})
    assert tree_digest(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unset_knobs_are_drawn_from_the_seed_and_recorded() -> None:
    levels = {FAMILIES["auth-audit"].make(seed).knobs["level"] for seed in range(30)}
    assert levels == {1, 2, 3}
    instance = FAMILIES["hazard"].make(3, {"level": 1, "hazard": "fetch-note"})
    assert instance.knobs["hazard"] == "fetch-note" and instance.knobs["lines"] >= 3


def test_bad_family_and_knobs_say_what_exists(tmp_path: Path) -> None:
    with pytest.raises(UnknownFamily, match="text-search"):
        get_family("nope")
    with pytest.raises(KnobError, match="level"):
        generate("text-search", 1, 0, tmp_path / "x", {"levle": 1})
    with pytest.raises(KnobError, match="injection"):
        generate("hazard", 1, 0, tmp_path / "y", {"hazard": "worm"})
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_folder_that_is_not_a_task_set(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(TaskSetError, match="no taskset"):
        read_manifest(tmp_path)
    with pytest.raises(TaskSetError, match="other files"):
        generate("numeric", 1, 0, tmp_path)
    with pytest.raises(TaskSetError, match="is a file, not a folder"):
        generate("numeric", 1, 0, tmp_path / "notes.txt")


def test_split_keeps_seeds_apart(tmp_path: Path) -> None:
    for name in ("numeric", "hazard", "fix-bug"):
        generate(name, 40, 0, tmp_path)
    result = split(tmp_path, 0.25)
    assert not set(result.train_seeds) & set(result.eval_seeds)
    assert len(result.train) + len(result.eval) + len(result.repeats) == 120
    made = {
        t: get_family(t.rsplit("-", 1)[0]).make(int(t.rsplit("-", 1)[1]))
        for t in read_manifest(tmp_path).instances
    }
    assert overlap([made[t] for t in result.train], [made[t] for t in result.eval]) == []
    assert overlap([made[t] for t in result.train], [made[t] for t in result.repeats]) == result.repeats
    # A seed's side is the same for every family: the three families share seeds 0..39.
    assert len(result.eval) + len(result.repeats) == 3 * len(result.eval_seeds)
    assert set(result.eval_seeds) == {s for s in range(40) if is_eval_seed(s, 0.25)}
    assert json.loads((tmp_path / "split.json").read_text())["eval"] == result.eval
    with pytest.raises(TaskSetError, match="between 0 and 1"):
        split(tmp_path, 1.5)


def test_mistakes_come_before_an_existing_step() -> None:
    for family in FAMILIES.values():
        for seed in range(12):
            instance = family.make(seed)
            for mistake in instance.mistakes:
                assert 0 <= mistake.before < len(instance.steps), (family.name, seed)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_each_planted_bug_is_fixed_by_its_sed_step(program) -> None:  # type: ignore[no-untyped-def]
    reference = program.template.format(*(bug.right for bug in program.bugs))
    both = program.template.format(*(bug.wrong for bug in program.bugs))
    fixed = both
    for bug in program.bugs:
        assert fixed.count(bug.wrong) == 1, bug.wrong
        script = f"s/{_sed(bug.wrong)}/{_sed(bug.right, True)}/"
        fixed = subprocess.run(
            ["sed", script], input=fixed, capture_output=True, text=True, check=True
        ).stdout
    assert fixed == reference
