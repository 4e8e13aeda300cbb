"""The grading bundle uploaded next to a task's tests: pytest (with pytest-json-ctrf), uv/uvx, and a python3.

Layout under /opt/rome-bench:
- `pytest/`: the host's pytest, its pure-Python dependencies and pytest-json-ctrf (with their dist-info, so
  pytest finds the `--ctrf` plugin by its entry point); on PYTHONPATH.
- `pytest/bin/pytest`: first on PATH; runs pytest on the image's python3, or on the runtime ROCK mounts at
  /opt/rock when the image has none.
- `pytest/fallback/`: last on PATH, so the image's own tools win: `python3`/`python` (ROCK's runtime) for
  images without Python.
- `uv/`: `uv` and `uvx` from the `uv` wheel, uploaded only for tests that call them; last on PATH, and also
  where uv's installer puts them ($HOME/.local/bin), so "install uv with curl, then uvx ..." scripts find
  them when the download fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from rock.sdk.runtime import RUNTIME_MOUNT, sandbox_python

BUNDLE_ROOT = "/opt/rome-bench"
PYTEST_MOUNT = f"{BUNDLE_ROOT}/pytest"
UV_MOUNT = f"{BUNDLE_ROOT}/uv"
BUNDLE_FORMAT = 4  # part of the bundle's cache folder name: bump it when the bundle's layout changes
# pytest, its pure-Python dependencies and the CTRF report plugin, copied file by file from their installs.
PYTEST_DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments", "pytest-json-ctrf")
# ROCK's interpreter started through its own loader: the image's libc and Python do not matter.
ROCK_PYTHON = " ".join(sandbox_python())

_PYTEST_SHIM = f"""#!/bin/sh
# pytest on the image's python3 when it has one, else on the interpreter ROCK mounts at {RUNTIME_MOUNT}.
for py in python3 python; do
  found=$(command -v "$py" 2>/dev/null) || continue
  case "$found" in {PYTEST_MOUNT}/fallback/*) ;; *) exec "$found" -m pytest "$@" ;; esac
done
exec {ROCK_PYTHON} -m pytest "$@"
"""
_PYTHON_SHIM = f'#!/bin/sh\nexec {ROCK_PYTHON} "$@"\n'


def _cache_root(name: str) -> Path:
    from importlib.metadata import version

    tag = f"{version('pytest')}-{version('pytest-json-ctrf')}-{version('uv')}"
    return Path(tempfile.gettempdir()) / f"rome-bench-{name}-{tag}-v{BUNDLE_FORMAT}-{os.getuid()}"


def _built_once(name: str, fill: Callable[[Path], None]) -> Path:
    """A folder `name/` made once per version set, built aside and renamed into place."""
    root = _cache_root(name)
    cached = root / name
    if cached.is_dir():
        return cached
    root.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=root))
    folder = scratch / name
    folder.mkdir()
    fill(folder)
    with contextlib.suppress(OSError):  # another process may have put its copy there first
        os.rename(folder, cached)
    shutil.rmtree(scratch, ignore_errors=True)
    return cached


def _script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _fill_pytest(bundle: Path) -> None:
    from importlib.metadata import distribution

    for name in PYTEST_DISTRIBUTIONS:
        dist = distribution(name)
        for file in dist.files or []:
            parts = file.parts
            # Only what lives in site-packages: not console scripts (../../bin) nor byte code.
            if parts[0] == ".." or "__pycache__" in parts or file.suffix == ".pyc":
                continue
            target = bundle / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(str(dist.locate_file(file))), target)
    _script(bundle / "bin" / "pytest", _PYTEST_SHIM)
    _script(bundle / "fallback" / "python3", _PYTHON_SHIM)
    _script(bundle / "fallback" / "python", _PYTHON_SHIM)


def _fill_uv(folder: Path) -> None:
    import uv

    uv_bin = Path(uv.find_uv_bin())
    shutil.copy2(uv_bin, folder / "uv")
    uvx = uv_bin.with_name("uvx")
    if uvx.is_file():
        shutil.copy2(uvx, folder / "uvx")
    else:
        _script(folder / "uvx", f'#!/bin/sh\nexec {UV_MOUNT}/uv tool run "$@"\n')


@cache
def pytest_bundle() -> Path:
    """The folder uploaded as /opt/rome-bench/pytest (see the module's docstring)."""
    return _built_once("pytest", _fill_pytest)


@cache
def uv_bundle() -> Path:
    """The folder uploaded as /opt/rome-bench/uv: the uv and uvx binaries of the host's `uv` wheel."""
    return _built_once("uv", _fill_uv)


def verifier_path(with_uv: bool) -> str:
    """PATH for the verifier: the pytest shim first, the image's own tools next, our fallbacks last."""
    tail = f"{PYTEST_MOUNT}/fallback" + (f":{UV_MOUNT}" if with_uv else "")
    return f"{PYTEST_MOUNT}/bin:$PATH:{tail}"


# Where the image has no python3 of its own, uv would download a managed Python; here it cannot
# (UV_PYTHON_DOWNLOADS=never), and a venv made from ROCK's interpreter cannot start (that interpreter runs
# only through ROCK's loader: "libpython3.11.so.1.0: cannot open shared object file"). The distribution's
# python3, from the package cache, stands in; without apt or the cache, uv says it found no interpreter.
UV_SYSTEM_PYTHON = (
    "[ -x /usr/bin/python3 ] || [ -x /usr/local/bin/python3 ] || ! command -v apt-get >/dev/null || "
    "{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
    "python3; } >/dev/null 2>&1 || true"
)

# uv's installer writes this file and scripts `source` it; ours puts the bundled uv on PATH instead.
UV_INSTALLER_STANDIN = (
    f"{{ {UV_SYSTEM_PYTHON}; }}; "
    'mkdir -p "$HOME/.local/bin" && for t in uv uvx; do '
    f'[ -e "$HOME/.local/bin/$t" ] || ln -s {UV_MOUNT}/$t "$HOME/.local/bin/$t"; done; '
    '[ -e "$HOME/.local/bin/env" ] || '
    'printf \'export PATH="$HOME/.local/bin:$PATH"\\n\' > "$HOME/.local/bin/env"'
)
