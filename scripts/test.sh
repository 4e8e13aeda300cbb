#!/usr/bin/env bash
# Set-up, then the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
# OpenMP's default busy-waiting makes torch many times slower when more threads than cores compete.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
exec .venv/bin/python -m pytest "$@"
