"""files-and-text: count and extract lines from text and log files with the usual shell tools.

Every instance draws from its seed what the agent has to read: the file or folder, the word or level to
match, whether matching lines or the others count, the field to extract, and the output file.
"""

from __future__ import annotations

import random

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import USERS, WORDS, sentence

CHECK = """
out = EXPECTED["output"]
got = read(out).split()
if EXPECTED["kind"] == "count":
    if got != [str(EXPECTED["answer"])]:
        fail(f"{out} should hold the single number {EXPECTED['answer']}, not {got[:5]}")
elif got != EXPECTED["answer"]:
    fail(f"{out} should list {len(EXPECTED['answer'])} values, one per line, sorted; got {got[:8]}")
"""

TEXT_FOLDERS = ("/app", "/app/notes", "/app/docs", "/app/text")
TEXT_EXTENSIONS = (".txt", ".md", ".log")
LOG_FOLDERS = ("/app/logs", "/app/var/log", "/app/audit", "/app/service/logs")
OUTPUTS = ("answer.txt", "count.txt", "result.txt", "lines.txt")
MARKERS = ("ERROR", "FATAL", "DENIED", "TIMEOUT", "CRITICAL", "REJECTED")
KEYS = ("user", "account", "owner", "actor")
# Level 1's questions about one text file: wording and the one-command oracle.
QUESTIONS = {
    "lines": ("How many lines does `{path}` have?", "wc -l < {path} > {out}"),
    "with": ("How many lines of `{path}` contain the word `{word}`?", "grep -c {word} {path} > {out}"),
    "without": (
        "How many lines of `{path}` do not contain the word `{word}`?",
        "grep -vc {word} {path} > {out}",
    ),
}


class TextKnobs(Knobs):
    files: int | None = Field(None, ge=1, le=8, description="log files (levels 2-3)")
    lines: int | None = Field(None, ge=3, le=2000, description="lines per file")


class TextSearch(Family):
    name = "text-search"
    domain = "files-and-text"
    summary = "count lines (with or without a word), count a level in logs, extract and dedupe a field"
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
        path = f"{rng.choice(TEXT_FOLDERS)}/{rng.choice(WORDS)}{rng.choice(TEXT_EXTENSIONS)}"
        out = f"/app/{rng.choice(OUTPUTS)}"
        kind = rng.choice(tuple(QUESTIONS))
        rows = [sentence(rng, rng.randint(2, 9)) for _ in range(lines)]
        # A word that some lines hold and some do not: grep exits 1 when it counts nothing.
        words = [w for w in WORDS if 0 < sum(1 for row in rows if w in row) < lines]
        if not words:
            kind = "lines"
        word = rng.choice(words or WORDS)
        matching = sum(1 for row in rows if word in row)
        answer = {"lines": lines, "with": matching, "without": lines - matching}[kind]
        question, command = QUESTIONS[kind]
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=f"{question.format(path=path, word=word)} Write just that number to `{out}`.",
            files={path: FileSpec("".join(row + "\n" for row in rows))},
            steps=[
                Step(command.format(path=path, word=word, out=out), question.format(path=path, word=word))
            ],
            check=CHECK,
            expected={"kind": "count", "output": out, "answer": answer, "intact": [path]},
            domain=self.domain,
            tags=["wc", "grep"],
            variant=kind,
            mistakes=[Mistake(0, f"wc -l {path.rsplit('.', 1)[0]}.bak", "count the lines")],
        )

    def _logs(self, rng: random.Random, level: int, files: int, lines: int) -> Instance:
        marker = rng.choice(MARKERS)
        key = rng.choice(KEYS)
        root = rng.choice(LOG_FOLDERS)
        out = f"/app/{rng.choice(OUTPUTS)}"
        level_first = rng.random() < 0.5  # lines are `LEVEL DATE ...` instead of `DATE LEVEL ...`
        levels = ["INFO", "DEBUG", "WARN", marker, f"{marker}S_CLEARED"]
        contents: dict[str, str] = {}
        matching: list[str] = []
        for index in range(files):
            sub = "" if level == 2 or index % 2 == 0 else f"{rng.choice(WORDS)}/"
            path = f"{root}/{sub}{rng.choice(WORDS)}-{index}.log"
            rows = []
            for _ in range(lines):
                tag, name, date = rng.choice(levels), rng.choice(USERS), f"2026-03-{rng.randint(1, 28):02d}"
                head = f"{tag} {date}" if level_first else f"{date} {tag}"
                rows.append(f"{head} {key}={name} {sentence(rng, rng.randint(1, 5))}")
                if tag == marker:
                    matching.append(name)
            contents[path] = "\n".join(rows) + "\n"
            contents[f"{root}/{sub}notes-{index}.txt"] = f"{marker} {key}=nobody this file is not a log\n"
        files_spec = {path: FileSpec(text) for path, text in contents.items()}
        field = 1 if level_first else 2
        layout = "a level, a date" if level_first else "a date, a level"
        if level == 2:
            return Instance(
                family=self.name,
                seed=0,
                knobs={},
                instruction=(
                    f"The `.log` files in `{root}` have one event per line: {layout}, `{key}=NAME`, then "
                    f"text. Count the lines whose level is exactly `{marker}` over all the `.log` files "
                    f"(ignore other files) and write that number to `{out}`."
                ),
                files=files_spec,
                steps=[
                    Step(f"ls {root}", "see which files there are"),
                    Step(
                        f"cat {root}/*.log | awk '${field} == \"{marker}\"' | wc -l > {out}",
                        f"count the {marker} lines",
                    ),
                ],
                check=CHECK,
                expected={
                    "kind": "count",
                    "output": out,
                    "answer": len(matching),
                    "intact": sorted(contents),
                },
                domain=self.domain,
                tags=["grep", "awk", "logs"],
                mistakes=[Mistake(1, f"grep -c {marker} {root}/*.logs", "count the matching lines")],
            )
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=(
                f"`{root}` and its subfolders hold `.log` files, one event per line: {layout}, `{key}=NAME`, "
                f"then text. Write to `{out}` the distinct {key} names that appear in lines whose level is "
                f"exactly `{marker}`, in any `.log` file at any depth (other files do not count): sorted, "
                "one per line."
            ),
            files=files_spec,
            steps=[
                Step(f"find {root} -type f | head -20", "see the layout"),
                Step(
                    f"find {root} -name '*.log' -exec cat {{}} + "
                    f"| awk '${field} == \"{marker}\" {{print $3}}' | cut -d= -f2 | sort -u > {out}",
                    f"extract and dedupe the {key} names",
                ),
                Step(f"cat {out}", "check the result"),
            ],
            check=CHECK,
            expected={
                "kind": "names",
                "output": out,
                "answer": sorted(set(matching)),
                "intact": sorted(contents),
            },
            domain=self.domain,
            tags=["find", "awk", "sort", "logs"],
            mistakes=[
                Mistake(1, f"grep -rh --include='*.log' ' {marker} ' {root}/missing", "look at the lines"),
            ],
        )
