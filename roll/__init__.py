"""ROLL: Ray-orchestrated RL training for agents."""
