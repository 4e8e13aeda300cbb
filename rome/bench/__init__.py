"""rome-bench: runs terminal tasks in ROCK sandboxes and grades them with their own tests.

- Tasks, their images, sandboxes and verifier come from the shared task library `rome.terminal_tasks`
  (`task.load_tasks(dir)` reads Harbor / Terminal-Bench-Pro and older Terminal-Bench folders).
- `runner.run_trials(tasks, agent, output, n_attempts, concurrency, ...)` builds images once, runs one
  sandbox per trial (`runner.sandbox_provider("rock"|"docker")`, `trial.run_trial`), writes
  `output/trials/<task>__<k>.json`
  and resumes a folder it finds; `report.write_report` adds summary.json, report.md and charts/*.png.
- `verdict`: each trial's class (passed / failed / agent_error / infra_error) and cause; `trial.classify`.
- `scoring.summarize` gives pass@1, avg@k and unbiased pass@k by domain and difficulty, infra errors apart.
- `validate.validate_tasks` checks that the oracle passes and the nop agent fails every task (and step), and
  tells a task that cannot run here from a broken one.
- `check.check_task`: a task's layout, images, network needs and features, and whether it can run here.
- CLI: `rome-bench terminal-pro ...`, `rome-bench validate DIR`, `rome-bench check DIR` (`--help`).
"""
