import datetime as dt
import ipaddress
import re
import sys

fail = re.compile(r"Failed password for (?:invalid user )?(\S+) from (\S+) ")
rep = re.compile(r"message repeated (\d+) times: \[ Failed password for (?:invalid user )?(\S+) from (\S+) ")
ok = re.compile(r"Accepted (?:password|publickey) for (\S+) from (\S+) ")
fails, accepts = {}, {}
for line in open("/app/auth.log"):
    when = dt.datetime.strptime("2025 " + line[:15], "%Y %b %d %H:%M:%S")
    msg = line.split("]: ", 1)[1]
    if m := rep.search(msg):
        fails.setdefault(m.group(3), []).extend([when] * int(m.group(1)))
    elif m := fail.search(msg):
        fails.setdefault(m.group(2), []).append(when)
    elif m := ok.search(msg):
        accepts.setdefault(m.group(2), []).append((when, m.group(1)))
brute, comp = {}, {}
for ip, ts in fails.items():
    for i in range(len(ts) - 4):
        if (ts[i + 4] - ts[i]).total_seconds() <= 60:
            brute[ip] = min(brute.get(ip, ts[i + 4]), ts[i + 4])
for ip, fifth in brute.items():
    later = [u for w, u in accepts.get(ip, []) if w >= fifth]
    if later:
        comp[ip] = later[0]
order = sorted(brute, key=ipaddress.ip_address)
want_b = order
want_c = [f"{ip} {comp[ip]}" for ip in order if ip in comp]
try:
    got_b = [l.strip() for l in open("/app/bruteforcers.txt") if l.strip()]
    got_c = [l.strip() for l in open("/app/compromised.txt") if l.strip()]
except OSError as exc:
    sys.exit(f"cannot read outputs: {exc}")
if got_b != want_b:
    sys.exit(f"brute-forcers {got_b}, expected {want_b}")
if got_c != want_c:
    sys.exit(f"compromised {got_c}, expected {want_c}")
print(f"ok: {len(want_b)} brute-forcers, {len(want_c)} compromised")
