"""A throwaway PostgreSQL server from the distribution's package (`apt-get install postgresql`), for the
store's tests and the control-plane benchmark: its own data folder under /tmp, a password, loopback only.

PostgreSQL refuses to run as root, so under root the server runs as the package's `postgres` user.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

from rock.fleet import free_port, short_tmp

USER = "rock"


def find_bin() -> Path:
    """The newest installed PostgreSQL's bin folder. Raises FileNotFoundError naming the fix."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise FileNotFoundError(
            "no PostgreSQL server installed (/usr/lib/postgresql/*/bin/initdb); run scripts/setup.sh, or "
            "apt-get install -y postgresql"
        )
    return Path(found[-1]).parent


class LocalPostgres:
    """`with LocalPostgres() as pg:` gives `pg.url(database)` (a SQLAlchemy psycopg URL with the password)."""

    def __init__(self) -> None:
        self.bin = find_bin()
        self.dir = short_tmp("rock-pg-")
        self.port = free_port()
        self.password = secrets.token_urlsafe(16)
        self.proc: subprocess.Popen[bytes] | None = None

    def _as_owner(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def __enter__(self) -> LocalPostgres:
        data, pwfile = self.dir / "data", self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        initdb = [str(self.bin / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}"]
        initdb += ["-A", "scram-sha-256", "--no-sync", "-E", "UTF8"]
        subprocess.run([*self._as_owner(), *initdb], check=True, capture_output=True, timeout=120)
        pwfile.unlink()
        server = [str(self.bin / "postgres"), "-D", str(data), "-k", str(self.dir), "-h", "127.0.0.1"]
        server += ["-p", str(self.port), "-c", "fsync=off", "-c", "max_connections=300"]
        with (self.dir / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [*self._as_owner(), *server], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited:\n{(self.dir / 'server.log').read_text()[-2000:]}")
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not accept connections within {timeout:g} s; see {self.dir}")

    def dsn(self, database: str) -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # PostgreSQL's "fast shutdown"
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
