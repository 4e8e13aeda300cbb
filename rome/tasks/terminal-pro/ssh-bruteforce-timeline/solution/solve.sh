#!/bin/bash
python3 - <<'PY'
import datetime as dt, ipaddress, re
failures, logins = {}, {}
for line in open("/app/auth.log"):
    ts = dt.datetime.strptime("2025 " + line[:15], "%Y %b %d %H:%M:%S")
    body = line.split("]: ", 1)[1]
    m = re.match(r"message repeated (\d+) times: \[ Failed password for (?:invalid user )?\S+ from (\S+) ", body)
    if m:
        failures.setdefault(m.group(2), []).extend([ts] * int(m.group(1)))
        continue
    m = re.match(r"Failed password for (?:invalid user )?\S+ from (\S+) ", body)
    if m:
        failures.setdefault(m.group(1), []).append(ts)
        continue
    m = re.match(r"Accepted (?:password|publickey) for (\S+) from (\S+) ", body)
    if m:
        logins.setdefault(m.group(2), []).append((ts, m.group(1)))
first_burst = {}
for ip, ts in failures.items():
    hits = [ts[i + 4] for i in range(len(ts) - 4) if (ts[i + 4] - ts[i]).total_seconds() <= 60]
    if hits:
        first_burst[ip] = min(hits)
ips = sorted(first_burst, key=ipaddress.ip_address)
open("/app/bruteforcers.txt", "w").write("".join(ip + "\n" for ip in ips))
with open("/app/compromised.txt", "w") as out:
    for ip in ips:
        after = [u for t, u in logins.get(ip, []) if t >= first_burst[ip]]
        if after:
            out.write(f"{ip} {after[0]}\n")
PY
