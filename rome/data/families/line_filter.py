"""files-and-text: write the lines of text files that a rule selects (a word, the first or last lines).

Made as an out-of-family held-out set for runs that train on text-search, csv-rollup, file-ops and numeric:
it asks for the same skills (read a path and a word from the instruction, grep, head, tail, a redirect into
the named output file) in a combination those families never ask for.
"""

from __future__ import annotations

import random

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import WORDS, sentence

CHECK = """
out = EXPECTED["output"]
got = read(out).splitlines()
if got != EXPECTED["answer"]:
    want = EXPECTED["answer"]
    fail(f"{out} should hold {len(want)} line(s) (first {want[:2]}); got {len(got)} (first {got[:2]})")
"""

FOLDERS = ("/app", "/app/notes", "/app/text", "/app/docs")
EXTENSIONS = (".txt", ".md", ".log")
OUTPUTS = ("selected.txt", "matches.txt", "out.txt", "lines.txt", "result.txt")
# Level 1's rules over one file: wording, and the one-command oracle.
RULES = {
    "with": ("the lines of `{path}` that contain the word `{word}`", "grep {word} {path} > {out}"),
    "without": (
        "the lines of `{path}` that do not contain the word `{word}`",
        "grep -v {word} {path} > {out}",
    ),
    "head": ("the first {n} lines of `{path}`", "head -n {n} {path} > {out}"),
    "tail": ("the last {n} lines of `{path}`", "tail -n {n} {path} > {out}"),
}


class LineFilterKnobs(Knobs):
    lines: int | None = Field(None, ge=6, le=2000, description="lines per file")
    files: int | None = Field(None, ge=1, le=8, description="files in the folder (levels 2-3)")


class LineFilter(Family):
    name = "line-filter"
    domain = "files-and-text"
    summary = (
        "the lines with or without a word, the first or last N lines; across a folder; sorted and unique"
    )
    knobs = LineFilterKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, LineFilterKnobs)
        level = knobs.level or 1
        return knobs.model_copy(
            update={
                "lines": knobs.lines or rng.randint(6 * level, 30 * level),
                "files": knobs.files or (1 if level == 1 else rng.randint(2, 2 + level)),
            }
        )

    def build(self, rng: random.Random, knobs: LineFilterKnobs) -> Instance:  # type: ignore[override]
        assert knobs.lines is not None and knobs.files is not None
        folder = rng.choice(FOLDERS)
        out = f"/app/{rng.choice(OUTPUTS)}"
        texts = {
            f"{folder}/{rng.choice(WORDS)}-{index}{rng.choice(EXTENSIONS)}": [
                sentence(rng, rng.randint(2, 8)) for _ in range(knobs.lines)
            ]
            for index in range(knobs.files)
        }
        # The files of one extension the folder has are read (level 1: the one file); the others are there to
        # be left out.
        ext = rng.choice(sorted({path.rsplit(".", 1)[1] for path in texts}))
        chosen = {path: rows for path, rows in texts.items() if path.endswith(f".{ext}")}
        pool = [row for rows in chosen.values() for row in rows]
        # A word some of those lines hold and some do not, so grep selects something and leaves something.
        words = [w for w in WORDS if 0 < sum(1 for row in pool if w in row) < len(pool)]
        word = rng.choice(words or WORDS)
        files = {path: FileSpec("".join(row + "\n" for row in rows)) for path, rows in texts.items()}
        common = {"family": self.name, "seed": 0, "knobs": {}, "files": files, "check": CHECK}
        if knobs.level == 1:
            ((path, rows),) = texts.items()
            kind = rng.choice(tuple(RULES)) if words else rng.choice(("head", "tail"))
            n = rng.randint(2, max(2, knobs.lines - 2))
            answer = {
                "with": [r for r in rows if word in r],
                "without": [r for r in rows if word not in r],
                "head": rows[:n],
                "tail": rows[-n:],
            }[kind]
            asked, command = RULES[kind]
            return Instance(
                **common,  # type: ignore[arg-type]
                instruction=f"Write {asked.format(word=word, n=n, path=path)} to `{out}`, in their order.",
                steps=[Step(command.format(word=word, n=n, path=path, out=out), "select the lines")],
                expected={"output": out, "answer": answer, "intact": [path]},
                domain=self.domain,
                tags=["grep", "head", "tail"],
                variant=kind,
                mistakes=[Mistake(0, f"grep {word} {path}.orig", "select the lines")],
            )
        selected = [r for path in sorted(chosen) for r in chosen[path] if word in r]
        if knobs.level == 2:
            return Instance(
                **common,  # type: ignore[arg-type]
                instruction=f"Write every line that contains the word `{word}` from the `.{ext}` files in "
                f"`{folder}` to `{out}`: the files in name order, the lines in their order, nothing else.",
                steps=[
                    Step(f"ls {folder}", "see the files"),
                    Step(f"cat {folder}/*.{ext} | grep {word} > {out}", "select the lines"),
                ],
                expected={"output": out, "answer": selected, "intact": sorted(texts)},
                domain=self.domain,
                tags=["grep", "cat", "glob"],
                mistakes=[Mistake(1, f"grep -h {word} {folder}/*.{ext}s", "select the lines")],
            )
        unique = sorted(set(selected))
        return Instance(
            **common,  # type: ignore[arg-type]
            instruction=f"Collect the lines that contain the word `{word}` from the `.{ext}` files in "
            f"`{folder}`, and write each distinct line once, sorted, to `{out}`.",
            steps=[
                Step(f"ls {folder}", "see the files"),
                Step(
                    f"cat {folder}/*.{ext} | grep {word} | LC_ALL=C sort -u > {out}", "select, sort, dedupe"
                ),
                Step(f"wc -l {out}", "check"),
            ],
            expected={"output": out, "answer": unique, "intact": sorted(texts)},
            domain=self.domain,
            tags=["grep", "sort", "uniq"],
            mistakes=[Mistake(1, f"sort -u {folder}/*.{ext}s", "sort the lines")],
        )
