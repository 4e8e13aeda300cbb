"""Rollout: env managers that play episodes against an inference engine and record them as trajectories."""
