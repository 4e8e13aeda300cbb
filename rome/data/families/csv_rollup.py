"""data-processing: sums and group-by totals over a CSV file."""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import PRODUCTS, REGIONS

CHECK = """
import csv, json
kind = EXPECTED["kind"]
if kind == "sum":
    got = read("/app/answer.txt").split()
    if got != [str(EXPECTED["answer"])]:
        fail(f"/app/answer.txt should hold the single number {EXPECTED['answer']}, not {got[:5]}")
elif kind == "groups":
    rows = list(csv.reader(read("/app/totals.csv").splitlines()))
    if not rows or rows[0] != ["group", "total"]:
        fail(f"/app/totals.csv must start with the header group,total; it starts with {rows[:1]}")
    if rows[1:] != EXPECTED["answer"]:
        fail(f"/app/totals.csv rows differ from the expected totals (first rows {rows[1:4]})")
else:
    try:
        got = json.loads(read("/app/revenue.json"))
    except ValueError as exc:
        fail(f"/app/revenue.json is not JSON: {exc}")
    if not isinstance(got, dict) or set(got) != set(EXPECTED["answer"]):
        fail(f"/app/revenue.json keys should be {sorted(EXPECTED['answer'])}")
    for key, value in EXPECTED["answer"].items():
        if not isinstance(got[key], (int, float)) or abs(got[key] - value) > 0.005:
            fail(f"{key}: got {got[key]!r}, expected {value}")
"""


class CsvKnobs(Knobs):
    rows: int | None = Field(None, ge=2, le=5000, description="data rows in the CSV")
    groups: int | None = Field(None, ge=2, le=7, description="distinct groups (levels 2-3)")


class CsvRollup(Family):
    name = "csv-rollup"
    domain = "data-processing"
    summary = "sum a column, total per group, filtered revenue per group as JSON"
    knobs = CsvKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, CsvKnobs)
        level = knobs.level or 1
        return knobs.model_copy(
            update={
                "rows": knobs.rows or rng.randint(5 * level, 60 * level),
                "groups": knobs.groups or rng.randint(2, 3 + level),
            }
        )

    def build(self, rng: random.Random, knobs: CsvKnobs) -> Instance:  # type: ignore[override]
        assert knobs.rows is not None and knobs.groups is not None
        columns = ["id", "region", "product", "qty", "price", "status"]
        regions = rng.sample(REGIONS, knobs.groups)
        rows = []
        for index in range(knobs.rows):
            rows.append(
                {
                    "id": f"r{index + 1:04d}",
                    "region": rng.choice(regions),
                    "product": rng.choice(PRODUCTS),
                    "qty": rng.randint(1, 50),
                    "price": f"{rng.randint(50, 9999) / 100:.2f}",
                    "status": rng.choice(("ok", "ok", "ok", "refunded", "pending")),
                }
            )
        body = ",".join(columns) + "\n" + "".join(",".join(str(r[c]) for c in columns) + "\n" for r in rows)
        name = rng.choice(("orders", "sales", "ledger"))
        path = f"/app/{name}.csv"
        files = {path: FileSpec(body)}
        common = {"family": self.name, "seed": 0, "knobs": {}, "files": files, "check": CHECK}
        if knobs.level == 1:
            total = sum(int(r["qty"]) for r in rows)
            return Instance(
                **common,
                instruction=f"`{path}` is a CSV file with a header row. Write the sum of its `qty` column "
                "to `/app/answer.txt` (just the number).",
                steps=[
                    Step(
                        f"awk -F, 'NR > 1 {{s += $4}} END {{print s}}' {path} > /app/answer.txt",
                        "sum the qty column",
                    )
                ],
                expected={"kind": "sum", "answer": total, "intact": [path]},
                domain=self.domain,
                tags=["csv", "awk"],
                mistakes=[
                    Mistake(
                        0,
                        f"python3 -c \"import pandas; print(pandas.read_csv('{path}').qty.sum())\"",
                        "sum with pandas",
                    )
                ],
            )
        if knobs.level == 2:
            totals: dict[str, int] = {}
            for r in rows:
                totals[str(r["region"])] = totals.get(str(r["region"]), 0) + int(r["qty"])
            answer = [[k, str(v)] for k, v in sorted(totals.items())]
            return Instance(
                **common,
                instruction=f"`{path}` is a CSV file with a header row. Write `/app/totals.csv`: a header "
                "line `group,total`, then one line per distinct "
                "`region` with the sum of `qty` over its rows, "
                "sorted by region name.",
                steps=[
                    Step(f"head -3 {path}", "look at the columns"),
                    Step(
                        f"(echo group,total; awk -F, 'NR > 1 {{t[$2] += $4}} "
                        f'END {{for (k in t) print k "," t[k]}}\' '
                        f"{path} | sort) > /app/totals.csv",
                        "total qty per region",
                    ),
                ],
                expected={"kind": "groups", "answer": answer, "intact": [path]},
                domain=self.domain,
                tags=["csv", "awk", "group-by"],
                mistakes=[
                    Mistake(1, f"sort -t, -k2 {path} | datamash -t, groupby 2 sum 4", "group with datamash")
                ],
            )
        revenue: dict[str, Decimal] = {}
        for r in rows:
            revenue.setdefault(str(r["region"]), Decimal(0))
            if r["status"] == "ok":
                revenue[str(r["region"])] += int(r["qty"]) * Decimal(str(r["price"]))
        answer_json = {
            k: float(v.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)) for k, v in sorted(revenue.items())
        }
        script = (
            "python3 - <<'PY'\nimport csv, json\nfrom decimal import Decimal\ntotals = {}\n"
            f"for row in csv.DictReader(open('{path}')):\n"
            "    totals.setdefault(row['region'], Decimal(0))\n"
            "    if row['status'] == 'ok':\n"
            "        totals[row['region']] += int(row['qty']) * Decimal(row['price'])\n"
            "json.dump({k: float(round(v, 2)) for k, v in totals.items()}, "
            "open('/app/revenue.json', 'w'))\nPY"
        )
        return Instance(
            **common,
            instruction=f"`{path}` is a CSV file with a header row. Write `/app/revenue.json`: a JSON object "
            "mapping every `region` in the file to its revenue, "
            "the sum of `qty * price` over the region's rows "
            "whose `status` is `ok`, rounded to 2 decimals. A region with no `ok` row maps to 0.",
            steps=[
                Step(f"head -5 {path}", "look at the columns"),
                Step(script, "compute revenue per region"),
                Step("cat /app/revenue.json", "check the result"),
            ],
            expected={"kind": "revenue", "answer": answer_json, "intact": [path]},
            domain=self.domain,
            tags=["csv", "python", "json"],
            mistakes=[
                Mistake(
                    1,
                    f"python3 -c \"import csv; print(next(csv.DictReader(open('{path}')))['revenue'])\"",
                    "read the revenue column",
                )
            ],
        )
