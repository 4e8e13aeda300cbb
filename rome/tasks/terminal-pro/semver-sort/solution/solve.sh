#!/bin/bash
python3 - <<'PY'
import functools, re
pat = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
def parse(s):
    m = pat.match(s)
    return tuple(map(int, m.groups()[:3])), (m.group(4).split(".") if m.group(4) else None)
def ident(x):
    return (0, int(x), "") if x.isdigit() else (1, 0, x)
def compare(a, b):
    (ca, pa), (cb, pb) = parse(a), parse(b)
    if ca != cb:
        return (ca > cb) - (ca < cb)
    if pa is None or pb is None:
        return (pa is None) - (pb is None)
    ka, kb = [ident(x) for x in pa], [ident(x) for x in pb]
    return (ka > kb) - (ka < kb)
vs = [l.strip() for l in open("/app/versions.txt") if l.strip()]
out = sorted(vs, key=functools.cmp_to_key(compare))
open("/app/sorted.txt", "w").write("\n".join(out) + "\n")
open("/app/latest_stable.txt", "w").write([v for v in out if parse(v)[1] is None][-1] + "\n")
PY
