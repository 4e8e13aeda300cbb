import random
import sys

sys.path.insert(0, "/app")
from pager import paginate  # noqa: E402

rng = random.Random(91)
for _ in range(3000):
    items = list(range(rng.randint(0, 60)))
    per = rng.randint(1, 12)
    pages = max(1, -(-len(items) // per))
    page = rng.randint(1, pages + 2)
    want = {"items": items[(page - 1) * per: page * per], "page": page, "pages": pages,
            "has_prev": page > 1, "has_next": page < pages}
    got = paginate(items, page, per)
    if got != want:
        sys.exit(f"paginate({len(items)} items, page={page}, per_page={per}) = {got}, expected {want}")
for bad in ((0, 5), (-1, 5), (1, 0)):
    try:
        paginate([1, 2, 3], *bad)
    except ValueError:
        continue
    sys.exit(f"paginate(page={bad[0]}, per_page={bad[1]}) must raise ValueError")
print("pager ok")
