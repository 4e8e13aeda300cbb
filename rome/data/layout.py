"""An `Instance` as a Harbor task folder, the layout rome-bench loads:

instruction.md, task.toml ([metadata], [agent], [verifier], [environment], and [rome]: family, seed, knobs)
environment/Dockerfile     FROM python:3.11-slim; COPY files/ / (no RUN: builds need no network)
environment/files/...      the image's files at their absolute paths, with their modes
solution/solve.sh          the oracle steps as one script
solution/steps.json        the same steps, the plausible mistakes and the final message (oracle teacher)
tests/test.sh, check.py    the outcome check, writing /logs/verifier/reward.txt
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from rome.data.families.base import FileSpec, Instance

BASE_IMAGE = "python:3.11-slim"

DOCKERFILE = f"FROM {BASE_IMAGE}\nWORKDIR /app\nCOPY files/ /\n"

TEST_SH = """#!/bin/bash
# Outcome check of a generated task: reward 1 when check.py passes, else 0.
mkdir -p /logs/verifier
if python3 /tests/check.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
"""

CHECK_PRELUDE = """import hashlib
import json
import os
import sys

EXPECTED = json.loads({expected!r})


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {{path}}: {{exc}}")


for path, digest in EXPECTED.get("hashes", {{}}).items():
    if not os.path.isfile(path) or hashlib.sha256(open(path, "rb").read()).hexdigest() != digest:
        fail(f"{{path}} was changed or removed; the task's inputs must stay as they are")
"""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def task_toml(instance: Instance) -> str:
    sections: dict[str, dict[str, Any]] = {
        "metadata": {
            "author_name": "rome data",
            "difficulty": instance.difficulty,
            "category": instance.domain,
            "tags": [instance.family, *instance.tags],
        },
        "agent": {"timeout_sec": 300.0},
        "verifier": {"timeout_sec": 60.0},
        "environment": {"build_timeout_sec": 300.0, "cpus": 1, "memory_mb": 512, "allow_internet": False},
        "rome": {"family": instance.family, "seed": instance.seed, "knobs": instance.knobs},
    }
    lines = ['version = "1.0"']
    for name, values in sections.items():
        lines.append(f"\n[{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def check_script(instance: Instance) -> str:
    expected = dict(instance.expected)
    intact = expected.pop("intact", [])
    expected["hashes"] = {
        path: hashlib.sha256(instance.files[path].content.encode()).hexdigest() for path in intact
    }
    prelude = CHECK_PRELUDE.format(expected=json.dumps(expected, sort_keys=True))
    return prelude + instance.check.rstrip() + '\nprint("ok")\n'


def solve_script(instance: Instance) -> str:
    return "#!/bin/bash\ncd /app\n" + "\n".join(step.command for step in instance.steps) + "\n"


def steps_json(instance: Instance) -> str:
    return (
        json.dumps(
            {
                "steps": [asdict(step) for step in instance.steps],
                "mistakes": [asdict(mistake) for mistake in instance.mistakes],
                "final_message": instance.final_message,
            },
            indent=2,
        )
        + "\n"
    )


def render(instance: Instance) -> dict[str, FileSpec]:
    """Every file of the task folder, by its path relative to the folder."""
    files = {
        "instruction.md": FileSpec(instance.instruction.strip() + "\n"),
        "task.toml": FileSpec(task_toml(instance)),
        "environment/Dockerfile": FileSpec(DOCKERFILE),
        "solution/solve.sh": FileSpec(solve_script(instance), 0o755),
        "solution/steps.json": FileSpec(steps_json(instance)),
        "tests/test.sh": FileSpec(TEST_SH, 0o755),
        "tests/check.py": FileSpec(check_script(instance)),
    }
    for path, spec in instance.files.items():
        files["environment/files/" + path.lstrip("/")] = spec
    return files


def digest(files: dict[str, FileSpec]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(f"{path}\0{files[path].mode:o}\0".encode())
        h.update(files[path].content.encode())
        h.update(b"\0")
    return h.hexdigest()
