import json
import random
import re
import subprocess
import sys


def reference(text):
    data, cur = {}, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = line[1:-1].strip()
            data.setdefault(cur, {})
            continue
        cut = min([i for i in (line.find("="), line.find(":")) if i >= 0], default=-1)
        key, value = (line, None) if cut < 0 else (line[:cut], line[cut + 1:].strip())
        if value is not None:
            if value.lower() in ("true", "yes", "on"):
                value = True
            elif value.lower() in ("false", "no", "off"):
                value = False
            elif re.fullmatch(r"-?[0-9]+", value):
                value = int(value)
        data.setdefault(cur, {})[key.strip().lower()] = value
    return data


rng = random.Random(2024)
cases = [open("/app/sample.ini").read()]
for _ in range(25):
    lines = []
    for _ in range(rng.randint(3, 25)):
        kind = rng.random()
        if kind < 0.15:
            lines.append(f"{' ' * rng.randint(0, 2)}[{rng.choice(['a', 'B', ' c d ', 'a'])}]")
        elif kind < 0.25:
            lines.append(rng.choice(["# x = 1", "  ; y: 2", "", "   "]))
        else:
            k = rng.choice(["Key", "key", "K2", "other key", "x"])
            v = rng.choice(["ON", "no", "007", "-3", "3.5", "a:b=c", "", " pad ", "True", "0x1f", "-"])
            sep = rng.choice(["=", " = ", ":", " : ", "=", None])
            lines.append(k if sep is None else f"  {k}{sep}{v}")
    cases.append("\n".join(lines) + "\n")
for n, text in enumerate(cases):
    path = f"/tmp/case{n}.ini"
    open(path, "w").write(text)
    run = subprocess.run([sys.executable, "/app/ini2json.py", path], capture_output=True, text=True, timeout=30)
    want = json.dumps(reference(text), indent=2)
    if run.stdout.strip() != want:
        sys.exit(f"case {n}:\n{text}\n--- got (exit {run.returncode}):\n{run.stdout[:600]}{run.stderr[-300:]}\n--- expected:\n{want[:600]}")
print(f"ini2json ok ({len(cases)} cases)")
