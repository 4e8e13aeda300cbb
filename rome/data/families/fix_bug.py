"""debugging: a small Python program with planted bugs; the tests run it on inputs the agent never sees.

Each program is a template with spots that hold either the right code or a bug; the check runs the agent's
program and the right one side by side on hidden inputs and compares their output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step


@dataclass(frozen=True)
class Bug:
    right: str
    wrong: str
    symptom: str


@dataclass(frozen=True)
class Program:
    name: str
    purpose: str
    template: str  # `{0}`, `{1}`: the bug spots
    bugs: tuple[Bug, ...]
    sample: str  # an input file the agent can try it on
    hidden: tuple[str, ...]


PROGRAMS = (
    Program(
        "stats.py",
        "prints the mean and the maximum of the numbers in the file given as its argument, one per line",
        "import sys\n\nnums = [float(line) for line in open(sys.argv[1]) if line.strip()]\n"
        "mean = {0}\nbiggest = {1}\nprint(f'mean={{mean:.3f}} max={{biggest:.3f}}')\n",
        (
            Bug("sum(nums) / len(nums)", "sum(nums) / (len(nums) - 1)", "the mean is too large"),
            Bug("max(nums)", "nums[-1]", "the max is often wrong"),
        ),
        "3\n5\n10\n2\n",
        ("1\n2\n3\n4\n", "10\n-4\n7.5\n", "42\n", "5\n9\n1\n9\n0\n"),
    ),
    Program(
        "wordfreq.py",
        "prints the 3 most frequent words of the file given as its argument, most frequent first, "
        "as `word count` lines (ties broken alphabetically)",
        "import sys\nfrom collections import Counter\n\n"
        "words = {0}\ncounts = Counter(words)\n"
        "ranked = sorted(counts.items(), key={1})\n"
        "for word, count in ranked[:3]:\n    print(word, count)\n",
        (
            Bug(
                "open(sys.argv[1]).read().lower().split()",
                "open(sys.argv[1]).read().split()",
                "`The` and `the` are counted as different words",
            ),
            Bug(
                "lambda kv: (-kv[1], kv[0])",
                "lambda kv: (kv[1], kv[0])",
                "it prints the least frequent words",
            ),
        ),
        "the cat saw The dog\nthe dog ran\n",
        ("a b a c a b\n", "X y x Y x z\nz\n", "one two two three three three\n"),
    ),
    Program(
        "fizz.py",
        "prints the FizzBuzz sequence from 1 up to and including N (its argument), one item per line",
        "import sys\n\nn = int(sys.argv[1])\nfor i in {0}:\n"
        "    if i % 15 == 0:\n        print('FizzBuzz')\n    elif {1}:\n        print('Fizz')\n"
        "    elif i % 5 == 0:\n        print('Buzz')\n    else:\n        print(i)\n",
        (
            Bug("range(1, n + 1)", "range(1, n)", "the last number is missing"),
            Bug("i % 3 == 0", "i % 6 == 0", "some multiples of 3 are printed as numbers"),
        ),
        "",
        ("15", "7", "31"),
    ),
    Program(
        "temps.py",
        "reads Celsius temperatures (one per line) from the file given as its argument and prints each in "
        "Fahrenheit with one decimal, then `avg=` and the average Fahrenheit value with one decimal",
        "import sys\n\nvalues = [float(x) for x in open(sys.argv[1]).read().split()]\n"
        "fahrenheit = [{0} for c in values]\nfor f in fahrenheit:\n    print(f'{{f:.1f}}')\n"
        "print(f'avg={{{1}:.1f}}')\n",
        (
            Bug("c * 9 / 5 + 32", "c * 5 / 9 + 32", "the Fahrenheit values are far too low"),
            Bug(
                "sum(fahrenheit) / len(fahrenheit)",
                "sum(fahrenheit) / (len(values) + 1)",
                "the average is off",
            ),
        ),
        "0\n100\n-40\n",
        ("20\n", "36.6\n-10\n", "0\n0\n100\n"),
    ),
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
        program = rng.choice(PROGRAMS)
        level = knobs.level or 1
        broken = [0] if level == 1 else [1] if level == 2 else [0, 1]
        if level == 1:
            broken = [rng.randrange(len(program.bugs))]
        spots = [program.bugs[i].wrong if i in broken else program.bugs[i].right for i in range(2)]
        source = program.template.format(*spots)
        reference = program.template.format(*(bug.right for bug in program.bugs))
        path = f"/app/{program.name}"
        files = {path: FileSpec(source)}
        arg_is_file = bool(program.sample)
        if arg_is_file:
            files["/app/sample.txt"] = FileSpec(program.sample)
            run = f"python3 {path} /app/sample.txt"
        else:
            run = f"python3 {path} 15"
        symptoms = "; ".join(program.bugs[i].symptom for i in broken)
        fixes = [
            Step(
                f"sed -i 's/{_sed(program.bugs[i].wrong)}/{_sed(program.bugs[i].right, True)}/' {path}",
                f"fix: {program.bugs[i].symptom}",
            )
            for i in broken
        ]
        if level == 1:
            bug = program.bugs[broken[0]]
            instruction = (
                f"`{path}` {program.purpose}. It has one bug: {bug.symptom}, because it uses `{bug.wrong}` "
                f"where it should use `{bug.right}`. Fix it."
            )
            steps = fixes
        else:
            instruction = (
                f"`{path}` {program.purpose}. Users report: {symptoms}. Find and fix the bug"
                f"{'s' if len(broken) > 1 else ''} (try `{run}`). Keep the output format as it is."
            )
            steps = [
                Step(f"cat {path}", "read the program"),
                Step(run, "see the symptom"),
                *fixes,
                Step(run, "check the fix"),
            ]
        first_fix = len(steps) - len(fixes) - (0 if level == 1 else 1)
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
                "reference": reference,
                "hidden": list(program.hidden),
                "arg_is_file": arg_is_file,
                "intact": ["/app/sample.txt"] if arg_is_file else [],
            },
            domain=self.domain,
            tags=["python", "bugfix", program.name],
            mistakes=[
                Mistake(
                    first_fix,
                    f"python3 -m pytest {path.removesuffix('.py')}_test.py -q",
                    "run the program's tests",
                )
            ],
        )


def _sed(text: str, replacement: bool = False) -> str:
    """`text` literally, as a sed pattern (or replacement) between `/` delimiters."""
    specials = "\\/&" if replacement else "\\/.*[]^$"
    return "".join("\\" + ch if ch in specials else ch for ch in text)
