import csv
import os
import runpy
import sys
import tempfile

# Re-run the environment's generator in a scratch folder to recover the held-out labels.
scratch = tempfile.mkdtemp()
generator = os.path.join(scratch, "gen.py")
with open(generator, "w") as f:
    f.write(open("/tests/gen_truth.py").read().replace("/app/", scratch + "/"))
truth = runpy.run_path(generator)
labels = dict((f"m{i:04d}.txt", k) for i, k in enumerate(truth["truth"]))
for name in labels:
    if open(f"/app/inbox/{name}").read() != open(f"{scratch}/inbox/{name}").read():
        sys.exit(f"/app/inbox/{name} was modified")
try:
    rows = list(csv.reader(open("/app/labels.csv")))
except OSError as exc:
    sys.exit(f"cannot read /app/labels.csv: {exc}")
if rows[:1] != [["file", "label"]] or [r[0] for r in rows[1:]] != sorted(labels):
    sys.exit("header or file list differs (one row per inbox file, sorted)")
acc = sum(labels[f] == lab for f, lab in rows[1:]) / len(labels)
print(f"accuracy {acc:.3f}")
if acc < 0.95:
    sys.exit("accuracy below 0.95")
