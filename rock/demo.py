"""The ROCK demo (`rock demo`, `python -m rock.demo`): start a fleet, open sandboxes at once, run commands in
them, print a table, and shut everything down."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from rock.sdk.sandbox import AsyncSandbox

console = Console()

COLUMNS = ("sandbox", "created in", "session kept cwd+env", "network interfaces", "uid", "echo took")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_fleet(state_dir: Path, port: int) -> subprocess.Popen[bytes]:
    log = (state_dir / "admin.log").open("wb")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rock.cli",
            "admin",
            "serve",
            "--port",
            str(port),
            "--state-dir",
            str(state_dir),
            "--log-level",
            "warning",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_worker(url: str, admin: subprocess.Popen[bytes], log: Path, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if admin.poll() is not None:
            raise RuntimeError(f"the admin exited with code {admin.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).json().get("workers", 0) >= 1:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no worker registered within {timeout:g} s; read {log}")


async def one_sandbox(url: str, index: int, image: str) -> tuple[str, ...]:
    """Create a sandbox, use a persistent session and one-shot commands in it, and delete it."""
    began = time.monotonic()
    async with AsyncSandbox(image, admin_url=url, cpus=0.5, memory="256m", ttl=600) as sandbox:
        created = time.monotonic() - began
        await sandbox.run(f"cd /tmp && export GREETING=hello-{index}")
        session = await sandbox.run("echo $GREETING in $(pwd)")
        interfaces = await sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '")
        uid = await sandbox.exec("id -u")
        return (
            sandbox.id,
            f"{created:.2f} s",
            session.output.strip(),
            interfaces.output.strip(),
            uid.output.strip(),
            f"{session.duration * 1000:.1f} ms",
        )


async def open_sandboxes(url: str, count: int, image: str) -> list[tuple[str, ...]]:
    return list(await asyncio.gather(*(one_sandbox(url, i, image) for i in range(count))))


def main(sandboxes: int = 4, image: str = "python:3.11") -> int:
    state_dir = Path(tempfile.mkdtemp(prefix="rock-demo-", dir="/tmp"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    admin = start_fleet(state_dir, port)
    try:
        with console.status("starting the fleet (rock admin serve, with its local worker)"):
            wait_for_worker(url, admin, state_dir / "admin.log")
        console.print(f"[green]fleet up[/] at {url}")
        with console.status(f"opening {sandboxes} sandboxes at once and running commands in them"):
            began = time.monotonic()
            rows = asyncio.run(open_sandboxes(url, sandboxes, image))
            elapsed = time.monotonic() - began
        table = Table(title=f"{sandboxes} sandboxes ({image}, --network none, uid 1000) in {elapsed:.1f} s")
        for column in COLUMNS:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return 0
    except Exception as exc:
        console.print(f"[red]demo failed:[/] {exc}")
        return 1
    finally:
        with console.status("shutting the fleet down"):
            os.killpg(admin.pid, signal.SIGTERM)
            try:
                admin.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(admin.pid, signal.SIGKILL)
                admin.wait()
        shutil.rmtree(state_dir, ignore_errors=True)
        console.print("[green]fleet stopped[/]")


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
