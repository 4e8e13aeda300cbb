"""files-and-text: count and extract lines from text and log files with the usual shell tools."""

from __future__ import annotations

import random

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import USERS, WORDS, sentence

CHECK = """
got = read("/app/answer.txt").split()
if EXPECTED["kind"] == "count":
    if got != [str(EXPECTED["answer"])]:
        fail(f"/app/answer.txt should hold the single number {EXPECTED['answer']}, not {got[:5]}")
elif got != EXPECTED["answer"]:
    fail(f"/app/answer.txt should list {len(EXPECTED['answer'])} names, one per line, sorted; got {got[:8]}")
"""


class TextKnobs(Knobs):
    files: int | None = Field(None, ge=1, le=8, description="log files (levels 2-3)")
    lines: int | None = Field(None, ge=3, le=2000, description="lines per file")


class TextSearch(Family):
    name = "text-search"
    domain = "files-and-text"
    summary = "count lines, match a marker in logs, extract and dedupe fields"
    knobs = TextKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, TextKnobs)
        level = knobs.level or 1
        return knobs.model_copy(
            update={
                "files": knobs.files or (1 if level == 1 else rng.randint(2, 2 + 2 * level)),
                "lines": knobs.lines or rng.randint(5 * level, 40 * level),
            }
        )

    def build(self, rng: random.Random, knobs: TextKnobs) -> Instance:  # type: ignore[override]
        assert knobs.files is not None and knobs.lines is not None
        if knobs.level == 1:
            return self._line_count(rng, knobs.lines)
        return self._logs(rng, knobs.level or 2, knobs.files, knobs.lines)

    def _line_count(self, rng: random.Random, lines: int) -> Instance:
        name = f"{rng.choice(WORDS)}.txt"
        text = "".join(sentence(rng, rng.randint(2, 9)) + "\n" for _ in range(lines))
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=(
                f"How many lines does `/app/{name}` have? Write just that number to `/app/answer.txt`."
            ),
            files={f"/app/{name}": FileSpec(text)},
            steps=[Step(f"wc -l < /app/{name} > /app/answer.txt", f"count the lines of {name}")],
            check=CHECK,
            expected={"kind": "count", "answer": lines, "intact": [f"/app/{name}"]},
            domain=self.domain,
            tags=["wc"],
            mistakes=[Mistake(0, f"wc -l /app/{name.removesuffix('.txt')}.log", "count the lines")],
        )

    def _logs(self, rng: random.Random, level: int, files: int, lines: int) -> Instance:
        marker = rng.choice(("ERROR", "FATAL", "DENIED", "TIMEOUT"))
        levels = ["INFO", "DEBUG", "WARN", marker, f"{marker}S_CLEARED"]
        contents: dict[str, str] = {}
        matching: list[str] = []
        for index in range(files):
            sub = "" if level == 2 or index % 2 == 0 else f"{rng.choice(WORDS)}/"
            path = f"/app/logs/{sub}{rng.choice(WORDS)}-{index}.log"
            rows = []
            for _ in range(lines):
                tag = rng.choice(levels)
                user = rng.choice(USERS)
                row = f"2026-03-{rng.randint(1, 28):02d} {tag} user={user} {sentence(rng, rng.randint(1, 5))}"
                rows.append(row)
                if tag == marker:
                    matching.append(user)
            contents[path] = "\n".join(rows) + "\n"
            decoy = f"/app/logs/{sub}notes-{index}.txt"
            contents[decoy] = f"{marker} user=nobody this file is not a log\n"
        intact = sorted(contents)
        files_spec = {path: FileSpec(text) for path, text in contents.items()}
        if level == 2:
            count = len(matching)
            return Instance(
                family=self.name,
                seed=0,
                knobs={},
                instruction=(
                    "The `.log` files in `/app/logs` have one event "
                    "per line; the second field is the level. "
                    f"Count the lines whose level is exactly `{marker}` "
                    "over all the `.log` files (ignore other "
                    f"files) and write that number to `/app/answer.txt`."
                ),
                files=files_spec,
                steps=[
                    Step("ls /app/logs", "see which files there are"),
                    Step(
                        f"cat /app/logs/*.log | awk '$2 == \"{marker}\"' | wc -l > /app/answer.txt",
                        f"count the {marker} lines",
                    ),
                ],
                check=CHECK,
                expected={"kind": "count", "answer": count, "intact": intact},
                domain=self.domain,
                tags=["grep", "awk", "logs"],
                mistakes=[Mistake(1, f"grep -c {marker} /app/logs/*.logs", "count the matching lines")],
            )
        names = sorted(set(matching))
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=(
                f"`/app/logs` and its subfolders hold `.log` files, one event per line: a date, a level, "
                f"`user=NAME`, then text. Write to `/app/answer.txt` the distinct user names that appear in "
                f"lines whose level is exactly `{marker}`, in any "
                "`.log` file at any depth (other files do not "
                f"count): sorted, one per line."
            ),
            files=files_spec,
            steps=[
                Step("find /app/logs -type f | head -20", "see the layout"),
                Step(
                    f"find /app/logs -name '*.log' -exec cat {{}} + | awk '$2 == \"{marker}\" {{print $3}}' "
                    "| cut -d= -f2 | sort -u > /app/answer.txt",
                    "extract and dedupe the users",
                ),
                Step("cat /app/answer.txt", "check the result"),
            ],
            check=CHECK,
            expected={"kind": "names", "answer": names, "intact": intact},
            domain=self.domain,
            tags=["find", "awk", "sort", "logs"],
            mistakes=[
                Mistake(
                    1, f"grep -rh --include='*.log' ' {marker} ' /app/log | head", "look at matching lines"
                ),
            ],
        )
