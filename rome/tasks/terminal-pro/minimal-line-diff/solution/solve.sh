#!/bin/bash
cat > /app/mindiff.py <<'PY'
import sys


def diff(a, b):
    n, m = len(a), len(b)
    # suffix LCS table: L[i][j] = LCS of a[i:] and b[j:]
    L = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        ai, row, nxt = a[i], L[i], L[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = nxt[j + 1] + 1 if ai == b[j] else max(nxt[j], row[j + 1])
    out, i, j = [], 0, 0
    while i < n or j < m:
        if i < n and j < m and a[i] == b[j] and L[i][j] == L[i + 1][j + 1] + 1:
            out.append("  " + a[i]); i += 1; j += 1
        elif i < n and L[i][j] == L[i + 1][j]:
            out.append("- " + a[i]); i += 1
        else:
            out.append("+ " + b[j]); j += 1
    return out


old = open(sys.argv[1]).read().splitlines()
new = open(sys.argv[2]).read().splitlines()
sys.stdout.write("".join(line + "\n" for line in diff(old, new)))
PY
