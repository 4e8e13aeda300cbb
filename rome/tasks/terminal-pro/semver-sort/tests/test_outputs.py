import functools
import re

SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def key(line):
    m = SEMVER.match(line)
    assert m, f"not a semver line: {line!r}"
    return tuple(int(g) for g in m.groups()[:3]), m.group(4)


def cmp_pre(a, b):
    if a == b:
        return 0
    if a is None or b is None:
        return 1 if a is None else -1
    for x, y in zip(a.split("."), b.split(".")):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return -1 if int(x) < int(y) else 1
        if x.isdigit() != y.isdigit():
            return -1 if x.isdigit() else 1
        return -1 if x < y else 1
    return -1 if len(a.split(".")) < len(b.split(".")) else 1


def cmp(a, b):
    (ca, pa), (cb, pb) = key(a), key(b)
    if ca != cb:
        return -1 if ca < cb else 1
    return cmp_pre(pa, pb)


def lines(path):
    return [l.strip() for l in open(path) if l.strip()]


def test_sorted_by_precedence_stably():
    src = lines("/app/versions.txt")
    assert lines("/app/sorted.txt") == sorted(src, key=functools.cmp_to_key(cmp))


def test_latest_stable():
    stable = [l for l in lines("/app/versions.txt") if key(l)[1] is None]
    best = max(stable, key=lambda l: key(l)[0])
    firsts = [l for l in stable if key(l)[0] == key(best)[0]]
    assert open("/app/latest_stable.txt").read().strip() in firsts


def test_inputs_untouched():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "/tests/inputs_intact.py"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
