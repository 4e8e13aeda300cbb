"""The fleet's package cache: devpi-server (a PyPI caching mirror) and apt-cacher, on host loopback.

Both keep their cache on disk under one folder (`pypi/`, `apt/`). Seeded once while online (`rock packages
seed`), they can then run with `offline=True`: devpi answers only from what it holds and apt-cacher
serves only cached files, so nothing a sandbox asks for leaves the machine.

Sandboxes reach both only through the worker's read-only forwarder (rock/worker/packages.py: GET and HEAD
under the mirror index). devpi's root user has a random password kept in `devpi.root-password` in the cache
folder (owner-only, never mounted into a sandbox), and apt-cacher fetches only from the configured Debian
mirrors (rock/packages/apt.py). An offline instance works on a scratch copy of the devpi database; a copy
whose owner died without cleaning up is removed by the next instance that starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from rock.packages.apt import APT_MIRRORS, apt_settings, key_package_files

PYPI_INDEX = "/root/pypi/"
PYPI_PATH = f"{PYPI_INDEX}+simple/"
ROOT_PASSWORD_FILE = "devpi.root-password"
SCRATCH_PREFIX = "rock-devpi-"
SCRATCH_LOCK = "owner.lock"
# devpi stretches its secret file into the key that signs login tokens with argon2 at 512 MiB x 16 passes,
# 4 s of each start on 2 idle cores and 18 s on loaded ones. Stretching adds nothing to a secret of 32
# random bytes (`_secret` writes one, owner-only): one pass over devpi's minimum memory derives it at once.
DEVPI_KEY_DERIVATION = ("--argon2-time-cost", "1", "--argon2-memory-cost", "8", "--argon2-parallelism", "1")


def default_folder() -> Path:
    """Where set-up seeds the cache and a rome-bench fleet looks for it: $ALE_HOME/package-cache."""
    from rock.runtime.home import ale_home

    return ale_home() / "package-cache"


START_TIMEOUT = 300.0


class PackageCacheError(RuntimeError):
    """A cache server could not start; the message names its log."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (Linux PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tool(name: str) -> str | None:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else shutil.which(name)


def apt_cacher() -> str | None:
    """Debian's apt-cacher (apt-cacher-ng cannot bind its socket under gVisor, where this project runs)."""
    return shutil.which("apt-cacher") or (
        "/usr/sbin/apt-cacher" if Path("/usr/sbin/apt-cacher").is_file() else None
    )


