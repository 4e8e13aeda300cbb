"""scientific-computing: a statistic of a column of numbers, a least-squares line, a trapezoid integral.

Every instance draws from its seed what the agent has to read in the instruction: the data file's folder and
name, the statistic asked for (and its threshold), the column names, and the output file.
"""

from __future__ import annotations

import random
from itertools import pairwise

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step

CHECK = """
import json
text = read(EXPECTED["output"])
if EXPECTED["kind"] == "fit":
    try:
        got = json.loads(text)
        values = [float(got[EXPECTED["keys"][0]]), float(got[EXPECTED["keys"][1]])]
    except (ValueError, KeyError, TypeError) as exc:
        fail(f"{EXPECTED['output']} must be a JSON object with keys {EXPECTED['keys']} ({exc})")
else:
    try:
        values = [float(text.strip())]
    except ValueError:
        fail(f"{EXPECTED['output']} should hold one number, not {text[:40]!r}")
for got_value, want in zip(values, EXPECTED["answer"]):
    if abs(got_value - want) > EXPECTED["tolerance"] * max(1.0, abs(want)):
        fail(f"got {got_value}, expected {want} (tolerance {EXPECTED['tolerance']})")
"""

FOLDERS = ("/app", "/app/data", "/app/input", "/app/lab")
SERIES = ("readings", "samples", "measurements", "values", "latencies", "temps", "weights", "scores")
EXTENSIONS = (".txt", ".dat")
OUTPUTS = ("answer.txt", "result.txt", "out.txt", "stat.txt")
# Column-name pairs for the two-column files (levels 2-3): (input, output).
PAIRS = (
    ("x", "y"),
    ("t", "v"),
    ("time", "value"),
    ("dose", "response"),
    ("load", "latency"),
    ("hour", "temp"),
)
FIT_KEYS = (("slope", "intercept"), ("a", "b"), ("m", "c"), ("gradient", "offset"))
TABLES = ("samples", "points", "observations", "pairs", "signal", "trace")

# Level 1's statistics: instruction wording and the one-command oracle (PATH, OUT and T filled in).
STATISTICS = {
    "mean": (
        "the mean of the numbers",
        "awk '{{s += $1}} END {{printf \"%.6f\\n\", s / NR}}' {path} > {out}",
    ),
    "sum": ("the sum of the numbers", "awk '{{s += $1}} END {{printf \"%.6f\\n\", s}}' {path} > {out}"),
    "min": ("the smallest number", "sort -g {path} | head -1 > {out}"),
    "max": ("the largest number", "sort -g {path} | tail -1 > {out}"),
    "above": ("how many numbers are greater than {t}", "awk '$1 > {t}' {path} | wc -l > {out}"),
}


class NumericKnobs(Knobs):
    points: int | None = Field(None, ge=3, le=5000, description="samples in the data file")


