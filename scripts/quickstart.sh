#!/usr/bin/env bash
# Set-up, then the main job: `roll train configs/ipa.yaml`, the ROME recipe in miniature on this machine's CPU
# (generated and validated terminal tasks, oracle-teacher trajectories in iflow's format, filtered, an
# error-masked SFT warm start of the builtin SmolLM2-135M-Instruct, then asynchronous IPA with iflow acting in
# ROCK sandboxes), ending with the table of held-out success for the base model, after SFT and after RL; then
# its curves as PNG under runs/ipa/.
# Extra arguments are config overrides, e.g. `./scripts/quickstart.sh steps=2`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/roll train configs/ipa.yaml "$@"
.venv/bin/roll plot runs/ipa
.venv/bin/roll view runs/ipa
echo "The run's viewer: open $(pwd)/runs/ipa/view/index.html in a browser (or: .venv/bin/roll view runs/ipa --serve)"
