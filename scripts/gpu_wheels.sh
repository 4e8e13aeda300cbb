#!/usr/bin/env bash
# Fills .whl/ (git-ignored) with what scripts/gpu_check.sh needs on the GPU machine and cannot fetch there (no
# network): wheels for Python 3.12 of our pure-Python dependencies that its image lacks (pydantic and its own
# dependencies; the image has torch, transformers, rich, PyYAML, safetensors) plus megatron-core, and the built
# folder of builtin:tiny-qwen3-moe (28 MB: the GPU machine cannot build it, since its tokenizer comes from the
# 98 MB SmolLM2 GGUF). Run it here, where PyPI is reachable; the device run then carries `.whl`.
#   scripts/gpu_wheels.sh                      # MEGATRON_CORE_VERSION=x.y.z pins megatron-core
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
LIMIT_MIB=64  # what may travel to the device machine: the working tree plus carried folders

installed() { "$PYTHON" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

specs=()
for dist in pydantic pydantic-core annotated-types typing-inspection; do
  specs+=("$dist==$(installed "$dist")")
done
specs+=("megatron-core${MEGATRON_CORE_VERSION:+==$MEGATRON_CORE_VERSION}")

rm -rf .whl
mkdir -p .whl/models
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${specs[@]}"

folder=$("$PYTHON" -c "from roll.models.builtin import tiny_qwen3_moe_folder; print(tiny_qwen3_moe_folder())")
cp -r "$folder" .whl/models/

carried=$(du -sb .whl | cut -f1)
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
total_mib=$(( (carried + tracked) / 1048576 ))
ls -l .whl .whl/models/*
echo "carried .whl: $(( carried / 1048576 )) MiB; with the tracked tree: ${total_mib} MiB (limit ${LIMIT_MIB})"
if (( total_mib >= LIMIT_MIB )); then
  echo "too big to travel to the device machine: drop a wheel or the model folder" >&2
  exit 1
fi
