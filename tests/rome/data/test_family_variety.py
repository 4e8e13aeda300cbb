"""Families worth learning: every level of a family draws what the agent must read from its seed, so a
thousand seeds give many distinct instructions and oracle command sequences; and the variety stays correct:
on seeds spread over the range, the oracle run on this machine (with /app moved into a scratch folder) passes
the task's own check and doing nothing fails it; fix-bug's sed steps give the right program and every planted
bug shows on the hidden inputs."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rome.data.families import FAMILIES, Instance, Step
from rome.data.families.base import FileSpec
from rome.data.families.fix_bug_programs import KINDS
from rome.data.layout import check_script
from rome.data.novelty import normalised_instruction, oracle_key

SEEDS = range(1000)

# (family, level, at least this many distinct instructions and oracle sequences over SEEDS)
VARIETY = [
    ("fix-bug", 1, 200),
    ("fix-bug", 2, 200),
    ("fix-bug", 3, 200),
    ("auth-audit", 1, 200),
    ("auth-audit", 2, 200),
    ("auth-audit", 3, 200),
    ("hazard", 1, 200),
    ("hazard", 2, 200),
    ("hazard", 3, 200),
    ("text-search", 1, 200),
    ("text-search", 2, 150),  # levels 2-3: the key name varies the prompt but not the awk oracle
    ("text-search", 3, 150),
    ("csv-rollup", 1, 200),
    ("csv-rollup", 2, 200),
    ("csv-rollup", 3, 200),
    ("file-ops", 1, 200),
    ("file-ops", 2, 200),
    ("file-ops", 3, 200),
    ("numeric", 1, 200),
    ("numeric", 2, 200),
    ("numeric", 3, 200),
    ("line-filter", 1, 200),
    ("line-filter", 2, 200),
    ("line-filter", 3, 200),
]


@pytest.mark.parametrize(("family", "level", "minimum"), VARIETY, ids=lambda v: str(v))
def test_a_level_draws_many_distinct_tasks(family: str, level: int, minimum: int) -> None:
    instances = [FAMILIES[family].make(seed, {"level": level}) for seed in SEEDS]
    instructions = {normalised_instruction(instance.instruction) for instance in instances}
    oracles = {oracle_key(instance) for instance in instances}
    assert len(instructions) >= minimum, f"{family} level {level}: {len(instructions)} distinct instructions"
    assert len(oracles) >= minimum, f"{family} level {level}: {len(oracles)} distinct oracle sequences"


# fix-bug's oracle is checked by its sed steps and hidden-input tests below (its check starts two Pythons
# per hidden input, too slow for many seeds here).
ORACLE_FAMILIES = ["auth-audit", "hazard", "text-search", "csv-rollup", "file-ops", "numeric", "line-filter"]
SPREAD = range(3, 1000, 199)


def _relocated(instance: Instance, root: Path) -> Instance:
    """`instance` with /app moved to `root`/app (files elsewhere are left out: the oracle never uses them)."""

    def move(text: str) -> str:
        return re.sub(r"/app\b", f"{root}/app", text)

    return dataclasses.replace(
        instance,
        files={
            move(p): FileSpec(move(f.content), f.mode)
            for p, f in instance.files.items()
            if p.startswith("/app/")
        },
        steps=[Step(move(step.command), step.description) for step in instance.steps],
        expected=json.loads(move(json.dumps(instance.expected))),
    )


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("family", ORACLE_FAMILIES)
def test_the_oracle_passes_the_check_and_doing_nothing_fails(tmp_path: Path, family: str, level: int) -> None:
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": str(tmp_path)}
    for seed in SPREAD:
        root = tmp_path / str(seed)
        instance = _relocated(FAMILIES[family].make(seed, {"level": level}), root)
        for path, spec in instance.files.items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(spec.content)
            Path(path).chmod(spec.mode)
        check = root / "check.py"
        check.write_text(check_script(instance))
        nop = subprocess.run([sys.executable, str(check)], capture_output=True, text=True, env=env)
        assert nop.returncode != 0, (family, level, seed, nop.stdout)
        # set -e: every oracle step must succeed (a failing step would be recorded as a teacher's mistake).
        script = "\n".join(["set -e", f"cd {root}/app", *(step.command for step in instance.steps)])
        subprocess.run(["bash", "-c", script], capture_output=True, env=env, cwd=root, check=True)
        done = subprocess.run([sys.executable, str(check)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, (family, level, seed, done.stdout, instance.instruction)


def _output(source: str, data: str, arg_is_file: bool, scratch: Path) -> str:
    """What the program prints on one input (run in this process: thousands of runs stay fast)."""
    arg = data
    if arg_is_file:
        arg = str(scratch / "input.txt")
        Path(arg).write_text(data)
    out = io.StringIO()
    argv = sys.argv
    sys.argv = ["program.py", arg]
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, "program.py", "exec"), {"__name__": "__main__"})
    except Exception as error:  # a crash is an output too: it differs from the right program's
        return f"{out.getvalue()}<{type(error).__name__}>"
    finally:
        sys.argv = argv
    return out.getvalue()


def test_every_planted_bug_shows_on_the_hidden_inputs(tmp_path: Path) -> None:
    """For every kind, drawn parameters and wrong version, the broken program prints something else than
    the right one on at least one hidden input: doing nothing, or fixing only some bugs, fails the check."""
    for kind in KINDS:
        for draw in range(12):
            draft = kind(random.Random(draw))
            arg_is_file = bool(draft.sample)
            rights = [spot.right for spot in draft.spots]
            want = [_output(draft.template.format(*rights), d, arg_is_file, tmp_path) for d in draft.hidden]
            assert not any("<" in line for line in want), (kind.__name__, draw, want)
            for index, spot in enumerate(draft.spots):
                for wrong, symptom in spot.wrongs:
                    codes = [*rights[:index], wrong, *rights[index + 1 :]]
                    source = draft.template.format(*codes)
                    got = [_output(source, d, arg_is_file, tmp_path) for d in draft.hidden]
                    assert got != want, (kind.__name__, draw, wrong, symptom)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_fix_bug_sed_steps_give_the_right_program(tmp_path: Path, level: int) -> None:
    program_file = tmp_path / "program.py"
    for seed in range(0, 1000, 20):
        instance = FAMILIES["fix-bug"].make(seed, {"level": level})
        path = instance.expected["program"]
        program_file.write_text(instance.files[path].content)
        assert instance.files[path].content != instance.expected["reference"]
        seds = [step.command for step in instance.steps if step.command.startswith("sed -i")]
        assert len(seds) == (2 if level == 3 else 1)
        for command in seds:
            subprocess.run(["bash", "-c", command.replace(path, str(program_file))], check=True)
        assert program_file.read_text() == instance.expected["reference"], seed
