"""Scripted players: they win GEM envs, whose episodes become SFT warm-start data."""
