"""scientific-computing: a mean, a least-squares line, a trapezoid integral of unsorted samples."""

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
        values = [float(got["slope"]), float(got["intercept"])]
    except (ValueError, KeyError, TypeError) as exc:
        fail(f"{EXPECTED['output']} must be JSON with slope and intercept ({exc})")
else:
    try:
        values = [float(text.strip())]
    except ValueError:
        fail(f"{EXPECTED['output']} should hold one number, not {text[:40]!r}")
for got_value, want in zip(values, EXPECTED["answer"]):
    if abs(got_value - want) > EXPECTED["tolerance"] * max(1.0, abs(want)):
        fail(f"got {got_value}, expected {want} (tolerance {EXPECTED['tolerance']})")
"""


class NumericKnobs(Knobs):
    points: int | None = Field(None, ge=3, le=5000, description="samples in the data file")


class Numeric(Family):
    name = "numeric"
    domain = "scientific-computing"
    summary = "mean of a column, least-squares fit, trapezoid integral of unsorted samples"
    knobs = NumericKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, NumericKnobs)
        return knobs.model_copy(update={"points": knobs.points or rng.randint(8, 30 * (knobs.level or 1))})

    def build(self, rng: random.Random, knobs: NumericKnobs) -> Instance:  # type: ignore[override]
        assert knobs.points is not None
        n = knobs.points
        common = {"family": self.name, "seed": 0, "knobs": {}, "check": CHECK, "domain": self.domain}
        if knobs.level == 1:
            values = [round(rng.uniform(-50, 150), 2) for _ in range(n)]
            path = "/app/readings.txt"
            mean = sum(values) / n
            return Instance(
                **common,
                instruction=f"`{path}` holds one number per line. Write their mean to `/app/answer.txt` "
                "(at least 3 decimals).",
                files={path: FileSpec("".join(f"{v}\n" for v in values))},
                steps=[
                    Step(
                        f"awk '{{s += $1}} END {{printf \"%.6f\\n\", s / NR}}' {path} > /app/answer.txt",
                        "mean of the readings",
                    )
                ],
                expected={
                    "kind": "mean",
                    "output": "/app/answer.txt",
                    "answer": [mean],
                    "tolerance": 1e-3,
                    "intact": [path],
                },
                tags=["awk", "statistics"],
                mistakes=[
                    Mistake(
                        0,
                        f"python3 -c \"import numpy; print(numpy.loadtxt('{path}').mean())\"",
                        "mean with numpy",
                    )
                ],
            )
        xs = sorted(rng.sample(range(0, 20 * n), n))
        slope, intercept = rng.uniform(-3, 3), rng.uniform(-10, 10)
        rows = [(x / 10, slope * x / 10 + intercept + rng.gauss(0, 0.5)) for x in xs]
        if knobs.level == 2:
            body = "x,y\n" + "".join(f"{x:.4f},{y:.4f}\n" for x, y in rows)
            script = (
                "python3 - <<'PY'\nimport csv, json\n"
                "rows = [(float(r['x']), float(r['y'])) for r in csv.DictReader(open('/app/samples.csv'))]\n"
                "n = len(rows)\nmx = sum(x for x, _ in rows) / n\nmy = sum(y for _, y in rows) / n\n"
                "b = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)\n"
                "json.dump({'slope': b, 'intercept': my - b * mx}, open('/app/fit.json', 'w'))\nPY"
            )
            # The expected values come from the rounded numbers the file holds.
            parsed = [(float(f"{x:.4f}"), float(f"{y:.4f}")) for x, y in rows]
            mx = sum(x for x, _ in parsed) / n
            my = sum(y for _, y in parsed) / n
            b = sum((x - mx) * (y - my) for x, y in parsed) / sum((x - mx) ** 2 for x, _ in parsed)
            a = my - b * mx
            return Instance(
                **common,
                instruction=(
                    "`/app/samples.csv` has columns `x,y`. Fit "
                    "the least-squares line y = slope * x + "
                    'intercept and write `/app/fit.json` as {"slope": ..., "intercept": ...}.'
                ),
                files={"/app/samples.csv": FileSpec(body)},
                steps=[
                    Step("head -3 /app/samples.csv", "look at the data"),
                    Step(script, "fit the line"),
                    Step("cat /app/fit.json", "check"),
                ],
                expected={
                    "kind": "fit",
                    "output": "/app/fit.json",
                    "answer": [b, a],
                    "tolerance": 1e-4,
                    "intact": ["/app/samples.csv"],
                },
                tags=["python", "regression"],
                mistakes=[Mistake(1, 'python3 -c "import numpy; numpy.polyfit"', "fit with numpy")],
            )
        shuffled = list(rows)
        rng.shuffle(shuffled)
        body = "t,v\n" + "".join(f"{x:.4f},{y:.4f}\n" for x, y in shuffled)
        parsed = sorted((float(f"{x:.4f}"), float(f"{y:.4f}")) for x, y in rows)
        integral = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in pairwise(parsed))
        script = (
            "python3 - <<'PY'\nimport csv\n"
            "pts = sorted((float(r['t']), float(r['v'])) for r in csv.DictReader(open('/app/signal.csv')))\n"
            "area = sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(pts, pts[1:]))\n"
            "open('/app/answer.txt', 'w').write(f'{area:.6f}\\n')\nPY"
        )
        return Instance(
            **common,
            instruction=(
                "`/app/signal.csv` holds samples `t,v` of a "
                "signal, in no particular order. Write the "
                "integral of v over t, from the smallest to the "
                "largest t, by the trapezoid rule over consecutive "
                "samples, to `/app/answer.txt` (at least 4 decimals)."
            ),
            files={"/app/signal.csv": FileSpec(body)},
            steps=[
                Step("head -3 /app/signal.csv", "look at the data"),
                Step(script, "integrate"),
                Step("cat /app/answer.txt", "check"),
            ],
            expected={
                "kind": "integral",
                "output": "/app/answer.txt",
                "answer": [integral],
                "tolerance": 1e-5,
                "intact": ["/app/signal.csv"],
            },
            tags=["python", "integration"],
            mistakes=[Mistake(1, 'python3 -c "from scipy.integrate import trapezoid"', "use scipy")],
        )
