"""Grading the agent cannot touch: what runs between the agent's last command and the task's tests.

The agent may have been root in the sandbox the tests run in, and may want its reward more than its task.
So before the tests (issue 26):

1. *Cull.* Every process but the rocklet (the sandbox's PID 1) is killed: a daemon the agent detached
   cannot rewrite the reward or the tests afterwards. This runs as a process, and so could itself be
   subverted (an /etc/ld.so.preload, a fake /opt/rock), so it is trusted only once three reads that the
   rocklet answers in its own process (no program started) confirm it: the sandbox's cgroup holds the
   rocklet alone, /etc/ld.so.preload is as it was before the agent, and /opt/rock is still the worker's
   read-only runtime mount.
2. *Seal.* With nothing of the agent's left running, ROCK's own interpreter (from that read-only mount)
   recreates the folders the tests and the reward live in, so nothing the agent placed there survives,
   and fingerprints the grading toolchain: the interpreters and tools the tests are run with (bash, sh,
   python3, pytest, ...: the file each resolves to on PATH, and its bytes), the C library, the loader and
   libpython, the loader's preload file, Python's start-up hooks (`sitecustomize`, `usercustomize`, `.pth`
   files that run code) and its standard library (each file's inode, size and ctime). The tests' Python
   then reads bytecode only from a fresh folder (PYTHONPYCACHEPREFIX).
3. *Compare.* The fingerprint must equal the one taken when the sandbox was opened, before the agent ran.
   A difference means the tests would run on tools the agent changed: the episode is *tampered*, scores 0,
   and its tests are not run.

What this does not cover (docs/integrity.md): the tests run the agent's own work (its code, its files), so
a solution module that exits 0 on import still passes a test that only checks an exit status.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Protocol, runtime_checkable

from rock.sdk.runtime import RUNTIME_MOUNT, sandbox_python
from rome.terminal_tasks.bundle import BUNDLE_ROOT
from rome.terminal_tasks.sandbox import CommandResult, SandboxError
from rome.terminal_tasks.task import TESTS_MOUNT, VERIFIER_LOGS

TRUSTED_PYTHON = [*sandbox_python(), "-I", "-S"]
"""ROCK's interpreter, started through its own loader from the worker's read-only mount: no file of the
image's (or the agent's) is run, and `-I -S` keep PYTHON* variables and site-packages out."""
PRELOAD = "/etc/ld.so.preload"
CGROUP_PROCS = ("/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/pids/cgroup.procs")
"""Where a container sees the pids of its own cgroup (cgroup v2, then v1's pids controller)."""
CULL_CHECKS = 60
CULL_CHECK_DELAY = 0.05
"""Reads of the cgroup after the cull: killed orphans leave once the rocklet has reaped them."""
FRESH_DIRS = (TESTS_MOUNT, VERIFIER_LOGS, BUNDLE_ROOT)
PYCACHE_PREFIX = f"{BUNDLE_ROOT}/pycache"
"""Where the tests' Python keeps its bytecode (PYTHONPYCACHEPREFIX): a folder made after the cull, so no
`.pyc` the agent planted in a `__pycache__` (with a header matching its source) is ever loaded."""
GUARD_TIMEOUT = 120.0

_PROGRAM = r"""
import hashlib, json, os, signal, stat, sys, glob

TOOLS = ("bash", "sh", "python3", "python", "pytest", "py.test", "env", "uv", "uvx")
SITE_GLOBS = ("/usr/lib/python3*", "/usr/local/lib/python3*", "/usr/lib/python3*/*-packages",
              "/usr/local/lib/python3*/*-packages", "/opt/conda/lib/python3*",
              "/opt/conda/lib/python3*/*-packages")
HOOKS = ("sitecustomize.py", "usercustomize.py")
STDLIB_GLOBS = ("/usr/lib/python3.*", "/usr/local/lib/python3.*", "/opt/conda/lib/python3.*")
PACKAGE_DIRS = ("site-packages", "dist-packages", "__pycache__")
LIBRARIES = ("/usr/local/lib/libpython3*.so*", "/usr/lib/*/libpython3*.so*", "/lib/*/libc.so.6",
             "/usr/lib/*/libc.so.6", "/lib64/ld-linux*.so*", "/usr/lib/*/ld-linux*.so*", "/lib/ld-musl*.so*")


DIGESTS = {}


def digest(path):
    # By the file it resolves to: python3 and python, /lib and /usr/lib name the same files, read once.
    real = os.path.realpath(path)
    if real not in DIGESTS:
        try:
            with open(real, "rb") as handle:
                DIGESTS[real] = hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError as exc:
            DIGESTS[real] = "unreadable:%d" % exc.errno
    return DIGESTS[real]


def fingerprint():
    found = {}
    for name in TOOLS:
        where = "absent"
        for folder in os.environ.get("PATH", "").split(":"):
            path = os.path.join(folder or ".", name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                real = os.path.realpath(path)
                where = "%s -> %s %s" % (path, real, digest(real))
                break
        found["tool " + name] = where
    found["preload"] = digest("/etc/ld.so.preload") if os.path.lexists("/etc/ld.so.preload") else "absent"
    for path in sorted({p for pattern in LIBRARIES for p in glob.glob(pattern)}):
        found["library " + path] = "%s %s" % (os.path.realpath(path), digest(path))
    for root in sorted({d for pattern in STDLIB_GLOBS for d in glob.glob(pattern) if os.path.isdir(d)}):
        found["stdlib " + root] = stdlib_print(root)
    for folder in sorted({d for pattern in SITE_GLOBS for d in glob.glob(pattern) if os.path.isdir(d)}):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if name in HOOKS or (name.endswith(".pth") and runs_code(path)):
                found["hook " + path] = digest(path)
    return found


def stdlib_print(root):
    # Every file's identity, not its bytes (thousands of files): a write or a replacement changes its
    # ctime, which no process can set back. Installed packages and bytecode caches are left out.
    summary, count = hashlib.sha256(), 0
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(d for d in folders if d not in PACKAGE_DIRS)
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            line = "%s %d %d %d %d\n" % (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            summary.update(line.encode("utf-8", "surrogateescape"))
            count += 1
    return "%d files %s" % (count, summary.hexdigest())


def runs_code(path):
    try:
        with open(path, "rb") as handle:
            return any(line.lstrip().startswith((b"import ", b"import\t")) for line in handle)
    except OSError:
        return True


def pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def cull():
    spare = {1, os.getpid()}
    stopped = set()
    for _ in range(50):
        running = [p for p in pids() if p not in spare and p not in stopped]
        if not running:
            break
        for pid in running:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
            stopped.add(pid)
    for _ in range(50):
        left = [p for p in pids() if p not in spare]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return len(stopped)


def remove(path):
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        for name in os.listdir(path):
            remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def fresh(folder):
    # Every parent must be a real folder (not the agent's symlink to elsewhere); the folder itself is new.
    parent = "/"
    for part in folder.strip("/").split("/")[:-1]:
        parent = os.path.join(parent, part)
        if os.path.islink(parent) or (os.path.lexists(parent) and not os.path.isdir(parent)):
            remove(parent)
        if not os.path.lexists(parent):
            os.mkdir(parent, 0o755)
    remove(folder)
    os.mkdir(folder, 0o755)


def seal(folders):
    for folder in folders:
        fresh(folder)
    home = os.environ.get("HOME") or "/root"
    for name in ("uv", "uvx", "env"):  # what the uv installer stand-in would otherwise leave in place
        path = os.path.join(home, ".local", "bin", name)
        if os.path.lexists(path):
            remove(path)
    return fingerprint()


mode, folders = sys.argv[1], sys.argv[2:]
if mode == "cull":
    print(json.dumps({"killed": cull()}))
elif mode == "seal":
    print(json.dumps(seal(folders)))
else:
    print(json.dumps(fingerprint()))
"""


@runtime_checkable
class GuardableSandbox(Protocol):
    """A sandbox whose worker mounts ROCK's runtime read-only at /opt/rock (a ROCK sandbox) and whose file
    reads are answered by the rocklet's own process, so they run no program of the sandbox's."""

    def run_argv(self, argv: list[str], timeout: float) -> CommandResult:
        """Run `argv` without a shell (from /), as a fresh process."""

    def read_text(self, path: str) -> str | None: ...


class Baseline:
    """The sandbox's grading toolchain before the agent ran: its fingerprint and its preload file."""

    def __init__(self, fingerprint: dict[str, str], preload: str | None) -> None:
        self.fingerprint = fingerprint
        self.preload = preload


def take_baseline(sandbox: GuardableSandbox) -> Baseline:
    """Fingerprint the fresh sandbox's grading toolchain; call before the agent runs a command."""
    preload = sandbox.read_text(PRELOAD)
    return Baseline(_run_program(sandbox, "print"), preload)


def seal_for_grading(sandbox: GuardableSandbox, baseline: Baseline) -> str | None:
    """Cull the agent's processes, recreate the tests' and the reward's folders, and check the toolchain.

    Returns why the episode is tampered (its tests must not run; it scores 0), or None when the tests may
    run. Raises SandboxError when the sandbox fails or the cull cannot be confirmed for want of a cgroup.
    """
    _run_program(sandbox, "cull")
    survivors = _survivors(sandbox)
    if survivors:
        return (
            f"processes {survivors} outlived the cull before grading: something the agent left (a preloaded "
            "library or a replaced runtime) subverted it"
        )
    preload = sandbox.read_text(PRELOAD)
    if preload != baseline.preload:
        return f"the agent changed {PRELOAD}, which would load its code into every program of the grading"
    runtime_problem = _runtime_problem(sandbox)
    if runtime_problem is not None:
        return runtime_problem
    changed = _differences(baseline.fingerprint, _run_program(sandbox, "seal", *FRESH_DIRS))
    if changed:
        return "the agent changed the grading toolchain: " + "; ".join(changed)
    return None


def _run_program(sandbox: GuardableSandbox, mode: str, *args: str) -> dict[str, str]:
    result = sandbox.run_argv([*TRUSTED_PYTHON, "-c", _PROGRAM, mode, *args], timeout=GUARD_TIMEOUT)
    lines = result.output.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if result.exit_code == 0 and lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise SandboxError(
            f"the grading guard ({mode}) failed in the sandbox (exit {result.exit_code}): "
            f"{result.output[-500:]!r}; is /opt/rock the worker's runtime mount?"
        )
    return {str(key): str(value) for key, value in answer.items()}


def _survivors(sandbox: GuardableSandbox) -> list[int]:
    """Pids other than the rocklet's left in the sandbox's cgroup, read by the rocklet itself; the read is
    repeated for a while, since killed orphans leave only once the rocklet has reaped them."""
    path = next((p for p in CGROUP_PROCS if sandbox.read_text(p) is not None), None)
    if path is None:
        raise SandboxError(
            f"cannot confirm that no process of the agent's survived: none of {CGROUP_PROCS} is readable "
            "in the sandbox; run the fleet on a host with cgroup v1 (pids) or v2"
        )
    left: list[int] = []
    for _ in range(CULL_CHECKS):
        text = sandbox.read_text(path) or ""
        left = sorted(int(p) for p in text.split() if p.isdigit() and int(p) != 1)
        if not left:
            return []
        time.sleep(CULL_CHECK_DELAY)
    return left


def _runtime_problem(sandbox: GuardableSandbox) -> str | None:
    """Why /opt/rock is not the worker's read-only runtime mount any more (moved away, shadowed), or None."""
    mounts = sandbox.read_text("/proc/self/mountinfo") or ""
    for line in mounts.splitlines():
        fields = line.split()
        # id parent major:minor root mount-point options ...
        if len(fields) > 5 and fields[4] == RUNTIME_MOUNT:
            if "ro" in fields[5].split(","):
                return None
            return f"{RUNTIME_MOUNT} is mounted writable: {line!r}"
    return (
        f"{RUNTIME_MOUNT} is no longer the worker's runtime mount (the agent moved or replaced it), so no "
        "trusted interpreter is left to grade with"
    )


def _differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changed = []
    for key in sorted(set(before) | set(after)):
        was, now = before.get(key, "absent"), after.get(key, "absent")
        if was != now:
            changed.append(f"{key}: {_short(was)} became {_short(now)}")
    return changed


def _short(text: str) -> str:
    return shlex.quote(text if len(text) < 120 else text[:117] + "...")
