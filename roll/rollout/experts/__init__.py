"""Scripted experts: players that win GEM envs, whose episodes become SFT warm-start data."""
