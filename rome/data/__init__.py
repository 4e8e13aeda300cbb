"""ROME data: generated task families, validation, trajectory collection, filtering and SFT export.

- `families`: the task families (`FAMILIES`, `get_family`); `layout.render` writes an instance in the Harbor
  layout rome-bench loads; `taskset.generate` / `taskset.split` make a task set and its train/eval split.
- `validate.validate_taskset`: rome-bench's oracle/nop validation plus an oracle re-run (flakiness).
- `collect.collect`: iFlow in ROCK sandboxes, model calls through the proxy (deploy mode), one
  `types.TrajectoryRecord` per JSONL line; `teacher` is the oracle teacher's model endpoint.
- CLI: `rome data ...` (`rome/data/cli.py`).
"""
