"""`roll sft`: error-masked supervised fine-tuning on JSONL agent trajectories."""
