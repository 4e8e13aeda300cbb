#!/bin/bash
python3 - <<'PY'
import math, re
line_re = re.compile(r"^\S+Z (\w+) (\S+) (\d{3}) (\d+(?:\.\d+)?)ms$")
groups = {}
for line in open("/app/access.log"):
    m = line_re.match(line.strip())
    if m and int(m.group(3)) < 500:
        groups.setdefault(f"{m.group(1)} {m.group(2).split('?')[0]}", []).append(float(m.group(4)))
with open("/app/latency.csv", "w") as out:
    out.write("endpoint,count,p50,p95,p99\n")
    for ep in sorted(groups):
        v = sorted(groups[ep])
        ps = [v[math.ceil(p / 100 * len(v)) - 1] for p in (50, 95, 99)]
        out.write(f"{ep},{len(v)}," + ",".join(f"{x:.1f}" for x in ps) + "\n")
PY
