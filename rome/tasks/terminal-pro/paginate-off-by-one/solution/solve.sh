#!/bin/bash
cat > /app/pager.py <<'PY'
def paginate(items, page, per_page):
    """One page of `items` and the facts a page footer needs."""
    if page < 1 or per_page < 1:
        raise ValueError("page and per_page must be at least 1")
    pages = max(1, -(-len(items) // per_page))
    start = (page - 1) * per_page
    chunk = items[start:start + per_page]
    return {
        "items": chunk,
        "page": page,
        "pages": pages,
        "has_prev": page > 1,
        "has_next": page < pages,
    }
PY
