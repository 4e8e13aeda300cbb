"""The ROLL pipeline on Ray: actor groups (trainer, engines, rollout workers, sample buffer) and the
controller that drives them (`roll train`)."""
