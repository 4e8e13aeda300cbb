#!/usr/bin/env bash
# Set-up, then the main job. Until `roll train` exists, that is the ROCK demo: a fleet, a few sandboxes
# opened at once, commands run in them, a table of what they said, and a clean shutdown.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python -m rock.demo "${1:-4}"
