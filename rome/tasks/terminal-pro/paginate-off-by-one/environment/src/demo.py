import json

from pager import paginate

catalog = json.load(open("/app/catalog.json"))
for p in (1, 2, 3):
    print(paginate(catalog, p, 10))
