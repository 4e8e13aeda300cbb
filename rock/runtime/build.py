"""Build the runtime folder: interpreter, filtered standard library, shared libraries, loader, rocklet code.

The folder is named by a hash of everything that goes into it, and built under a lock into a temporary
folder that is renamed into place when complete, so concurrent callers and interrupted builds are safe.
The Python part (about 70 MB) is built once per interpreter; each rocklet version hard-links it.
"""

import compileall
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import rock.rocklet
from rock.runtime.home import ale_home
from rock.sdk.runtime import LOADER

BUILDER_VERSION = "2"
# Parts of the standard library the rocklet never needs (tests, GUI, installers, build configuration).
SKIPPED_DIRS = {"test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
SKIPPED_PREFIXES = ("site-packages", "config-", "__phello__")
SKIPPED_EXTENSIONS = re.compile(r"^(_tkinter|_test\w*|_ctypes_test|_xxtestfuzz|xxlimited\w*)\.")
# Client-side modules that need httpx/pydantic; the server never imports them.
HOST_ONLY_MODULES = {"client.py", "types.py"}
LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)\s+\(0x[0-9a-f]+\)|^\s*(/\S+)\s+\(0x[0-9a-f]+\)")


class RuntimeBuildError(RuntimeError):
    """The runtime folder could not be built."""


def _interpreter() -> Path:
    return Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _dynload() -> Path:
    return Path(sysconfig.get_config_var("DESTSHARED") or _stdlib() / "lib-dynload")


def _rocklet_sources() -> list[Path]:
    package = Path(rock.rocklet.__file__).parent
    return sorted(p for p in package.glob("*.py") if p.name not in HOST_ONLY_MODULES)


def _python_key() -> str:
    exe = _interpreter()
    stat = exe.stat()
    parts = [BUILDER_VERSION, str(exe), sys.version, str(stat.st_size), str(stat.st_mtime_ns)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _runtime_key() -> str:
    digest = hashlib.sha256(_python_key().encode())
    for source in _rocklet_sources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_runtime(home: Path | None = None) -> Path:
    """The runtime folder for this interpreter and rocklet version, built on first use (seconds)."""
    root = (home or ale_home()) / "runtime"
    target = root / f"rocklet-{_runtime_key()}"
    if (target / "STAMP").exists():
        return target
    with _locked(root):
        if (target / "STAMP").exists():
            return target
        python_part = root / f"python-{_python_key()}"
        if not (python_part / "STAMP").exists():
            _build_atomically(python_part, _build_python)
            # Older Python parts only seed new builds; runtimes built from them hold hard links of their own.
            for stale in root.glob("python-*"):
                if stale != python_part:
                    shutil.rmtree(stale, ignore_errors=True)
        _build_atomically(target, lambda dest: _build_rocklet(python_part, dest))
    return target


def _build_atomically(target: Path, build: Callable[[Path], None]) -> None:
    scratch = target.with_name(target.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    build(scratch)
    scratch.rename(target)


def _build_python(dest: Path) -> None:
    exe, stdlib = _interpreter(), _stdlib()
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(exe, dest / "bin" / "python3")
    lib = dest / "lib"
    stdlib_dest = lib / version
    shutil.copytree(stdlib, stdlib_dest, ignore=_skip_stdlib, symlinks=False)
    dynload_dest = stdlib_dest / "lib-dynload"
    if _dynload() != stdlib / "lib-dynload":
        shutil.copytree(_dynload(), dynload_dest, ignore=_skip_stdlib, dirs_exist_ok=True)
    loader = _copy_shared_libraries([exe, *sorted(dynload_dest.glob("*.so"))], lib)
    shutil.copy2(loader, dest / LOADER)
    (dest / "STAMP").write_text(json.dumps({"python": sys.version, "interpreter": str(exe)}) + "\n")


def _skip_stdlib(folder: str, names: list[str]) -> set[str]:
    return {
        name
        for name in names
        if name in SKIPPED_DIRS
        or name.startswith(SKIPPED_PREFIXES)
        or SKIPPED_EXTENSIONS.match(name)
        or name.endswith((".opt-1.pyc", ".opt-2.pyc"))
    }


def _copy_shared_libraries(binaries: list[Path], lib: Path) -> Path:
    """Copy what `ldd` lists for each binary into `lib`; returns the dynamic loader's path on the host."""
    loader: Path | None = None
    for binary in binaries:
        try:
            result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
        except FileNotFoundError:
            raise RuntimeBuildError("ldd is not installed; install it (Debian: libc-bin) and retry") from None
        if "not found" in result.stdout:
            # An optional extension whose library this host lacks (say, curses): leave it out.
            if binary.suffix == ".so":
                binary.unlink()
                continue
            raise RuntimeBuildError(f"{binary} needs libraries this host lacks:\n{result.stdout}")
        for line in result.stdout.splitlines():
            match = LDD_LINE.match(line)
            if not match:
                continue
            if match.group(3):
                loader = Path(match.group(3))
                name, path = loader.name, loader
            else:
                name, path = match.group(1), Path(match.group(2))
            if not (lib / name).exists():
                shutil.copy2(os.path.realpath(path), lib / name)
    if loader is None:
        raise RuntimeBuildError(f"ldd named no dynamic loader for {binaries[0]}; is it a dynamic executable?")
    return loader


def _build_rocklet(python_part: Path, dest: Path) -> None:
    shutil.copytree(python_part, dest, copy_function=os.link)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    # Beside the standard library, which is on sys.path whatever the interpreter's site.py does (Debian's
    # looks in dist-packages), so the rocklet runs with -S too.
    package = dest / "lib" / version / "rock"
    (package / "rocklet").mkdir(parents=True)
    (package / "__init__.py").write_text('"""ROCK: only the rocklet is shipped in the sandbox runtime."""\n')
    for source in _rocklet_sources():
        shutil.copy2(source, package / "rocklet" / source.name)
    if not compileall.compile_dir(package, quiet=1):
        raise RuntimeBuildError(f"the rocklet's sources in {package} do not compile")
    (dest / "STAMP").unlink()
    (dest / "STAMP").write_text(json.dumps({"python": sys.version, "rocklet_key": dest.name}) + "\n")
