#!/usr/bin/env bash
# The GPU check: the torch engine and trainer on CUDA (greedy = transformers, one IPA step with weight sync),
# the Megatron-core and SGLang checks where those are installed; prints a table, exits 1 if a check failed.
#   scripts/gpu_wheels.sh                            # first, where PyPI is reachable: fills .whl/
#   scripts/gpu_check.sh [--model FOLDER] [--json F] # on the GPU machine, with .whl carried
#   ALE_GPU_CHECK_DEVICE=cpu scripts/gpu_check.sh    # the same checks on the CPU (the CPU suite runs this)
# Wheels in .whl/ are for Python 3.12 (the GPU image's) and are installed only under a Python 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if compgen -G ".whl/*.whl" >/dev/null && "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
  site=${ALE_GPU_SITE:-/tmp/ale-gpu-site}
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
if [[ -d .whl/models ]]; then
  export ALE_MODEL_CACHE="$PWD/.whl/models"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec timeout "${ALE_GPU_CHECK_TIMEOUT:-480}" "$PYTHON" -m roll.gpu_check "$@"
