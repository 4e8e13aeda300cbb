import json
import sys


def rows(path):
    return [l.rstrip("\n").split(":") for l in open(path) if l.strip() and not l.startswith("#")]


passwd, shadow, group = rows("/app/etc/passwd"), rows("/app/etc/shadow"), rows("/app/etc/group")
gids = {g[0]: g[2] for g in group}
members = {g[0]: set(filter(None, g[3].split(","))) for g in group}
admins = {u[0] for u in passwd if u[3] in (gids.get("sudo"), gids.get("wheel"))}
admins |= members.get("sudo", set()) | members.get("wheel", set())
shell = {u[0]: u[6] for u in passwd}
by_uid = {}
for u in passwd:
    by_uid.setdefault(u[2], []).append(u[0])
want = {
    "uid0": sorted(u[0] for u in passwd if u[2] == "0" and u[0] != "root"),
    "empty_password": sorted(s[0] for s in shadow if s[1] == ""),
    "admins_with_shell": sorted(a for a in admins if shell.get(a) not in
                                ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", None)),
    "duplicate_uids": {uid: sorted(us) for uid, us in by_uid.items() if len(us) > 1},
}
try:
    got = json.load(open("/app/audit.json"))
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read /app/audit.json: {exc}")
for key, value in want.items():
    if got.get(key) != value:
        sys.exit(f"{key}: got {got.get(key)}, expected {value}")
print("audit ok")
