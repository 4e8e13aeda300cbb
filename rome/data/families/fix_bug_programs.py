"""The small Python programs fix-bug plants its bugs in.

A program kind draws its parameters from the seed (which statistics, how many words, which divisors and
words, which columns and threshold, output labels and decimals) and gives a `Draft`: a template whose spots
each hold the right code or one of its wrong versions. `plant` picks one wrong version per spot such that
every bug, alone or with others, is one literal `sed` substitution away from the right program.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from rome.data.families.words import USERS, WORDS


@dataclass(frozen=True)
class Bug:
    right: str
    wrong: str
    symptom: str


@dataclass(frozen=True)
class Spot:
    """A place in a template: the right code and the wrong versions a bug may put there, with the symptom
    each one shows."""

    right: str
    wrongs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Draft:
    """A program kind with its parameters drawn: everything but which wrong version each spot would hold."""

    stems: tuple[str, ...]  # file names (without .py) the program may have
    purpose: str
    template: str  # `{0}`, `{1}`, ...: the spots; other braces doubled
    spots: tuple[Spot, ...]
    sample: str  # a file the agent can try it on ("" when the argument is not a file)
    sample_ext: str
    hidden: tuple[str, ...]  # the check's inputs: file contents, or the argument itself
    arg: str = ""  # the argument to try it with when it takes no file


@dataclass(frozen=True)
class Program:
    """A program with a wrong version chosen for every spot: `bugs[i]` is what a bug in spot `i` is."""

    name: str
    purpose: str
    template: str
    bugs: tuple[Bug, ...]
    sample: str
    hidden: tuple[str, ...]

    def source(self, broken: set[int]) -> str:
        return self.template.format(*(b.wrong if i in broken else b.right for i, b in enumerate(self.bugs)))


def _fill(text: str, **params: object) -> str:
    """`@name@` placeholders replaced (the template's own braces stay for the spots)."""
    for key, value in params.items():
        text = text.replace(f"@{key}@", str(value))
    return text


# name: (what it is, variable, right code, wrong versions with their symptoms)
STATS: dict[str, tuple[str, str, str, tuple[tuple[str, str], ...]]] = {
    "mean": (
        "the mean",
        "mean",
        "sum(nums) / len(nums)",
        (
            ("sum(nums) / (len(nums) - 1)", "the mean is too large"),
            ("sum(nums[1:]) / len(nums)", "the first number is left out of the mean"),
        ),
    ),
    "max": (
        "the maximum",
        "biggest",
        "max(nums)",
        (
            ("nums[-1]", "the max is just the last number"),
            ("sorted(nums)[0]", "the max is the smallest number"),
        ),
    ),
    "min": (
        "the minimum",
        "smallest",
        "min(nums)",
        (
            ("nums[0]", "the min is just the first number"),
            ("sorted(nums)[-1]", "the min is the largest number"),
        ),
    ),
    "range": (
        "the range (max minus min)",
        "spread",
        "max(nums) - min(nums)",
        (
            ("max(nums) - nums[0]", "the range is measured from the first number"),
            ("max(nums) + min(nums)", "the range adds the smallest number instead of subtracting it"),
        ),
    ),
    "total": (
        "the total",
        "total",
        "sum(nums)",
        (
            ("sum(nums[1:])", "the first number is left out of the total"),
            ("sum(nums[:-1])", "the last number is left out of the total"),
        ),
    ),
}


def _decimals(count: int) -> str:
    return f"{count} decimal{'s' if count > 1 else ''}"


def _numbers(rng: random.Random, low: int, high: int) -> str:
    return "".join(f"{rng.randint(low, high)}\n" for _ in range(rng.randint(4, 8)))


def stats(rng: random.Random) -> Draft:
    first, second = rng.sample(sorted(STATS), 2)
    decimals, sep = rng.choice((1, 2, 3)), rng.choice(("=", ":"))
    spots, lines = [], []
    for index, name in enumerate((first, second)):
        _, var, right, wrongs = STATS[name]
        spots.append(Spot(f"{var} = {right}", tuple((f"{var} = {w}", s) for w, s in wrongs)))
        lines.append(f"{{{index}}}\n")
    var_a, var_b = STATS[first][1], STATS[second][1]
    template = (
        "import sys\n\nnums = [float(line) for line in open(sys.argv[1]) if line.strip()]\n"
        + "".join(lines)
        + _fill(
            "print(f'@a@@sep@{{@va@:.@d@f}} @b@@sep@{{@vb@:.@d@f}}')\n",
            a=first,
            b=second,
            va=var_a,
            vb=var_b,
            sep=sep,
            d=decimals,
        )
    )
    purpose = (
        f"prints {STATS[first][0]} and {STATS[second][0]} of the numbers in the file given as its argument "
        f"(one per line) as `{first}{sep}X {second}{sep}Y` with {_decimals(decimals)}"
    )
    hidden = ("1\n2\n3\n4\n", "10\n-4\n7.5\n", "42\n", "5\n9\n1\n9\n0\n", "3\n8\n-2\n6\n")
    return Draft(
        ("stats", "summary", "describe", "numstat"),
        purpose,
        template,
        tuple(spots),
        _numbers(rng, -20, 99),
        ".txt",
        hidden,
    )


def wordfreq(rng: random.Random) -> Draft:
    top, sep = rng.randint(2, 5), rng.choice((" ", ": ", ",", "="))
    template = (
        "import sys\nfrom collections import Counter\n\nwords = {0}\ncounts = Counter(words)\n"
        "ranked = sorted(counts.items(), key={1})\nfor word, count in {2}:\n"
        + _fill("    print(f'{{word}}@sep@{{count}}')\n", sep=sep)
    )
    spots = (
        Spot(
            "open(sys.argv[1]).read().lower().split()",
            (
                ("open(sys.argv[1]).read().split()", "`The` and `the` are counted as different words"),
                ('open(sys.argv[1]).read().lower().split(" ")', "words at the end of a line are miscounted"),
            ),
        ),
        Spot(
            "lambda kv: (-kv[1], kv[0])",
            (
                ("lambda kv: (kv[1], kv[0])", "it prints the least frequent words"),
                ("lambda kv: -kv[1]", "ties are not broken alphabetically"),
            ),
        ),
        Spot(
            f"ranked[:{top}]",
            (
                (f"ranked[:{top - 1}]", "it prints one word too few"),
                (f"ranked[1:{top + 1}]", "the top word is missing"),
            ),
        ),
    )
    purpose = (
        f"prints the {top} most frequent words (compared in lower case) of the file given as its argument, "
        f"most frequent first, as `word{sep}count` lines (ties broken alphabetically)"
    )
    hidden = (
        "a b a c a b\n",
        "X y x Y x z\nz\n",
        "one two two three three three\n",
        "pear fig pear fig kiwi apple kiwi apple\n",
        "a b c d e f g a b c d e f a b c d e a b c d a b c a b a\n",
    )
    words = [rng.choice(WORDS[:8]) for _ in range(rng.randint(10, 16))]
    sample = " ".join(w.capitalize() if rng.random() < 0.3 else w for w in words) + "\n"
    return Draft(
        ("wordfreq", "topwords", "freq", "wordcount"), purpose, template, spots, sample, ".txt", hidden
    )


FIZZ_PAIRS = ((3, 5), (2, 7), (3, 7), (4, 5), (2, 5), (3, 4), (5, 7), (4, 7), (2, 9), (5, 6))


def fizz(rng: random.Random) -> Draft:
    a, b = rng.choice(FIZZ_PAIRS)
    one, two = (w.capitalize() for w in rng.sample(WORDS, 2))
    both = one + two
    template = _fill(
        "import sys\n\nn = int(sys.argv[1])\nfor i in {0}:\n    if {1}:\n        print('@both@')\n"
        "    elif {2}:\n        print('@one@')\n    elif {3}:\n        print('@two@')\n"
        "    else:\n        print(i)\n",
        both=both,
        one=one,
        two=two,
    )
    spots = (
        Spot(
            "range(1, n + 1)",
            (
                ("range(1, n)", "the last number is missing"),
                ("range(n)", "it starts at 0 and stops one short"),
            ),
        ),
        Spot(
            f"i % {a * b} == 0",
            (
                (f"i % {a} == 0 or i % {b} == 0", f"every multiple of {a} or {b} prints `{both}`"),
                (f"i % {a + b} == 0", f"`{both}` shows up on the wrong numbers"),
            ),
        ),
        Spot(
            f"i % {a} == 0",
            (
                (f"i % {a} == 1", f"`{one}` comes one after each multiple of {a}"),
                (f"i % {2 * a} == 0", f"some multiples of {a} are printed as numbers"),
            ),
        ),
        Spot(
            f"i % {b} == 0",
            (
                (f"i % {b} == 1", f"`{two}` comes one after each multiple of {b}"),
                (f"i % {2 * b} == 0", f"some multiples of {b} are printed as numbers"),
            ),
        ),
    )
    purpose = (
        f"prints the numbers from 1 up to and including N (its argument), one per line, but `{one}` for "
        f"multiples of {a}, `{two}` for multiples of {b} and `{both}` for multiples of both"
    )
    hidden = (str(a * b), str(a * b + a + 1), str(2 * a * b + 1))
    return Draft(
        ("fizz", "fizzbuzz", "counter", "chant"), purpose, template, spots, "", "", hidden, str(a * b)
    )


def temps(rng: random.Random) -> Draft:
    decimals, label = rng.choice((1, 2)), rng.choice(("avg", "mean", "average"))
    if rng.random() < 0.5:
        source, target = "Celsius", "Fahrenheit"
        convert = Spot(
            "t * 9 / 5 + 32",
            (
                ("t * 5 / 9 + 32", "the Fahrenheit values are far too low"),
                ("t * 9 / 5 - 32", "every Fahrenheit value is 64 degrees too low"),
            ),
        )
    else:
        source, target = "Fahrenheit", "Celsius"
        convert = Spot(
            "(t - 32) * 5 / 9",
            (
                ("t - 32 * 5 / 9", "the Celsius values are far too high"),
                ("(t - 32) * 9 / 5", "the Celsius values are too far from zero"),
            ),
        )
    average = Spot(
        "sum(converted) / len(converted)",
        (
            ("sum(converted) / (len(values) + 1)", "the average is too small"),
            ("sum(values) / len(values)", f"the average is of the {source} inputs, not the {target} values"),
        ),
    )
    template = (
        "import sys\n\nvalues = [float(x) for x in open(sys.argv[1]).read().split()]\n"
        "converted = [{0} for t in values]\nfor value in converted:\n"
        + _fill(
            "    print(f'{{value:.@d@f}}')\naverage = {1}\nprint(f'@label@={{average:.@d@f}}')\n",
            d=decimals,
            label=label,
        )
    )
    purpose = (
        f"reads {source} temperatures (one per line) from the file given as its argument and prints each in "
        f"{target} with {_decimals(decimals)}, then `{label}=` and the average {target} value with "
        f"{_decimals(decimals)}"
    )
    hidden = ("20\n", "36.6\n-10\n", "0\n0\n100\n", "98.6\n212\n")
    return Draft(
        ("temps", "convert", "thermo", "weather"),
        purpose,
        template,
        (convert, average),
        _numbers(rng, -30, 110),
        ".txt",
        hidden,
    )


def grades(rng: random.Random) -> Draft:
    name = rng.choice(("name", "student", "player", "member"))
    column = rng.choice(("score", "points", "grade", "marks"))
    threshold = rng.randint(40, 90)
    template = (
        "import csv\nimport sys\n\nrows = list(csv.DictReader(open(sys.argv[1])))\nfor row in rows:\n"
        "    if {0}:\n        print({1})\n"
    )
    spots = (
        Spot(
            f'float(row["{column}"]) >= {threshold}',
            (
                (f'float(row["{column}"]) > {threshold}', f"rows with exactly {threshold} are left out"),
                (f'row["{column}"] >= "{threshold}"', f"the {column} values are compared as text"),
            ),
        ),
        Spot(
            f'row["{name}"]',
            (
                (f'rows[0]["{name}"]', "it prints the first row's name over and over"),
                (f'row["{name}"].upper()', "the names come out in capitals"),
            ),
        ),
    )

    def table(scores: list[int]) -> str:
        people = rng.sample(USERS, len(scores))
        return f"{name},{column}\n" + "".join(f"{p},{s}\n" for p, s in zip(people, scores, strict=True))

    hidden = (
        table([threshold - 1, threshold, 100, 9]),
        table([5, threshold + 1, threshold, threshold - 3, 100]),
        table([100, threshold - 10, threshold]),
    )
    purpose = (
        f"prints, in file order, the `{name}` of every row of the CSV file given as its argument whose "
        f"`{column}` is at least {threshold}"
    )
    sample = table([rng.randint(0, 100) for _ in range(6)])
    return Draft(("grades", "passing", "honors", "roster"), purpose, template, spots, sample, ".csv", hidden)


KINDS: tuple[Callable[[random.Random], Draft], ...] = (stats, wordfreq, fizz, temps, grades)


def plant(draft: Draft, rng: random.Random, name: str) -> Program:
    """`draft` with one wrong version chosen per spot, such that for every set of broken spots each bug's
    wrong code occurs exactly once in the broken program and replacing it, one bug after another, gives the
    right program (so a literal sed per bug fixes it)."""
    choices = list(itertools.product(*(spot.wrongs for spot in draft.spots)))
    rng.shuffle(choices)
    for choice in choices:
        bugs = tuple(
            Bug(spot.right, wrong, symptom)
            for spot, (wrong, symptom) in zip(draft.spots, choice, strict=True)
        )
        program = Program(name, draft.purpose, draft.template, bugs, draft.sample, draft.hidden)
        if all(_sed_fixable(program, set(broken)) for broken in _subsets(len(bugs))):
            return program
    raise ValueError(f"no choice of bugs in {name} is fixable by literal substitutions")


def _subsets(count: int) -> list[tuple[int, ...]]:
    return [c for size in range(1, count + 1) for c in itertools.combinations(range(count), size)]


def _sed_fixable(program: Program, broken: set[int]) -> bool:
    text, reference = program.source(broken), program.source(set())
    for index in sorted(broken):
        bug = program.bugs[index]
        if "'" in bug.wrong + bug.right or text.count(bug.wrong) != 1:
            return False
        text = text.replace(bug.wrong, bug.right)
    return text == reference
