"""Initialized resampling: where a terminal episode starts in its task's expert trajectory, and what a failed
one leaves to imitate.

The terminal env manager calls one object, `scheduler.StartScheduler` (a rollout worker's side of the run's
`start_points.StartPoints` actor): the start point and expert prefix of an episode, recording its outcome, and
the imitation fallback of a failed one. The rest is its parts: `expert` (expert trajectories as steps),
`rollback` (sequential rollback and the crucial fork, pure bookkeeping), `expert_book` and `expert_store`
(refreshing a task's expert from the policy's successes, kept on disk), `imitation` (expert chunks as a
trajectory) and `prefill` (replaying an expert prefix through iflow, also run inside the sandbox).

Nothing is imported here: `expert` is imported by the task loader that `start_points` itself imports.
"""
