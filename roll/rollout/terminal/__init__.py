"""Agent-native rollouts: the iflow agent works on a terminal task in a ROCK sandbox, its model calls pass
through the ModelProxyService (train mode), and the recorded chunks plus the task's test reward make the
episode's `Trajectory`."""
