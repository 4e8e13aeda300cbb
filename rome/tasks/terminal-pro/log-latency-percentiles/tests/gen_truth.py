import random

rng = random.Random(8102)
paths = ["/api/items", "/api/users", "/api/orders", "/health", "/api/search", "/login"]
methods = {"/api/items": ["GET", "POST"], "/api/users": ["GET"], "/api/orders": ["GET", "POST", "DELETE"],
           "/health": ["GET"], "/api/search": ["GET"], "/login": ["POST"]}
lines = []
for i in range(6000):
    p = rng.choice(paths)
    m = rng.choice(methods[p])
    q = f"?page={rng.randint(1, 9)}" if rng.random() < 0.3 else ""
    status = rng.choice([200] * 20 + [201, 204, 301, 404, 500, 502, 503])
    ms = round(rng.lognormvariate(3.5 if p != "/api/search" else 5.0, 0.6), 1)
    lines.append(f"2025-03-04T{10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z {m} {p}{q} {status} {ms}ms")
    if rng.random() < 0.01:
        lines.append("-- log rotated --")
open("/app/access.log", "w").write("\n".join(lines) + "\n")
