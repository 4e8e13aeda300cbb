"""How a container starts the rocklet from the mounted runtime (`rock.sdk.runtime`: where it is mounted and
how its interpreter starts, which clients need too)."""

from rock.sdk.runtime import RUNTIME_MOUNT, sandbox_python

ROCKLET_SOCKET = "/run/rock/rocklet.sock"


def rocklet_container_command(
    socket_path: str = ROCKLET_SOCKET, mount: str = RUNTIME_MOUNT, token_file: str | None = None
) -> list[str]:
    """The container's entrypoint: the bundled loader runs the bundled interpreter on the bundled libraries.

    `-I` (isolated mode) keeps the image's PYTHON* variables out of the rocklet and `-S` skips site-packages
    (the rocklet lives beside the standard library); the interpreter finds its standard library from its
    own location, so no environment variable is needed. With `token_file`, the rocklet answers only requests
    that carry the token the worker wrote there.
    """
    return [
        *sandbox_python(mount),
        "-I",
        "-S",
        "-m",
        "rock.rocklet",
        "--socket",
        socket_path,
        *(["--token-file", token_file] if token_file else []),
    ]


def rocklet_container_env() -> dict[str, str]:
    """Variables the container needs for the rocklet: none, so the sandbox's shells see the image's own
    environment unchanged (a PYTHONHOME here would break the image's Python)."""
    return {}
