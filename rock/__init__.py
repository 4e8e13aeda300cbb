"""ROCK: the sandbox fleet (admin, workers, rocklet) and its SDK."""
