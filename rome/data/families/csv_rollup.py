"""data-processing: a column statistic, group-by totals and filtered per-group revenue over a CSV file.

Every instance draws from its seed what the agent has to read: the file's folder and name, the order of its
columns, the column to aggregate or group by, the status to count or keep, and the output file (and, for the
grouped outputs, its header or JSON keys).
"""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import PRODUCTS, REGIONS

CHECK = """
import csv, json
kind = EXPECTED["kind"]
out = EXPECTED["output"]
if kind == "number":
    got = read(out).split()
    try:
        value = float(got[0]) if len(got) == 1 else None
    except ValueError:
        value = None
    if value is None or abs(value - EXPECTED["answer"]) > 0.005:
        fail(f"{out} should hold the single number {EXPECTED['answer']}, not {got[:5]}")
elif kind == "groups":
    rows = list(csv.reader(read(out).splitlines()))
    if not rows or rows[0] != EXPECTED["header"]:
        fail(f"{out} must start with the header {','.join(EXPECTED['header'])}; it starts with {rows[:1]}")
    if rows[1:] != EXPECTED["answer"]:
        fail(f"{out} rows differ from the expected totals (first rows {rows[1:4]})")
else:
    try:
        got = json.loads(read(out))
    except ValueError as exc:
        fail(f"{out} is not JSON: {exc}")
    if not isinstance(got, dict) or set(got) != set(EXPECTED["answer"]):
        fail(f"{out} keys should be {sorted(EXPECTED['answer'])}")
    for key, value in EXPECTED["answer"].items():
        if not isinstance(got[key], (int, float)) or abs(got[key] - value) > 0.005:
            fail(f"{key}: got {got[key]!r}, expected {value}")
"""

FILES = ("orders", "sales", "ledger", "invoices", "shipments", "purchases")
FOLDERS = ("/app", "/app/data", "/app/exports")
OUTPUTS = ("answer.txt", "total.txt", "result.txt", "value.txt")
# Numeric columns: name -> (low, high, decimals) of its values.
NUMBERS = {"qty": (1, 50, 0), "units": (1, 40, 0), "weight": (1, 900, 1), "price": (50, 9999, 2)}
# Categorical columns: name -> its values (the statuses double as filter values).
CATEGORIES = {"region": REGIONS, "product": PRODUCTS, "channel": ("web", "store", "phone", "partner", "mail")}
STATUSES = ("ok", "refunded", "pending", "cancelled")
# Level 1's statistics over one column: wording, and what follows awk's `NR > 1` (the data rows).
STATISTICS = {
    "sum": ("the sum of its `{c}` column", '{{s += ${k}}} END {{printf "%.2f\\n", s}}'),
    "max": ("the largest value in its `{c}` column", "{{if (NR == 2 || ${k} > m) m = ${k}}} END {{print m}}"),
    "min": (
        "the smallest value in its `{c}` column",
        "{{if (NR == 2 || ${k} < m) m = ${k}}} END {{print m}}",
    ),
    "count": ("how many rows have `status` equal to `{v}`", '&& ${k} == "{v}" {{n++}} END {{print n + 0}}'),
}


class CsvKnobs(Knobs):
    rows: int | None = Field(None, ge=2, le=5000, description="data rows in the CSV")
    groups: int | None = Field(None, ge=2, le=5, description="distinct groups (levels 2-3)")


def _value(rng: random.Random, column: str) -> str:
    low, high, decimals = NUMBERS[column]
    if decimals == 0:
        return str(rng.randint(low, high))
    return f"{rng.randint(low * 10**decimals, high * 10**decimals) / 10**decimals:.{decimals}f}"


