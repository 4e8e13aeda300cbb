#!/usr/bin/env bash
# Set-up, then the main job: `roll train configs/gem_guess_the_number.yaml` (an SFT warm start on scripted
# expert games, then IPA on GuessTheNumber with the builtin SmolLM2-135M-Instruct, all on this machine's CPU),
# ending with the table of eval success for the base model, after SFT and after RL; then its curves as PNG
# under runs/gem_guess_the_number/.
# Extra arguments are config overrides, e.g. `./scripts/quickstart.sh steps=4 eval.episodes=16`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/roll train configs/gem_guess_the_number.yaml "$@"
.venv/bin/roll plot runs/gem_guess_the_number