class PackageCache:
    """`with PackageCache(folder) as cache:` runs the servers; `cache.pypi` and `cache.apt` are host:port."""

    def __init__(
        self,
        folder: Path,
        offline: bool = False,
        start_timeout: float = START_TIMEOUT,
        apt_mirrors: tuple[str, ...] = APT_MIRRORS,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.offline, self.start_timeout = offline, start_timeout
        self.apt_mirrors = apt_mirrors
        self.pypi: str | None = None
        self.apt: str | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._scratch: Path | None = None
        self._scratch_lock: Any = None
        self._lock: Any = None

    def __enter__(self) -> PackageCache:
        try:
            self.pypi = self._start_devpi()
            self.apt = self._start_apt()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        if self._scratch_lock is not None:
            self._scratch_lock.close()
            self._scratch_lock = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def pypi_url(self) -> str:
        return f"http://{self.pypi}{PYPI_PATH}"

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        # In our process group, and told by the kernel when we die: apt-cacher moves itself to a process
        # group of its own, so stopping ours alone would leave it running.
        with log.open("ab") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self._procs.append(proc)
        return proc

    def _start_devpi(self) -> str:
        server, init = _tool("devpi-server"), _tool("devpi-init")
        if server is None or init is None:
            raise PackageCacheError(
                "devpi-server is not installed; `pip install devpi-server` (ALE depends on it)"
            )
        data = self.folder / "pypi"
        log = self.folder / "devpi.log"
        data.parent.mkdir(parents=True, exist_ok=True)
        # Instances starting side by side take turns: one initializes the database and sets root's password
        # while no other copies it.
        with _folder_lock(data.parent / "setup.lock"):
            if not (data / ".nodeinfo").is_file():
                subprocess.run([init, "--serverdir", str(data)], check=True, capture_output=True, timeout=300)
            self._root_password(data)
            if not self.offline:
                self._lock_online(data.parent)
            else:
                # devpi writes to its folder even offline: each offline instance gets its own copy of the
                # seeded one (a few MB), so fleets started side by side never share a database.
                remove_orphan_scratch()
                self._scratch, self._scratch_lock = owned_scratch()
                data = Path(shutil.copytree(data, self._scratch / "pypi"))
                log = self._scratch / "devpi.log"
        port = _free_port()
        args = [server, "--serverdir", str(data), "--host", "127.0.0.1", "--port", str(port)]
        args += ["--secretfile", str(self._secret(data)), *DEVPI_KEY_DERIVATION]
        # Only root (whose password no sandbox or image build has) may create users and indexes: by default
        # anyone reaching devpi could, and an image build reaches it on host loopback, past the forwarder.
        args += ["--restrict-modify", "root"]
        # devpi's 5 s default for upstream requests is too short on a loaded machine: the project would be
        # reported as missing.
        args += ["--request-timeout", "60"]
        if self.offline:
            args.append("--offline-mode")
        proc = self._spawn(args, log)
        self._wait(proc, f"http://127.0.0.1:{port}/+api", log)
        return f"127.0.0.1:{port}"

    def _lock_online(self, folder: Path) -> None:
        """One online instance per folder: two devpi servers writing one database would corrupt it."""
        import fcntl

        self._lock = (folder / "online.lock").open("w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise PackageCacheError(
                f"another fleet serves the package cache in {folder} online; start this one with "
                "--package-cache-offline (it then reads its own copy) or give it another folder"
            ) from None

    def _root_password(self, data: Path) -> None:
        """Give devpi's root user a random password (once per cache folder), kept owner-only beside the
        database: with root's empty default, anything that reaches devpi could log in and replace the
        mirror index with its own packages."""
        path = data.parent / ROOT_PASSWORD_FILE
        try:  # owner-only from its creation
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        password = os.urandom(24).hex()
        with os.fdopen(fd, "w") as out:
            out.write(password)
        passwd = _tool("devpi-passwd")
        if passwd is None:
            path.unlink()
            raise PackageCacheError("devpi-passwd is not installed; reinstall devpi-server")
        run = subprocess.run(
            [passwd, "root", "--serverdir", str(data)],
            input=f"{password}\n{password}\n",
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode != 0:
            path.unlink()
            raise PackageCacheError(f"could not set devpi's root password in {data}: {run.stderr[-2000:]}")

    def _secret(self, data: Path) -> Path:
        secret = data.parent / "devpi.secret"
        try:  # owner-only from its creation: a write-then-chmod would leave it readable for a moment
            fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return secret
        with os.fdopen(fd, "w") as out:
            out.write(os.urandom(32).hex())
        return secret

    def _start_apt(self) -> str | None:
        binary = apt_cacher()
        if binary is None:
            return None  # apt caching is optional: `apt-get install apt-cacher` (scripts/setup.sh does)
        cache = self.folder / "apt"
        # Offline, the cache is only read: instances side by side share it, each with its own logs.
        logs = (
            Path(tempfile.mkdtemp(prefix="rock-apt-", dir=self._scratch))
            if self.offline
            else self.folder / "apt-logs"
        )
        cache.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        # The package's defaults, with this instance's places, port and (running as whoever started the
        # fleet) user on top. `-R 0`: no retries, a failed upstream fetch fails at once.
        args = [binary, "-R", "0", "daemon_addr=127.0.0.1", f"daemon_port={port}"]
        args += [f"cache_dir={cache}", f"log_dir={logs}", f"user={os.getuid()}", f"group={os.getgid()}"]
        args += apt_settings(self.apt_mirrors)
        key_package_files(cache, self.apt_mirrors)
        if self.offline:
            args.append("offline_mode=1")
        log = logs / "apt-cacher.log"
        proc = self._spawn(args, log)
        self._wait(proc, f"http://127.0.0.1:{port}/", log)
        return f"127.0.0.1:{port}"

    def _wait(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise PackageCacheError(f"{Path(proc.args[0]).name} exited at start; see {log}")  # type: ignore[index]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code < 500:
                    return
            time.sleep(0.5)
        raise PackageCacheError(f"{url} did not answer within {self.start_timeout:.0f} s; see {log}")


@contextlib.contextmanager
def _folder_lock(path: Path) -> Iterator[None]:
    import fcntl

    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def owned_scratch(root: Path | None = None) -> tuple[Path, Any]:
    """A scratch folder and an exclusive lock on its owner file, held while this process uses it."""
    import fcntl

    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=root))
    lock = (scratch / SCRATCH_LOCK).open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return scratch, lock


def remove_orphan_scratch(root: Path | None = None) -> list[Path]:
    """Remove scratch copies (this user's) whose owner is gone: an offline instance killed before its
    cleanup (SIGKILL, a lost terminal) leaves one behind, and its lock was released with the process."""
    import fcntl

    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        lock_path = folder / SCRATCH_LOCK
        try:
            if folder.is_symlink() or folder.stat().st_uid != os.getuid() or not lock_path.is_file():
                continue
            with lock_path.open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, OSError):
            continue  # its owner still runs (or the folder went away meanwhile)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
