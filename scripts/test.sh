#!/usr/bin/env bash
# Set-up, then the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
