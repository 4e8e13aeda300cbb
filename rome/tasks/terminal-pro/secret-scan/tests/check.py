import os
import re
import sys

aws = re.compile(r"(?<![A-Za-z0-9])AKIA[A-Z0-9]{16}(?![A-Za-z0-9])")
gh = re.compile(r"ghp_[A-Za-z0-9]{36}(?![A-Za-z0-9])")
pk = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|-----BEGIN PRIVATE KEY-----")
want = []
for root, dirs, files in os.walk("/app/repo"):
    dirs[:] = [x for x in dirs if x != ".git"]
    for name in files:
        path = os.path.join(root, name)
        rel = os.path.relpath(path, "/app/repo")
        for n, line in enumerate(open(path, errors="replace"), 1):
            want += [(rel, n, "aws-access-key") for m in aws.findall(line) if not m.endswith("EXAMPLE")]
            want += [(rel, n, "github-token") for _ in gh.findall(line)]
            want += [(rel, n, "private-key")] if pk.search(line) else []
want = [f"{p}:{n}:{k}" for p, n, k in sorted(want)]
try:
    got = [l.strip() for l in open("/app/findings.txt") if l.strip()]
except OSError as exc:
    sys.exit(f"cannot read /app/findings.txt: {exc}")
if got != want:
    sys.exit(f"findings differ: missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}")
print(f"secret scan ok ({len(want)} findings)")
