def paginate(items, page, per_page):
    """One page of `items` and the facts a page footer needs."""
    pages = len(items) // per_page
    start = page * per_page
    chunk = items[start:start + per_page]
    return {
        "items": chunk,
        "page": page,
        "pages": pages,
        "has_prev": page > 0,
        "has_next": page < pages,
    }
