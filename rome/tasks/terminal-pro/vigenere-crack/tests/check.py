import os
import runpy
import sys
import tempfile

scratch = tempfile.mkdtemp()
generator = os.path.join(scratch, "gen.py")
with open(generator, "w") as f:
    f.write(open("/tests/gen_truth.py").read().replace("/app/", scratch + "/"))
truth = runpy.run_path(generator)
try:
    key = open("/app/key.txt").read().strip()
    plain = open("/app/plaintext.txt").read()
except OSError as exc:
    sys.exit(f"cannot read outputs: {exc}")
if key != truth["key"]:
    sys.exit(f"key {key!r} is wrong")
if plain.strip().upper() != truth["plain"].strip():
    sys.exit("plaintext differs from the original text")
print("vigenere ok")