class Numeric(Family):
    name = "numeric"
    domain = "scientific-computing"
    summary = "a statistic of a number column, least-squares fit, trapezoid integral of unsorted samples"
    knobs = NumericKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, NumericKnobs)
        return knobs.model_copy(update={"points": knobs.points or rng.randint(8, 30 * (knobs.level or 1))})

    def build(self, rng: random.Random, knobs: NumericKnobs) -> Instance:  # type: ignore[override]
        assert knobs.points is not None
        if knobs.level == 1:
            return self._statistic(rng, knobs.points)
        return self._fit(rng, knobs.points) if knobs.level == 2 else self._integral(rng, knobs.points)

    def _common(self) -> dict[str, object]:
        return {"family": self.name, "seed": 0, "knobs": {}, "check": CHECK, "domain": self.domain}

    def _statistic(self, rng: random.Random, n: int) -> Instance:
        values = [round(rng.uniform(-50, 150), 2) for _ in range(n)]
        path = f"{rng.choice(FOLDERS)}/{rng.choice(SERIES)}{rng.choice(EXTENSIONS)}"
        out = f"/app/{rng.choice(OUTPUTS)}"
        kind = rng.choice(tuple(STATISTICS))
        threshold = rng.randint(-20, 120)
        answer = {
            "mean": sum(values) / n,
            "sum": sum(values),
            "min": min(values),
            "max": max(values),
            "above": float(sum(1 for v in values if v > threshold)),
        }[kind]
        asked, command = STATISTICS[kind]
        decimals = " (at least 3 decimals)" if kind in ("mean", "sum") else ""
        return Instance(
            **self._common(),  # type: ignore[arg-type]
            instruction=f"`{path}` holds one number per line. Write {asked.format(t=threshold)} to `{out}`"
            f"{decimals}.",
            files={path: FileSpec("".join(f"{v}\n" for v in values))},
            steps=[Step(command.format(path=path, out=out, t=threshold), asked.format(t=threshold))],
            expected={"kind": kind, "output": out, "answer": [answer], "tolerance": 1e-4, "intact": [path]},
            tags=["awk", "statistics"],
            variant=kind,
            mistakes=[
                Mistake(
                    0,
                    f"python3 -c \"import numpy; print(numpy.loadtxt('{path}').{kind}())\"",
                    f"{kind} with numpy",
                )
            ],
        )

    def _rows(self, rng: random.Random, n: int) -> list[tuple[float, float]]:
        xs = sorted(rng.sample(range(0, 20 * n), n))
        slope, intercept = rng.uniform(-3, 3), rng.uniform(-10, 10)
        # The expected values come from the rounded numbers the file holds.
        return [
            (float(f"{x / 10:.4f}"), float(f"{slope * x / 10 + intercept + rng.gauss(0, 0.5):.4f}"))
            for x in xs
        ]

    def _fit(self, rng: random.Random, n: int) -> Instance:
        rows = self._rows(rng, n)
        (cx, cy), (kb, ka) = rng.choice(PAIRS), rng.choice(FIT_KEYS)
        swapped = rng.random() < 0.5  # the output column may come first in the file
        path = f"{rng.choice(FOLDERS)}/{rng.choice(TABLES)}.csv"
        out = f"/app/{rng.choice(('fit', 'line', 'model', 'trend'))}.json"
        header = f"{cy},{cx}" if swapped else f"{cx},{cy}"
        body = (
            header
            + "\n"
            + "".join(f"{y:.4f},{x:.4f}\n" if swapped else f"{x:.4f},{y:.4f}\n" for x, y in rows)
        )
        mx = sum(x for x, _ in rows) / n
        my = sum(y for _, y in rows) / n
        b = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
        script = (
            "python3 - <<'PY'\nimport csv, json\n"
            f"rows = [(float(r['{cx}']), float(r['{cy}'])) for r in csv.DictReader(open('{path}'))]\n"
            "n = len(rows)\nmx = sum(x for x, _ in rows) / n\nmy = sum(y for _, y in rows) / n\n"
            "b = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)\n"
            f"json.dump({{'{kb}': b, '{ka}': my - b * mx}}, open('{out}', 'w'))\nPY"
        )
        return Instance(
            **self._common(),  # type: ignore[arg-type]
            instruction=(
                f"`{path}` has columns `{header}`. Fit the least-squares line {cy} = {kb} * {cx} + {ka} and "
                f'write `{out}` as {{"{kb}": ..., "{ka}": ...}}.'
            ),
            files={path: FileSpec(body)},
            steps=[
                Step(f"head -3 {path}", "look at the data"),
                Step(script, "fit the line"),
                Step(f"cat {out}", "check"),
            ],
            expected={
                "kind": "fit",
                "output": out,
                "keys": [kb, ka],
                "answer": [b, my - b * mx],
                "tolerance": 1e-4,
                "intact": [path],
            },
            tags=["python", "regression"],
            mistakes=[Mistake(1, 'python3 -c "import numpy; numpy.polyfit"', "fit with numpy")],
        )

    def _integral(self, rng: random.Random, n: int) -> Instance:
        rows = self._rows(rng, n)
        cx, cy = rng.choice(PAIRS)
        shuffled = list(rows)
        rng.shuffle(shuffled)
        path = f"{rng.choice(FOLDERS)}/{rng.choice(TABLES)}.csv"
        out = f"/app/{rng.choice(OUTPUTS)}"
        body = f"{cx},{cy}\n" + "".join(f"{x:.4f},{y:.4f}\n" for x, y in shuffled)
        integral = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in pairwise(rows))
        script = (
            "python3 - <<'PY'\nimport csv\n"
            f"pts = sorted((float(r['{cx}']), float(r['{cy}'])) for r in csv.DictReader(open('{path}')))\n"
            "area = sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(pts, pts[1:]))\n"
            f"open('{out}', 'w').write(f'{{area:.6f}}\\n')\nPY"
        )
        return Instance(
            **self._common(),  # type: ignore[arg-type]
            instruction=(
                f"`{path}` holds samples `{cx},{cy}` of a signal, in no particular order. Write the integral "
                f"of {cy} over {cx}, from the smallest to the largest {cx}, by the trapezoid rule over "
                f"consecutive samples, to `{out}` (at least 4 decimals)."
            ),
            files={path: FileSpec(body)},
            steps=[
                Step(f"head -3 {path}", "look at the data"),
                Step(script, "integrate"),
                Step(f"cat {out}", "check"),
            ],
            expected={
                "kind": "integral",
                "output": out,
                "answer": [integral],
                "tolerance": 1e-5,
                "intact": [path],
            },
            tags=["python", "integration"],
            mistakes=[Mistake(1, 'python3 -c "from scipy.integrate import trapezoid"', "use scipy")],
        )
