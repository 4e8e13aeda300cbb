#!/bin/bash
cat > /app/ini2json.py <<'PY'
import json
import re
import sys

TRUE, FALSE = {"true", "yes", "on"}, {"false", "no", "off"}


def convert(value):
    low = value.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    return int(value) if re.fullmatch(r"-?[0-9]+", value) else value


def parse(text):
    sections, current = {}, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            sections.setdefault(current, {})
            continue
        m = re.search(r"[=:]", line)
        if m is None:
            key, value = line, None
        else:
            key, value = line[: m.start()], convert(line[m.end():].strip())
        sections.setdefault(current, {})[key.strip().lower()] = value
    return sections


with open(sys.argv[1]) as f:
    print(json.dumps(parse(f.read()), indent=2))
PY
