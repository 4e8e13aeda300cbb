import glob
import heapq
import os
import sys

units = {}
for path in glob.glob("/app/units/*.service"):
    deps = {"Requires": [], "Wants": [], "After": [], "Before": []}
    section = None
    for line in open(path):
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Unit]" and "=" in line:
            k, v = line.split("=", 1)
            if k in deps:
                deps[k] += v.split()
    units[os.path.basename(path)] = deps
targets = [l.strip() for l in open("/app/targets.txt") if l.strip()]
txn, missing, stack = set(), set(), list(targets)
while stack:
    u = stack.pop()
    if u in txn:
        continue
    txn.add(u)
    for kind in ("Requires", "Wants"):
        for dep in units[u][kind]:
            if dep in units:
                stack.append(dep)
            elif kind == "Requires":
                missing.add(dep)
before = {u: set() for u in txn}
for u in txn:
    before[u] |= {b for b in units[u]["After"] if b in txn}
    for later in units[u]["Before"]:
        if later in txn:
            before[later].add(u)
indeg = {u: len(before[u]) for u in txn}
heap = [u for u in txn if indeg[u] == 0]
heapq.heapify(heap)
order = []
while heap:
    u = heapq.heappop(heap)
    order.append(u)
    for v in txn:
        if u in before[v]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, v)
try:
    got = [l.strip() for l in open("/app/start_order.txt") if l.strip()]
    got_missing = [l.strip() for l in open("/app/missing.txt") if l.strip()]
except OSError as exc:
    sys.exit(f"cannot read outputs: {exc}")
if got != order:
    sys.exit(f"start order differs:\n got      {got}\n expected {order}")
if got_missing != sorted(missing):
    sys.exit(f"missing: got {got_missing}, expected {sorted(missing)}")
print(f"start order ok ({len(order)} units)")
