"""Named persistent shell sessions: one live shell per session; cwd, variables and functions persist.

The shell is bash when the image has it, started interactive but without a terminal: on a timeout SIGINT
aborts the running command list and returns bash to its prompt, as Ctrl-C would. Each command is handed over
as `eval '<command>' </dev/null`, followed by a line that prints a marker with a per-command nonce, the exit
status and $PWD; the rocklet reads the shell's output up to that marker. After a timeout every process the
command started is killed, while jobs put in the background by earlier commands are spared. A shell that
still does not answer (its stdout redirected, say), or a plain sh (see `session_argv`), is replaced on
timeout by a new one that gets back the last cwd and exported variables, so the session stays usable.
"""

import contextlib
import os
import pty
import re
import signal
import subprocess
import threading
import time

from rock.rocklet.errors import BadRequest, RockletError, ShellUnavailable
from rock.rocklet.output import CappedOutput, observation
from rock.rocklet.procs import enlarge_pipe, kill_session, readable, reap, session_members, spawn
from rock.rocklet.runaway import before_command, mark_busy, mark_idle

STARTUP_TIMEOUT = 10.0
INTERRUPT_GRACE = 1.0
KILL_GRACE = 2.0
READ_SIZE = 1 << 20
SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def find_shell(env: dict[str, str]) -> str:
    """bash when the image has it, else the POSIX sh every image has."""
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", "bash")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return "/bin/sh"


def session_argv(shell: str) -> list[str]:
    """bash runs interactive (without a terminal) for its Ctrl-C semantics; other shells do not, since dash
    drops its buffered input after any error and busybox sh garbles some applets when interactive. For
    those a timeout replaces the shell instead (cwd and exported variables survive)."""
    if os.path.basename(shell) == "bash":
        return [shell, "--noprofile", "--norc", "--noediting", "-i"]
    return [shell]


def sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


class MarkerScanner:
    """Feeds output to a sink until `marker` appears, then collects the rest of the marker's line."""

    def __init__(self, marker: bytes, sink: CappedOutput) -> None:
        self.marker = marker
        self.sink = sink
        self.carry = b""
        self.line: bytes | None = None
        self.leftover = b""

    def feed(self, data: bytes) -> bool:
        """True once the whole marker line has been seen."""
        if self.line is None:
            buf = self.carry + data
            found = buf.find(self.marker)
            if found < 0:
                # Hold back a possible partial marker at the end of this chunk.
                split = max(len(buf) - len(self.marker) + 1, 0)
                self.sink.feed(buf[:split])
                self.carry = buf[split:]
                return False
            self.sink.feed(buf[:found])
            self.carry = b""
            self.line = buf[found + len(self.marker) :]
        else:
            self.line += data
        end = self.line.find(b"\n")
        if end < 0:
            return False
        self.leftover = self.line[end + 1 :]
        self.line = self.line[:end]
        return True

    def flush(self) -> None:
        self.sink.feed(self.carry)
        self.carry = b""


