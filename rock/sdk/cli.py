"""`rock sandbox create|ls|exec|rm`: sandboxes from the shell, through the admin's API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:
    from rock.sdk.calls import Call

app = typer.Typer(help="Create, list, use and remove sandboxes.", no_args_is_help=True)
T = TypeVar("T")

AdminUrl = Annotated[
    str | None,
    typer.Option("--admin-url", envvar="ROCK_ADMIN_URL", help="Admin URL (default 127.0.0.1:8080)."),
]
ApiKey = Annotated[str | None, typer.Option("--api-key", envvar="ROCK_API_KEY", help="API key, if needed.")]


def _send(call: Call[T], admin_url: str | None, api_key: str | None) -> T:
    import httpx

    from rock.sdk import calls
    from rock.sdk.errors import RockError

    url = calls.admin_url(admin_url)
    try:
        with httpx.Client(base_url=url, headers=calls.auth_headers(api_key)) as http:
            return call.finish(http.request(call.method, call.path, **call.request_kwargs()))
    except httpx.ConnectError:
        typer.secho(f"no admin answers at {url}; start one with `rock admin serve`", fg="red", err=True)
        raise typer.Exit(1) from None
    except RockError as exc:
        typer.secho(f"{type(exc).__name__}: {exc.message}", fg="red", err=True)
        raise typer.Exit(1) from None


@app.command()
def create(
    image: Annotated[str, typer.Option(help="Image or public alias (see `rock image ls`).")] = "python:3.11",
    cpus: Annotated[float, typer.Option(help="CPU limit.")] = 1.0,
    memory: Annotated[str, typer.Option(help="Memory limit, e.g. 512m or 2g.")] = "512m",
    ttl: Annotated[float, typer.Option(help="Seconds until the admin stops it.")] = 3600.0,
    idle_timeout: Annotated[
        float, typer.Option(help="Seconds without requests until it is stopped.")
    ] = 600.0,
    network: Annotated[str, typer.Option(help="none (default) or bridge (egress, opt-in).")] = "none",
    egress: Annotated[
        list[str] | None, typer.Option(help="With bridge: an IPv4 network it may reach (CIDR), repeatable.")
    ] = None,
    user: Annotated[
        str, typer.Option(help="uid:gid to run as; root (0:0) gets the capabilities a root shell needs.")
    ] = "1000:1000",
    env: Annotated[list[str] | None, typer.Option(help="KEY=VALUE, repeatable.")] = None,
    admin_url: AdminUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Create a sandbox and print its id."""
    from pydantic import ValidationError

    from rock.sdk import calls
    from rock.sdk.types import CreateSandboxRequest

    pairs = [item.partition("=") for item in env or []]
    if any(not sep for _, sep, _ in pairs):
        typer.secho("--env takes KEY=VALUE", fg="red", err=True)
        raise typer.Exit(2)
    try:
        request = CreateSandboxRequest(
            image=image,
            cpus=cpus,
            memory=memory,
            ttl=ttl,
            idle_timeout=idle_timeout,
            network=network,
            egress=egress or [],
            user=user,
            env={k: v for k, _, v in pairs},
        )  # type: ignore[arg-type]
    except ValidationError as exc:
        typer.secho(str(exc), fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(_send(calls.create(request), admin_url, api_key).id)


@app.command("ls")
def list_(
    all_: Annotated[bool, typer.Option("--all", help="Include deleted sandboxes.")] = False,
    admin_url: AdminUrl = None,
    api_key: ApiKey = None,
) -> None:
    """List sandboxes as a table."""
    from datetime import UTC, datetime

    from rich.console import Console
    from rich.table import Table

    from rock.sdk import calls
    from rock.sdk.tables import print_table

    infos = _send(calls.list_all(all_), admin_url, api_key)
    table = Table(title=f"{len(infos)} sandbox(es)")
    for column in ("id", "state", "image", "cpus", "memory", "worker", "age", "detail"):
        # Ids and states never wrap, so they can be copied and grepped; the detail gives way instead.
        table.add_column(
            column, no_wrap=column != "detail", overflow="fold" if column == "detail" else "ellipsis"
        )
    colors = {"running": "green", "pending": "yellow", "failed": "red"}
    now = datetime.now(UTC)
    for info in infos:
        state = info.state.value + (f" ({info.failure_reason.value})" if info.failure_reason else "")
        table.add_row(
            info.id,
            f"[{colors.get(info.state.value, 'dim')}]{state}[/]",
            info.spec.image,
            f"{info.spec.cpus:g}",
            info.spec.memory,
            info.worker_id or "",
            f"{(now - info.created_at).total_seconds():.0f}s",
            (info.detail or "")[:60],
        )
    # Too wide for the terminal (or a piped 80 columns): one block per sandbox rather than squeezed cells.
    print_table(Console(), table)


@app.command("exec")
def exec_(
    sandbox_id: Annotated[str, typer.Argument(help="Sandbox id.")],
    command: Annotated[list[str], typer.Argument(help="Command line (quote it, or put it after --).")],
    session: Annotated[str | None, typer.Option(help="Run in this persistent session instead.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds before the command is killed.")] = 60.0,
    admin_url: AdminUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Run a command in a sandbox, print its output, and exit with its exit code."""
    import shlex

    from pydantic import ValidationError

    from rock.sdk import calls

    line = command[0] if len(command) == 1 else shlex.join(command)
    try:
        call = (
            calls.run(sandbox_id, line, session, timeout)
            if session
            else calls.exec_(sandbox_id, line, timeout, None, None)
        )
    except ValidationError as exc:
        typer.secho(str(exc), fg="red", err=True)
        raise typer.Exit(2) from None
    observation = _send(call, admin_url, api_key)
    typer.echo(observation.output, nl=not observation.output.endswith("\n"))
    raise typer.Exit(observation.exit_code if observation.exit_code is not None else 124)


@app.command("rm")
def remove(
    sandbox_ids: Annotated[list[str] | None, typer.Argument(help="Sandbox ids.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Remove every sandbox you can see.")] = False,
    admin_url: AdminUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Delete sandboxes (their containers go away)."""
    from rock.sdk import calls

    ids = list(sandbox_ids or [])
    if all_:
        ids += [info.id for info in _send(calls.list_all(), admin_url, api_key)]
    if not ids:
        typer.secho("name sandbox ids, or pass --all", fg="red", err=True)
        raise typer.Exit(2)
    for sandbox_id in ids:
        _send(calls.delete(sandbox_id), admin_url, api_key)
        typer.echo(f"deleted {sandbox_id}")
