import os
import random

rng = random.Random(8116)
os.makedirs("/app/units", exist_ok=True)
names = [f"{p}{i}.service" for p, i in zip(rng.sample(
    ["net", "db", "cache", "web", "api", "log", "mail", "cron", "dns", "auth", "queue", "search", "metrics",
     "backup", "vpn", "ntp", "ssh", "proxy", "store", "media", "billing", "report"], 22), range(22))]
for i, name in enumerate(names):
    lines = ["[Unit]", f"Description=unit {name}"]
    earlier = names[:i]
    for key, count in (("Requires", rng.randint(0, 2)), ("Wants", rng.randint(0, 2)), ("After", rng.randint(0, 3))):
        picks = rng.sample(earlier, min(count, len(earlier)))
        if key == "Wants" and rng.random() < 0.3:
            picks.append("ghost-%d.service" % rng.randint(1, 3))
        for chunk in (picks[:1], picks[1:]):
            if chunk:
                lines.append(f"{key}={' '.join(chunk)}")
    if i and rng.random() < 0.3:
        lines.append(f"Before={rng.choice(names[i + 1:] or names[-1:])}")
    if rng.random() < 0.08:
        lines.append("Requires=absent-%d.service" % rng.randint(1, 2))
    lines += ["", "[Service]", f"ExecStart=/usr/bin/{name.split('.')[0]}"]
    open(f"/app/units/{name}", "w").write("\n".join(lines) + "\n")
open("/app/targets.txt", "w").write("\n".join(rng.sample(names[8:], 3)) + "\n")
