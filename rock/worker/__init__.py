"""A ROCK worker: runs sandboxes as Docker containers and talks to their rocklets."""
