import datetime as dt
import json
import os
import random

rng = random.Random(8103)
os.makedirs("/app/exports", exist_ok=True)
base = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
names = ["ada", "bo", "cy", "di", "ed", "flo", "gus", "hal", "ivy", "jo", "kai", "lu"]
for n in range(4):
    with open(f"/app/exports/replica-{n}.jsonl", "w") as f:
        for _ in range(400):
            uid = rng.randint(1, 150)
            when = base + dt.timedelta(minutes=rng.randint(0, 60 * 24 * 30))
            tz = dt.timezone(dt.timedelta(hours=rng.choice([0, 0, 2, -5, 9])))
            rec = {"id": uid, "updated_at": when.astimezone(tz).isoformat(),
                   "deleted": rng.random() < 0.12, "name": rng.choice(names),
                   "plan": rng.choice(["free", "pro", "team"]), "logins": rng.randint(0, 500)}
            f.write(json.dumps(rec) + "\n")
            if rng.random() < 0.02:
                f.write('{"id": broken\n')
