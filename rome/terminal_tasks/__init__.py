"""The terminal-task library that rome-bench and training share; it imports only the ROCK SDK.

- `task`: the `Task` model and its loader for the Harbor / Terminal-Bench-Pro (`task.toml`) and older
  Terminal-Bench (`task.yaml`) layouts; a malformed folder becomes a `TaskLoadError` naming file and field.
- `sandbox`: what a task needs of a sandbox (`TrialSandbox`); `rock_sandbox`: a task on a ROCK fleet, its
  image (`ensure_image(task, admin_url)`, built by the fleet) and its sandbox (`RockSandbox`).
- `verifier.verify(sandbox, task)`: the task's own tests, run after the agent, as a `Verdict` (the reward).
- `steps`: Harbor multi-step tasks (`[[steps]]`) and how their rewards roll up; `network`: what a task asks of
  the network (`none | packages | full`) and what a run grants it.
- `bundle`: what the verifier uploads next to the tests (pytest with pytest-json-ctrf, uv/uvx, a python3).
- `env.TerminalTaskEnv`: a task as a GEM-style environment (`terminal:<task dir>`, bash actions, `finish`).
"""