class ShellSession:
    def __init__(self, name: str, env: dict[str, str], cwd: str | None, state_dir: str) -> None:
        if not SESSION_NAME.match(name):
            raise BadRequest(
                f"session name {name!r} is invalid: use 1-64 letters, digits, '_', '.' or '-', starting with "
                "a letter or digit"
            )
        self.name = name
        self.env = env
        self.cwd = cwd or os.getcwd()
        if not os.path.isdir(self.cwd):
            raise BadRequest(f"cwd {self.cwd!r} is not a directory inside the sandbox; pass an existing one")
        self.argv = session_argv(find_shell(env))
        self.interactive = "-i" in self.argv
        self.state_file = os.path.join(state_dir, f"{name}.env")
        _remove(self.state_file)
        self.lock = threading.Lock()
        self.pending = b""
        self.proc: subprocess.Popen[bytes] | None = None
        self.pty_master: int | None = None
        self._spawn()

    def _spawn(self) -> None:
        # An interactive bash keeps a handle on the terminal it started with and complains on every command
        # killed by a signal when that is not a tty; so the shell starts with a spare pty as stderr, and its
        # first line moves stderr to the output pipe. Commands themselves never see a terminal.
        try:
            self.pty_master, stderr = pty.openpty()
        except OSError:  # no /dev/ptmx in this sandbox: bash then adds a warning to killed commands' output
            self.pty_master, stderr = None, subprocess.STDOUT
        try:
            self.proc = spawn(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=self.env,
                cwd=self.cwd if os.path.isdir(self.cwd) else "/",
                start_new_session=True,
            )
        except FileNotFoundError:
            raise ShellUnavailable(
                f"this image has no shell ({self.argv[0]} is missing): sessions need bash or sh; "
                "run programs with exec and an argv list instead"
            ) from None
        finally:
            if self.pty_master is not None:
                os.close(stderr)
        assert self.proc.stdout is not None
        enlarge_pipe(self.proc.stdout.fileno())
        # A replacement shell first gets back the exported variables of the one it replaces. The settings
        # undo what an interactive shell does for a person at a terminal; what the shell prints before the
        # first marker (a banner, warnings) is dropped.
        restore = (
            f". {sh_quote(self.state_file)} >/dev/null 2>&1\n" if os.path.exists(self.state_file) else ""
        )
        bash_only = (
            "set +H +o history\nunset HISTFILE MAILCHECK PROMPT_COMMAND\n" if "--norc" in self.argv else ""
        )
        init = f"exec 2>&1\n{restore}set +m\n{bash_only}PS1='' PS2=''\n"
        result = self._run_locked(init, STARTUP_TIMEOUT, 0, raw=True)
        if result["exit_code"] is None or self.proc is None:
            self._stop_shell()
            raise RockletError(
                f"the shell {self.argv[0]} did not start within {STARTUP_TIMEOUT:g} s; check that it runs "
                "in this image"
            )

    def _send(self, script: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(script.encode())
        self.proc.stdin.flush()

    def _stop_shell(self) -> int | None:
        if self.proc is None:
            return None
        kill_session(self.proc.pid)
        code = reap(self.proc)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        if self.pty_master is not None:
            os.close(self.pty_master)
        self.proc = None
        self.pending = b""
        return code

    def run(self, cmd: str, timeout: float, max_output: int) -> dict[str, object]:
        before_command()
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._stop_shell()
                self._spawn()
            return self._run_locked(cmd, timeout, max_output)

    def _run_locked(self, cmd: str, timeout: float, max_output: int, raw: bool = False) -> dict[str, object]:
        assert self.proc is not None and self.proc.stdout is not None
        nonce = os.urandom(8).hex()
        # The marker is split in the source so that `set -x` tracing of this line cannot forge it.
        script = (
            ("" if raw else f"eval {sh_quote(cmd)} </dev/null\n")
            + (cmd if raw else "")
            + f"__rock_rc=$?; export -p 2>/dev/null >{sh_quote(self.state_file)}; "
            f'command printf \'\\036ROCKLET%s %s %s\\n\' {nonce} "$__rock_rc" "$PWD"\n'
        )
        output = CappedOutput(max_output)
        scanner = MarkerScanner(b"\x1eROCKLET" + nonce.encode() + b" ", output)
        started = time.monotonic()
        # Processes alive now (the shell, earlier background jobs) are spared if this command times out.
        preexisting = set(session_members(self.proc.pid))
        shell_pid = self.proc.pid
        mark_busy(shell_pid, preexisting)
        try:
            return self._await_marker(script, scanner, output, started, timeout, preexisting)
        finally:
            mark_idle(shell_pid)

    def _await_marker(
        self,
        script: str,
        scanner: MarkerScanner,
        output: CappedOutput,
        started: float,
        timeout: float,
        preexisting: set[int],
    ) -> dict[str, object]:
        assert self.proc is not None and self.proc.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # a shell that died is noticed below, as end of output
            self._send(script)
        fd = self.proc.stdout.fileno()
        exit_code: int | None = None
        escalation = 0
        deadline = started + timeout
        done = scanner.feed(self.pending) if self.pending else False
        while not done:
            wait = deadline - time.monotonic()
            if wait <= 0:
                escalation += 1 if self.interactive else 3
                if escalation == 1:
                    # What Ctrl-C does: abort the command list, back to the prompt.
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.proc.pid, signal.SIGINT)
                    deadline = time.monotonic() + INTERRUPT_GRACE
                elif escalation == 2:
                    kill_session(self.proc.pid, spare=preexisting)
                    deadline = time.monotonic() + KILL_GRACE
                else:
                    self._stop_shell()
                    break
                continue
            if not readable(fd, wait):
                continue
            data = os.read(fd, READ_SIZE)
            if not data:
                # The shell exited: the command ran `exit`, or was `exec`ed over it.
                code = self._stop_shell()
                exit_code = 128 - code if code is not None and code < 0 else code
                break
            done = scanner.feed(data)
        scanner.flush()
        if escalation and self.proc is not None:
            # What the timed-out command left behind (its background jobs) goes too; earlier jobs stay.
            kill_session(self.proc.pid, spare=preexisting)
        if done:
            self.pending = scanner.leftover
            status, _, cwd = (scanner.line or b"").decode(errors="replace").partition(" ")
            exit_code = int(status) if status.isdigit() else None
            self.cwd = cwd or self.cwd
        return observation(output, exit_code, time.monotonic() - started, escalation > 0, timeout)

    def close(self) -> None:
        # Kill first, so a command still running returns at once instead of holding the lock to its timeout.
        proc = self.proc
        if proc is not None:
            kill_session(proc.pid)
        with self.lock:
            self._stop_shell()
        _remove(self.state_file)


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
