#!/bin/bash
python3 - <<'PY'
import datetime as dt, glob, json
latest = {}
for order, path in enumerate(sorted(glob.glob("/app/exports/*.jsonl"))):
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        key = (dt.datetime.fromisoformat(rec["updated_at"]), order)
        if rec["id"] not in latest or key >= latest[rec["id"]][0]:
            latest[rec["id"]] = (key, rec)
out = [latest[i][1] for i in sorted(latest) if not latest[i][1]["deleted"]]
json.dump(out, open("/app/users.json", "w"), indent=1)
PY
