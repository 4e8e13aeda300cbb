import os
import runpy
import sys
import tempfile

scratch = tempfile.mkdtemp()
generator = os.path.join(scratch, "gen.py")
with open(generator, "w") as f:
    f.write(open("/tests/gen_truth.py").read().replace("/app/", scratch + "/"))
truth = runpy.run_path(generator)["truth"]
want = [f"{u}:{truth[u]}" for u in sorted(truth)]
try:
    got = [l.strip() for l in open("/app/cracked.txt") if l.strip()]
except OSError as exc:
    sys.exit(f"cannot read /app/cracked.txt: {exc}")
if got != want:
    sys.exit(f"{len(set(got) & set(want))}/{len(want)} correct, {len(set(got) - set(want))} wrong lines")
print(f"cracked {len(want)} ok")
