#!/bin/bash
python3 - <<'PY'
import json
def rows(p):
    return [l.rstrip("\n").split(":") for l in open(p) if l.strip() and not l.startswith("#")]
pw, sh, gr = rows("/app/etc/passwd"), rows("/app/etc/shadow"), rows("/app/etc/group")
admin_gids = {g[2] for g in gr if g[0] in ("sudo", "wheel")}
admins = {u[0] for u in pw if u[3] in admin_gids}
for g in gr:
    if g[0] in ("sudo", "wheel"):
        admins |= {m for m in g[3].split(",") if m}
shells = {u[0]: u[6] for u in pw}
nologin = {"/usr/sbin/nologin", "/sbin/nologin", "/bin/false"}
uids = {}
for u in pw:
    uids.setdefault(u[2], []).append(u[0])
json.dump({
    "uid0": sorted(u[0] for u in pw if u[2] == "0" and u[0] != "root"),
    "empty_password": sorted(s[0] for s in sh if s[1] == ""),
    "admins_with_shell": sorted(a for a in admins if a in shells and shells[a] not in nologin),
    "duplicate_uids": {k: sorted(v) for k, v in uids.items() if len(v) > 1},
}, open("/app/audit.json", "w"), indent=2)
PY
