"""/etc/hosts, /etc/hostname and /etc/resolv.conf for a sandbox made without Docker's network stack.

A sandbox with no network (`none`, and `packages`, whose cache comes in through the rocklet's forwarder) is
created with Docker's networking disabled: runc still gives it a network namespace of its own with loopback
up, but Docker's network layer stays out, and with it the `libnetwork-setkey` hook that Docker 20.10 runs
at every container start by re-executing its whole daemon binary (about 0.07 core-s of a sandbox's ~0.6).

Docker writes these three files only for containers it networks, so the worker writes them itself, with
what Docker writes for `--network none` (resolv.conf without the host's resolvers: nothing answers DNS in a
sandbox without a network), into the sandbox's socket folder (its own small tmpfs), and binds them in
writable, as Docker does: root in the sandbox may edit its /etc/hosts.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

FOLDER = "etc"
"""The files' folder inside the sandbox's socket folder (root's, so a non-root sandbox reads but cannot
replace them)."""
HOSTS = """127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
fe00::0	ip6-localnet
ff00::0	ip6-mcastprefix
ff02::1	ip6-allnodes
ff02::2	ip6-allrouters
"""
RESOLV_CONF = "# no network in this sandbox: no resolver\n"
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def sandbox_hostname(sandbox_id: str) -> str:
    """The sandbox id when it is a valid host name label, else 12 hex digits of its hash (as Docker names a
    container's host after 12 digits of its id)."""
    if _LABEL.fullmatch(sandbox_id):
        return sandbox_id
    return hashlib.sha256(sandbox_id.encode()).hexdigest()[:12]


def write_name_files(host_dir: Path, hostname: str) -> dict[str, dict[str, str]]:
    """Write the three files under `host_dir` and return the binds that put them at their /etc paths."""
    folder = host_dir / FOLDER
    folder.mkdir(mode=0o755, exist_ok=True)
    contents = {"hosts": HOSTS, "hostname": f"{hostname}\n", "resolv.conf": RESOLV_CONF}
    binds = {}
    for name, text in contents.items():
        path = folder / name
        path.write_text(text)
        path.chmod(0o644)
        binds[str(path)] = {"bind": f"/etc/{name}", "mode": "rw"}
    return binds
