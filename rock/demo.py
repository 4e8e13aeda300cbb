"""The ROCK demo (`rock demo`, `python -m rock.demo`): start a fleet, open sandboxes at once, run commands in
them, print a table, and shut everything down."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from rich.console import Console
from rich.table import Table

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.sandbox import AsyncSandbox
from rock.sdk.tables import print_table

console = Console()

COLUMNS = ("sandbox", "created in", "session kept cwd+env", "network interfaces", "uid", "echo took")


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
    fleet = LocalFleet(short_tmp("rock-demo-"), f"demo-{os.getpid()}")
    try:
        with console.status("starting the fleet (rock admin serve, with its local worker)"):
            fleet.__enter__()
        console.print(f"[green]fleet up[/] at {fleet.url}")
        with console.status(f"opening {sandboxes} sandboxes at once and running commands in them"):
            began = time.monotonic()
            rows = asyncio.run(open_sandboxes(fleet.url, sandboxes, image))
            elapsed = time.monotonic() - began
        table = Table(title=f"{sandboxes} sandboxes ({image}, --network none, uid 1000) in {elapsed:.1f} s")
        for column in COLUMNS:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        print_table(console, table)
        return 0
    except Exception as exc:
        console.print(f"[red]demo failed:[/] {exc}")
        return 1
    finally:
        with console.status("shutting the fleet down"):
            fleet.close()
        console.print("[green]fleet stopped[/]")


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
