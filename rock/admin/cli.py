"""`rock admin serve`: the control plane with the GEM env routes (/envs), plus one local worker unless
--no-local-worker, plus the ModelProxyService on 127.0.0.1:--proxy-port when --proxy-mode is given.

The admin's settings are one AdminConfig (rock.admin.config): `--config FILE` (YAML of its fields), then the
flags below (each sets one field, see ADMIN_FLAGS), then `--set KEY=VALUE` for any field, validated once.

The proxy starts only when a mode is configured: train and deploy need an upstream URL and replay a
recording, so there is no default that could answer a chat, and a proxy that only refuses would just
hold a port. --no-proxy turns it off even when a mode comes from the environment (ROCK_PROXY_MODE)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rock.config_flags import ConfigFileOption, SetOption, config_data, source

if TYPE_CHECKING:
    from rock.packages.cache import PackageCache

app = typer.Typer(help="The admin: control plane of the fleet.", no_args_is_help=True)

# Flag -> the AdminConfig field it sets (dotted key). A flag left out sets nothing, so the file's value or the
# field's default stands.
ADMIN_FLAGS = {
    "host": "host",
    "port": "port",
    "state_dir": "state_dir",
    "database_url": "database_url",
    "worker_token": "worker_token",
    "heartbeat_timeout": "heartbeat_timeout",
    "build_context_root": "limits.build_contexts",
    "worker_id": "local_worker.id",
    "worker_cpus": "local_worker.cpus",
    "worker_memory": "local_worker.memory",
    "worker_slots": "local_worker.slots",
}
# Flag -> the ProxyConfig field it sets.
PROXY_FLAGS = {
    "proxy_mode": "mode",
    "proxy_upstream": "upstream_url",
    "proxy_api_key": "api_key",
    "proxy_model": "model",
    "proxy_record": "record_path",
    "proxy_replay": "replay_path",
}


@app.command()
def serve(
    config_file: ConfigFileOption = None,
    set_: SetOption = None,
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default 127.0.0.1); anything else needs an API key.")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 8080).")] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="State folder (default $ROCK_HOME or ~/.rock).")
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            envvar="ROCK_DATABASE_URL",
            help="SQLAlchemy URL of the store (default sqlite in the state folder); PostgreSQL: "
            "postgresql+psycopg://USER:PASSWORD@HOST/DB with `pip install 'ale[postgres]'`.",
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="ROCK_API_KEY", help="One API key (16+ characters), no quota.")
    ] = None,
    keys: Annotated[
        Path | None, typer.Option(help="YAML list of keys with quotas: {name, key, max_sandboxes, ...}.")
    ] = None,
    max_sandboxes: Annotated[
        int | None, typer.Option(min=0, help="Quota of the --api-key key: sandboxes it may hold at once.")
    ] = None,
    build_context_root: Annotated[
        list[Path] | None,
        typer.Option(
            help="A folder sandboxes may be built from (build_context names it or a folder in it); "
            "repeatable. Only folders tenants cannot write. Default: none (the GEM image's own folder only)."
        ),
    ] = None,
    worker_token: Annotated[
        str | None,
        typer.Option(
            envvar="ROCK_WORKER_TOKEN",
            help="The workers' credential (16+ characters; default: made once in STATE_DIR/worker.token).",
        ),
    ] = None,
    local_worker: Annotated[
        bool | None, typer.Option(help="Run one worker inside the admin's process (default: yes).")
    ] = None,
    worker_id: Annotated[
        str | None, typer.Option(help="Id of the local worker (default: host + state).")
    ] = None,
    worker_cpus: Annotated[float | None, typer.Option(help="CPUs the local worker hands out.")] = None,
    worker_memory: Annotated[
        str | None, typer.Option(help="Memory the local worker hands out, e.g. 16g.")
    ] = None,
    worker_slots: Annotated[
        int | None, typer.Option(help="Sandboxes the local worker holds at most.")
    ] = None,
    heartbeat_timeout: Annotated[
        float | None, typer.Option(help="Seconds before a silent worker is lost (default 15).")
    ] = None,
    warm: Annotated[
        list[str] | None,
        typer.Option(
            metavar="IMAGE=N",
            help="Keep N started sandboxes of IMAGE (default spec) ready for creates of exactly that spec; "
            "repeat for more images.",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn/rock log level.")] = "info",
    proxy: Annotated[
        bool, typer.Option(help="Run the model proxy in this process (when --proxy-mode is given).")
    ] = True,
    proxy_mode: Annotated[
        str | None,
        typer.Option(envvar="ROCK_PROXY_MODE", help="Model proxy: train, deploy or replay (none: no proxy)."),
    ] = None,
    proxy_upstream: Annotated[
        str | None,
        typer.Option(envvar="ROCK_PROXY_UPSTREAM", help="Model proxy: the engine's or API's /v1 base URL."),
    ] = None,
    proxy_api_key: Annotated[
        str | None, typer.Option(envvar="ROCK_PROXY_UPSTREAM_KEY", help="Model proxy: key sent upstream.")
    ] = None,
    proxy_model: Annotated[str | None, typer.Option(help="Model proxy: model name sent upstream.")] = None,
    proxy_record: Annotated[
        Path | None, typer.Option(help="Model proxy: JSONL file every deploy call is appended to.")
    ] = None,
    proxy_replay: Annotated[
        Path | None, typer.Option(help="Model proxy: JSONL recording to answer from (replay).")
    ] = None,
    proxy_port: Annotated[
        int, typer.Option(help="Model proxy: port on 127.0.0.1 (loopback only: it has no API keys).")
    ] = 8090,
    package_cache: Annotated[
        Path | None,
        typer.Option(
            help="Run the package cache (devpi-server for PyPI, apt-cacher for Debian) with its files in "
            "this folder, for sandboxes with network='packages' on the local worker."
        ),
    ] = None,
    package_cache_offline: Annotated[
        bool,
        typer.Option(
            help="Serve only what the package cache holds already (seeded by `rock packages seed`).",
        ),
    ] = False,
) -> None:
    """Serve the admin API (sandboxes, exec, files, /envs, health, /metrics) until Ctrl-C or SIGTERM."""
    given = dict(locals())  # the options by name (None where not given), for ADMIN_FLAGS and PROXY_FLAGS
    import logging

    from pydantic import ValidationError

    from rock.admin.config import AdminConfig, KeyPolicy, load_keys
    from rock.admin.server import serve_admin
    from rock.packages.cache import PackageCacheError
    from rock.sdk.configs import ConfigError, validate_config
    from rock.serving import run_server

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        data = config_data(config_file, {key: given[flag] for flag, key in ADMIN_FLAGS.items()}, set_)
        policies = load_keys(keys) if keys else []
        if api_key:
            policies.insert(0, KeyPolicy(name="default", key=api_key, max_sandboxes=max_sandboxes))
        elif max_sandboxes is not None:
            raise ValueError(
                "--max-sandboxes is the quota of --api-key's key; pass --api-key too (or use --keys)"
            )
        if policies:
            data["api_keys"] = [*policies, *data.get("api_keys", [])]
        if warm:
            data["warm"] = {**data.get("warm", {}), **warm_pools(warm)}
        if local_worker is False:
            data["local_worker"] = None
        elif local_worker or "local_worker" not in data:
            data["local_worker"] = data.get("local_worker") or {}
        if isinstance(data["local_worker"], dict) and "state_dir" in data:
            # The local worker keeps its sockets in the admin's state folder unless told otherwise.
            data["local_worker"].setdefault("state_dir", data["state_dir"])
        config = validate_config(AdminConfig, data, source(config_file))
        proxy_config = None
        if proxy and proxy_mode is not None:
            from rock.proxy.types import ProxyConfig

            try:
                proxy_config = ProxyConfig.model_validate(
                    {key: given[flag] for flag, key in PROXY_FLAGS.items()}
                )
            except ValidationError as error:
                problems = "; ".join(e["msg"] for e in error.errors())
                raise ValueError(
                    f"the model proxy cannot start: {problems}; pass --proxy-upstream (train, deploy) or "
                    "--proxy-replay (replay), or --no-proxy"
                ) from None
        with _package_cache(package_cache, package_cache_offline) as cache:
            if cache is not None and config.local_worker is not None:
                config.local_worker = config.local_worker.model_copy(
                    update={"pypi_cache": cache.pypi, "apt_cache": cache.apt}
                )
            run_server(serve_admin(config, log_level.lower(), proxy_config, proxy_port))
    except (ConfigError, ValidationError, ValueError, OSError, PackageCacheError) as exc:
        typer.secho(f"rock admin serve: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


@contextlib.contextmanager
def _package_cache(folder: Path | None, offline: bool) -> Iterator[PackageCache | None]:
    if folder is None:
        yield None
        return
    from rock.packages.cache import PackageCache

    with PackageCache(folder, offline=offline) as cache:
        typer.echo(f"package cache: PyPI on {cache.pypi}, apt on {cache.apt or '(apt-cacher not installed)'}")
        yield cache


def warm_pools(entries: list[str]) -> dict[str, int]:
    """`--warm IMAGE=N` options as {image: N}."""
    pools = {}
    for entry in entries:
        image, _, count = entry.rpartition("=")
        if not image or not count.isdigit():
            raise ValueError(f"--warm {entry!r}: write IMAGE=N, e.g. --warm python:3.11=8")
        pools[image] = int(count)
    return pools
