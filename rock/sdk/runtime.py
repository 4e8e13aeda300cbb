"""The Python every sandbox has: ROCK's own runtime (this host's interpreter, its standard library, the shared
libraries they load and the dynamic loader), mounted read-only at `RUNTIME_MOUNT` by the worker for the
rocklet. Clients run their own programs on it (the agent bundle, a grading script), so images need no Python
of their own and a file of the image's, or of an agent's, is never what runs."""

RUNTIME_MOUNT = "/opt/rock"
LOADER = "lib/ld.so"


def sandbox_python(mount: str = RUNTIME_MOUNT) -> list[str]:
    """The argv that starts ROCK's interpreter in a sandbox: the bundled loader runs the bundled interpreter
    on the bundled libraries, so the image's own libc and Python never matter. Append the interpreter's
    arguments (`-I -S` to keep the image's PYTHON* variables and site-packages out)."""
    return [f"{mount}/{LOADER}", "--library-path", f"{mount}/lib", f"{mount}/bin/python3"]
