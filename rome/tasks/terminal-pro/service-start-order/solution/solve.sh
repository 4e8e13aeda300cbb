#!/bin/bash
python3 - <<'PY'
import configparser, glob, heapq, os
units = {}
for path in glob.glob("/app/units/*.service"):
    deps = {k: [] for k in ("Requires", "Wants", "After", "Before")}
    section = None
    for raw in open(path):
        line = raw.strip()
        if line.startswith("["):
            section = line[1:-1]
        elif section == "Unit" and "=" in line:
            key, value = line.split("=", 1)
            if key in deps:
                deps[key].extend(value.split())
    units[os.path.basename(path)] = deps
todo = [l.strip() for l in open("/app/targets.txt") if l.strip()]
txn, missing = set(), set()
while todo:
    u = todo.pop()
    if u in txn:
        continue
    txn.add(u)
    for dep in units[u]["Requires"] + units[u]["Wants"]:
        if dep in units:
            todo.append(dep)
    missing |= {d for d in units[u]["Requires"] if d not in units}
edges = {u: set() for u in txn}  # u -> units that must wait for u
for u in txn:
    for b in units[u]["After"]:
        if b in txn:
            edges[b].add(u)
    for a in units[u]["Before"]:
        if a in txn:
            edges[u].add(a)
indeg = {u: 0 for u in txn}
for u in txn:
    for v in edges[u]:
        indeg[v] += 1
ready = [u for u in txn if indeg[u] == 0]
heapq.heapify(ready)
order = []
while ready:
    u = heapq.heappop(ready)
    order.append(u)
    for v in edges[u]:
        indeg[v] -= 1
        if indeg[v] == 0:
            heapq.heappush(ready, v)
open("/app/start_order.txt", "w").write("\n".join(order) + "\n")
open("/app/missing.txt", "w").write("".join(m + "\n" for m in sorted(missing)))
PY