class CsvRollup(Family):
    name = "csv-rollup"
    domain = "data-processing"
    summary = "a column statistic, total per group, filtered revenue per group as JSON"
    knobs = CsvKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, CsvKnobs)
        level = knobs.level or 1
        return knobs.model_copy(
            update={
                "rows": knobs.rows or rng.randint(5 * level, 60 * level),
                "groups": knobs.groups or rng.randint(2, min(5, 3 + level)),
            }
        )

    def build(self, rng: random.Random, knobs: CsvKnobs) -> Instance:  # type: ignore[override]
        assert knobs.rows is not None and knobs.groups is not None
        group_by = rng.choice(tuple(CATEGORIES))
        columns = ["id", group_by, "status", *NUMBERS]
        rng.shuffle(columns)
        groups = rng.sample(CATEGORIES[group_by], knobs.groups)
        rows = [
            {
                "id": f"r{index + 1:04d}",
                group_by: rng.choice(groups),
                "status": rng.choice(("ok", "ok", *STATUSES)),
                **{column: _value(rng, column) for column in NUMBERS},
            }
            for index in range(knobs.rows)
        ]
        body = ",".join(columns) + "\n" + "".join(",".join(r[c] for c in columns) + "\n" for r in rows)
        path = f"{rng.choice(FOLDERS)}/{rng.choice(FILES)}.csv"
        table = _Table(path, columns, rows)
        if knobs.level == 1:
            return self._statistic(rng, table, body)
        if knobs.level == 2:
            return self._totals(rng, table, body, group_by)
        return self._revenue(rng, table, body, group_by)

    def _instance(self, table: _Table, body: str, **fields: object) -> Instance:
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            files={table.path: FileSpec(body)},
            check=CHECK,
            domain=self.domain,
            **fields,  # type: ignore[arg-type]
        )

    def _statistic(self, rng: random.Random, table: _Table, body: str) -> Instance:
        kind = rng.choice(tuple(STATISTICS))
        column = "status" if kind == "count" else rng.choice(tuple(NUMBERS))
        status = rng.choice(STATUSES)
        values = [float(r[column]) for r in table.rows] if kind != "count" else []
        answer = {
            "sum": sum(values),
            "max": max(values or [0.0]),
            "min": min(values or [0.0]),
            "count": float(sum(1 for r in table.rows if r["status"] == status)),
        }[kind]
        out = f"/app/{rng.choice(OUTPUTS)}"
        asked, action = STATISTICS[kind]
        action = action.format(k=table.index(column), v=status)
        return self._instance(
            table,
            body,
            instruction=f"`{table.path}` is a CSV file with a header row. Write "
            f"{asked.format(c=column, v=status)} to `{out}` (just the number).",
            steps=[
                Step(f"head -1 {table.path}", "find the column"),
                Step(f"awk -F, 'NR > 1 {action}' {table.path} > {out}", f"{kind} of {column}"),
            ],
            expected={"kind": "number", "output": out, "answer": round(answer, 4), "intact": [table.path]},
            tags=["csv", "awk"],
            variant=kind,
            mistakes=[
                Mistake(
                    1,
                    f"python3 -c \"import pandas; print(pandas.read_csv('{table.path}').{column}.{kind}())\"",
                    f"{kind} with pandas",
                )
            ],
        )

    def _totals(self, rng: random.Random, table: _Table, body: str, group_by: str) -> Instance:
        column = rng.choice(("qty", "units"))
        out = f"/app/{rng.choice(('totals', 'by_' + group_by, 'summary', 'rollup'))}.csv"
        totals: dict[str, int] = {}
        for r in table.rows:
            totals[r[group_by]] = totals.get(r[group_by], 0) + int(r[column])
        header = [group_by, f"total_{column}"]
        g, v = table.index(group_by), table.index(column)
        return self._instance(
            table,
            body,
            instruction=f"`{table.path}` is a CSV file with a header row. Write `{out}`: a header line "
            f"`{','.join(header)}`, then one line per distinct `{group_by}` with the sum of `{column}` over "
            f"its rows, sorted by {group_by}.",
            steps=[
                Step(f"head -3 {table.path}", "look at the columns"),
                Step(
                    f"(echo {','.join(header)}; awk -F, 'NR > 1 {{t[${g}] += ${v}}} "
                    f'END {{for (k in t) print k "," t[k]}}\' {table.path} | sort) > {out}',
                    f"total {column} per {group_by}",
                ),
            ],
            expected={
                "kind": "groups",
                "output": out,
                "header": header,
                "answer": [[k, str(t)] for k, t in sorted(totals.items())],
                "intact": [table.path],
            },
            tags=["csv", "awk", "group-by"],
            mistakes=[
                Mistake(
                    1,
                    f"sort -t, -k{g} {table.path} | datamash -t, groupby {g} sum {v}",
                    "group with datamash",
                )
            ],
        )

    def _revenue(self, rng: random.Random, table: _Table, body: str, group_by: str) -> Instance:
        status = rng.choice(STATUSES)
        count = rng.choice(("qty", "units"))
        out = f"/app/{rng.choice(('revenue', 'income', group_by + '_revenue'))}.json"
        revenue: dict[str, Decimal] = {}
        for r in table.rows:
            revenue.setdefault(r[group_by], Decimal(0))
            if r["status"] == status:
                revenue[r[group_by]] += int(r[count]) * Decimal(r["price"])
        answer = {
            k: float(v.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)) for k, v in sorted(revenue.items())
        }
        script = (
            "python3 - <<'PY'\nimport csv, json\nfrom decimal import Decimal\ntotals = {}\n"
            f"for row in csv.DictReader(open('{table.path}')):\n"
            f"    totals.setdefault(row['{group_by}'], Decimal(0))\n"
            f"    if row['status'] == '{status}':\n"
            f"        totals[row['{group_by}']] += int(row['{count}']) * Decimal(row['price'])\n"
            f"json.dump({{k: float(round(v, 2)) for k, v in totals.items()}}, open('{out}', 'w'))\nPY"
        )
        return self._instance(
            table,
            body,
            instruction=f"`{table.path}` is a CSV file with a header row. Write `{out}`: a JSON object "
            f"mapping every `{group_by}` in the file to its revenue, the sum of `{count} * price` over its "
            f"rows whose `status` is `{status}`, rounded to 2 decimals. A {group_by} with no such row "
            "maps to 0.",
            steps=[
                Step(f"head -5 {table.path}", "look at the columns"),
                Step(script, f"revenue per {group_by}"),
                Step(f"cat {out}", "check the result"),
            ],
            expected={"kind": "revenue", "output": out, "answer": answer, "intact": [table.path]},
            tags=["csv", "python", "json"],
            mistakes=[
                Mistake(
                    1,
                    f"python3 -c \"import csv; print(next(csv.DictReader(open('{table.path}')))"
                    "['revenue'])\"",
                    "read the revenue column",
                )
            ],
        )


class _Table:
    """The generated CSV: its path, column order and rows (values as the file writes them)."""

    def __init__(self, path: str, columns: list[str], rows: list[dict[str, str]]) -> None:
        self.path, self.columns, self.rows = path, columns, rows

    def index(self, column: str) -> int:
        """awk's field number of `column`."""
        return self.columns.index(column) + 1
