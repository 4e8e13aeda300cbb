import random
import sys
from collections import OrderedDict

sys.path.insert(0, "/app")
from lru import LRUCache  # noqa: E402

rng = random.Random(4242)
for trial in range(200):
    cap = rng.randint(1, 8)
    cache, ref = LRUCache(cap), OrderedDict()
    for step in range(300):
        k = rng.randint(0, 12)
        if rng.random() < 0.5:
            v = rng.random()
            cache.put(k, v)
            ref[k] = v
            ref.move_to_end(k)
            if len(ref) > cap:
                ref.popitem(last=False)
        else:
            want = ref.get(k, "missing")
            if k in ref:
                ref.move_to_end(k)
            got = cache.get(k, "missing")
            if got != want:
                sys.exit(f"trial {trial} step {step}: get({k}) = {got!r}, expected {want!r}")
        if len(cache) != len(ref) or list(cache.keys()) != list(ref):
            sys.exit(f"trial {trial} step {step}: keys {list(cache.keys())}, expected {list(ref)}")
for bad in (0, -3):
    try:
        LRUCache(bad)
    except ValueError:
        continue
    sys.exit(f"LRUCache({bad}) must raise ValueError")
print("lru ok")
