import json
import random

rng = random.Random(8118)
json.dump({"alpha": round(rng.uniform(0.8, 1.3), 4), "beta": round(rng.uniform(0.3, 0.6), 4),
           "delta": round(rng.uniform(0.15, 0.35), 4), "gamma": round(rng.uniform(0.7, 1.1), 4),
           "x0": round(rng.uniform(5, 10), 3), "y0": round(rng.uniform(1, 4), 3),
           "dt": 0.01, "steps": rng.randint(5000, 6000)}, open("/app/params.json", "w"), indent=2)
