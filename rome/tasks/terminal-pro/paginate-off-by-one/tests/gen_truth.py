import json
import random

rng = random.Random(8109)
json.dump([f"item-{rng.randint(100, 999)}" for _ in range(23)], open("/app/catalog.json", "w"))
