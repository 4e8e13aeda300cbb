"""Re-run the environment's generator (tests/gen_truth.py, a copy of environment/gen.py) in a scratch folder
and check that every input file it makes under /app is still byte-for-byte what the image was built with,
so a solution cannot pass by editing or deleting its inputs."""

import os
import runpy
import sys
import tempfile

scratch = tempfile.mkdtemp()
generator = os.path.join(scratch, "gen.py")
with open(generator, "w") as f:
    f.write(open("/tests/gen_truth.py").read().replace("/app/", scratch + "/app/"))
os.makedirs(os.path.join(scratch, "app"), exist_ok=True)
runpy.run_path(generator, run_name="__main__")
for root, _, files in os.walk(os.path.join(scratch, "app")):
    for name in files:
        fresh = os.path.join(root, name)
        original = "/app/" + os.path.relpath(fresh, os.path.join(scratch, "app"))
        if not os.path.isfile(original) or open(original, "rb").read() != open(fresh, "rb").read():
            sys.exit(f"{original} was changed or removed; the task's inputs must stay as they are")
print("inputs intact")
