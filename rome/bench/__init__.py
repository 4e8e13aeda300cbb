"""rome-bench: runs terminal tasks in ROCK sandboxes and grades them with their own tests."""
