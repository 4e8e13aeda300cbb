"""debugging: a small Python program with planted bugs; the tests run it on inputs the agent never sees.

The seed draws the program (its kind and parameters: statistics, word counts, divisors, columns, thresholds,
labels), where it lives, which spots hold a bug and which bug. The check runs the agent's program and the
right one side by side on hidden inputs and compares their output.
"""

from __future__ import annotations

import random

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.fix_bug_programs import KINDS, Bug, Program, plant
from rome.data.families.words import DIRS, WORDS

# One program of each kind with a bug chosen for every spot (what the sed-step test checks per kind).
PROGRAMS: tuple[Program, ...] = tuple(
    plant(kind(random.Random(index)), random.Random(index), f"{kind.__name__}.py")
    for index, kind in enumerate(KINDS)
)

CHECK = """
import subprocess, tempfile, os
scratch = tempfile.mkdtemp()
reference = os.path.join(scratch, "reference.py")
with open(reference, "w") as handle:
    handle.write(EXPECTED["reference"])
for index, data in enumerate(EXPECTED["hidden"]):
    if EXPECTED["arg_is_file"]:
        arg = os.path.join(scratch, f"input{index}.txt")
        with open(arg, "w") as handle:
            handle.write(data)
    else:
        arg = data
    want = subprocess.run(["python3", reference, arg], capture_output=True, text=True).stdout
    got = subprocess.run(["python3", EXPECTED["program"], arg], capture_output=True, text=True, timeout=20)
    if got.stdout != want:
        fail(f"{EXPECTED['program']} prints the wrong output on a hidden input ({got.stderr[-200:]!r})")
"""


class FixBug(Family):
    name = "fix-bug"
    domain = "debugging"
    summary = "fix planted bugs in a small Python program; tests run it on hidden inputs"
    knobs = Knobs

    def build(self, rng: random.Random, knobs: Knobs) -> Instance:
        level = knobs.level or 1
        kind = rng.choice(KINDS)
        draft = kind(rng)
        folder = f"/app/{rng.choice(DIRS)}"
        path = f"{folder}/{rng.choice(draft.stems)}.py"
        program = plant(draft, rng, path.rsplit("/", 1)[1])
        count = 2 if level == 3 else 1
        broken = sorted(rng.sample(range(len(program.bugs)), count))
        bugs = [program.bugs[i] for i in broken]
        files = {path: FileSpec(program.source(set(broken)))}
        arg_is_file = bool(draft.sample)
        if arg_is_file:
            sample = f"{folder}/{rng.choice(WORDS)}{draft.sample_ext}"
            files[sample] = FileSpec(draft.sample)
            run = f"python3 {path} {sample}"
        else:
            run = f"python3 {path} {draft.arg}"
        fixes = [
            Step(f"sed -i 's/{_sed(bug.wrong)}/{_sed(bug.right, True)}/' {path}", f"fix: {bug.symptom}")
            for bug in bugs
        ]
        if level == 1:
            instruction = _told(path, program, bugs[0])
            steps = fixes
        else:
            symptoms = "; ".join(bug.symptom for bug in bugs)
            instruction = (
                f"`{path}` {program.purpose}. Users report: {symptoms}. Find and fix the bug"
                f"{'s' if len(bugs) > 1 else ''} (try `{run}`). Keep the output format as it is."
            )
            steps = [
                Step(f"cat {path}", "read the program"),
                Step(run, "see the symptom"),
                *fixes,
                Step(run, "check the fix"),
            ]
        first_fix = 0 if level == 1 else 2
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=instruction,
            files=files,
            steps=steps,
            check=CHECK,
            expected={
                "program": path,
                "reference": program.source(set()),
                "hidden": list(draft.hidden),
                "arg_is_file": arg_is_file,
                "intact": sorted(p for p in files if p != path),
            },
            domain=self.domain,
            tags=["python", "bugfix", kind.__name__],
            mistakes=[
                Mistake(
                    first_fix,
                    f"python3 -m pytest {folder}/test_{path.rsplit('/', 1)[1]} -q",
                    "run the program's tests",
                )
            ],
        )


def _told(path: str, program: Program, bug: Bug) -> str:
    """Level 1: the bug is named with its code, so one substitution fixes it."""
    return (
        f"`{path}` {program.purpose}. It has one bug: {bug.symptom}, because it uses `{bug.wrong}` "
        f"where it should use `{bug.right}`. Fix it."
    )


def _sed(text: str, replacement: bool = False) -> str:
    """`text` literally, as a sed pattern (or replacement) between `/` delimiters."""
    specials = "\\/&" if replacement else "\\/.*[]^$"
    return "".join("\\" + ch if ch in specials else ch for ch in text)
