#!/bin/bash
python3 - <<'PY'
import os, re
rules = [
    ("aws-access-key", re.compile(r"(?<![A-Za-z0-9])(AKIA[A-Z0-9]{16})(?![A-Za-z0-9])")),
    ("github-token", re.compile(r"(ghp_[A-Za-z0-9]{36})(?![A-Za-z0-9])")),
]
found = []
for root, dirs, files in os.walk("/app/repo"):
    if ".git" in dirs:
        dirs.remove(".git")
    for name in files:
        full = os.path.join(root, name)
        rel = os.path.relpath(full, "/app/repo")
        with open(full, errors="replace") as f:
            for no, line in enumerate(f, 1):
                for kind, rx in rules:
                    found += [(rel, no, kind) for m in rx.findall(line) if not m.endswith("EXAMPLE")]
                if re.search(r"-----BEGIN ([A-Z]+ )*PRIVATE KEY-----", line):
                    found.append((rel, no, "private-key"))
open("/app/findings.txt", "w").write("".join(f"{p}:{n}:{k}\n" for p, n, k in sorted(found)))
PY
