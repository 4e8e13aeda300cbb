"""Test-time installers under `packages` egress: uv's install script, answered from the package cache.

Published Terminal-Bench/Harbor tasks start their tests with `curl -LsSf https://astral.sh/uv/install.sh | sh`
(or GitHub's `uv-installer.sh`), then run `uv`/`uvx`. A `packages` sandbox has no route out, so that
download would fail. Instead the sandbox's `https_proxy` is the forwarder (127.0.0.1:3141, the same one pip
uses) and its curl/wget trust a certificate authority the worker made for this purpose
(`installer-ca.pem` in the socket folder; its key never leaves the worker). The forwarder accepts
`CONNECT` only to the installer hosts below, answers only the installer paths on them, and every other
HTTPS request through it gets 404: no general egress is opened.

The script it serves does what uv's does, from the cache: it fetches the `uv` and `uvx` binaries (taken by
the worker from the `uv` wheel the package cache serves; offline, the version `rock packages seed` cached)
into `$UV_INSTALL_DIR`, `$XDG_BIN_HOME` or `~/.local/bin`, and writes the `env` file scripts `source`.
`UV_DEFAULT_INDEX` etc. in the sandbox already point uv at the cache.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import os
import platform
import re
import ssl
import tempfile
import threading
import zipfile
from pathlib import Path

import httpx
from packaging.version import InvalidVersion, Version

from rock.worker.package_gate import Refused, answer_head, parse_head, read_head, refusal

INSTALLER_HOSTS = ("astral.sh", "github.com")
CA_FILE = "installer-ca.pem"
WGETRC_FILE = "installer-wgetrc"
BINARY_PATH = re.compile(r"^/\+rock/uv/(?P<version>[0-9][0-9A-Za-z.+-]*)/(?P<name>uvx?)$")
SCRIPT_PATHS = (
    re.compile(r"^/uv/install\.sh$"),
    re.compile(r"^/uv/(?P<version>[0-9][0-9A-Za-z.+-]*)/install\.sh$"),
    re.compile(r"^/astral-sh/uv/releases/latest/download/uv-installer\.sh$"),
    re.compile(r"^/astral-sh/uv/releases/download/(?P<version>[0-9][0-9A-Za-z.+-]*)/uv-installer\.sh$"),
)
WHEEL_LINK = re.compile(
    r'href="(?P<url>[^"#]*/uv-(?P<version>[^-/"]+)-py3-none-(?P<tags>[^"#/]+)\.whl)[^"]*"'
)

INSTALL_SCRIPT = """#!/bin/sh
# uv's installer, as ROCK answers it under `packages` egress: uv {version} from the fleet's package cache.
set -eu
dest="${{UV_INSTALL_DIR:-${{XDG_BIN_HOME:-$HOME/.local/bin}}}}"
mkdir -p "$dest"
fetch() {{
  if command -v curl >/dev/null 2>&1; then curl -fsSL "$1" -o "$2"; else wget -q -O "$2" "$1"; fi
}}
for tool in uv uvx; do
  fetch "https://astral.sh/+rock/uv/{version}/$tool" "$dest/$tool.part"
  chmod 755 "$dest/$tool.part"
  mv "$dest/$tool.part" "$dest/$tool"
done
case "$dest" in
  "$HOME/.local/bin") env_file="$HOME/.local/bin/env" ;;
  *) env_file="$dest/env" ;;
esac
printf 'case ":${{PATH}}:" in *":%s:"*) ;; *) export PATH="%s:$PATH" ;; esac\\n' "$dest" "$dest" > "$env_file"
echo "installed uv {version} from the package cache into $dest"
"""


class InstallerError(RuntimeError):
    """The installer cannot be answered (no uv wheel in the cache); the message says what to do."""


class CertificateAuthority:
    """A throwaway CA of this worker process (its key only in memory) and its leaf for the installer hosts."""

    def __init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = dt.datetime.now(dt.UTC)
        ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ROCK package-cache installers")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), True)
            .sign(ca_key, hashes.SHA256())
        )
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, INSTALLER_HOSTS[0])]))
            .issuer_name(ca_name)
            .public_key(leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in INSTALLER_HOSTS]), False)
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        self.ca_pem = ca.public_bytes(pem)
        key_bytes = leaf_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self.server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        # ssl loads keys only from files: an owner-only folder that is gone once they are loaded.
        with tempfile.TemporaryDirectory(prefix="rock-installer-tls-") as folder:
            chain, key = Path(folder) / "leaf.pem", Path(folder) / "leaf.key"
            for path, data in ((chain, leaf.public_bytes(pem) + self.ca_pem), (key, key_bytes)):
                with open(path, "xb", opener=_private_open) as out:
                    out.write(data)
            self.server_context.load_cert_chain(chain, key)


def _private_open(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)  # owner-only from its creation


class UvFromCache:
    """uv and uvx binaries taken from the `uv` wheel the package cache serves, extracted once per version."""

    def __init__(self, pypi: str, index: str, folder: Path) -> None:
        self.pypi, self.index, self.folder = pypi, index, folder
        self._lock = threading.Lock()

    def latest(self, wanted: str | None) -> str:
        """The version to install: `wanted` when the cache has it, else the newest it has."""
        versions = sorted({v for v in self._wheels()}, key=_version_key)
        if not versions:
            raise InstallerError(
                "the package cache has no uv wheel for this machine; seed it (`rock packages seed` caches "
                "uv) or run the cache online"
            )
        if wanted is not None:
            if wanted not in versions:
                raise InstallerError(f"the package cache has no uv {wanted} (it has {', '.join(versions)})")
            return wanted
        return versions[-1]

    def binary(self, version: str, name: str) -> Path:
        target = self.folder / version / name
        with self._lock:
            if not target.is_file():
                self._extract(version)
        return target

    def _wheels(self) -> dict[str, str]:
        page = httpx.get(f"http://{self.pypi}{self.index}uv/", timeout=120, follow_redirects=True)
        if page.status_code == 404:
            return {}
        page.raise_for_status()
        arch = platform.machine()
        found: dict[str, str] = {}
        for link in WHEEL_LINK.finditer(page.text):
            tags = link["tags"]
            if "manylinux" in tags and tags.endswith(arch):
                found.setdefault(link["version"], str(httpx.URL(str(page.url)).join(link["url"])))
        return found

    def _extract(self, version: str) -> None:
        url = self._wheels().get(version)
        if url is None:
            raise InstallerError(f"the package cache has no uv {version} wheel for {platform.machine()}")
        wheel = httpx.get(url, timeout=600, follow_redirects=True)
        wheel.raise_for_status()
        folder = self.folder / version
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(wheel.content)) as archive:
            for member in archive.namelist():
                name = member.rsplit("/", 1)[-1]
                if ".data/scripts/" in member and name in ("uv", "uvx"):
                    part = folder / f"{name}.part"
                    part.write_bytes(archive.read(member))
                    part.chmod(0o755)
                    part.replace(folder / name)
        if not (folder / "uv").is_file():
            raise InstallerError(f"the uv {version} wheel holds no uv binary")


def _version_key(version: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def script_version(path: str) -> tuple[bool, str | None]:
    """Whether `path` is one of uv's installer paths, and the version it names (None: the latest)."""
    for pattern in SCRIPT_PATHS:
        match = pattern.match(path)
        if match:
            return True, match.groupdict().get("version")
    return False, None


def install_script(version: str) -> bytes:
    return INSTALL_SCRIPT.format(version=version).encode()


class InstallerResponder:
    """Answers a sandbox's CONNECT to an installer host: TLS with the installer CA's leaf, one request."""

    def __init__(self, pypi: str, index: str, folder: Path) -> None:
        self.uv = UvFromCache(pypi, index, folder)
        self._ca: CertificateAuthority | None = None
        self._lock = threading.Lock()

    @property
    def ca(self) -> CertificateAuthority:
        with self._lock:
            if self._ca is None:
                self._ca = CertificateAuthority()
            return self._ca

    def install_ca(self, host_dir: Path, mount: str) -> None:
        """The CA certificate (public) in the socket folder (`mount` inside the sandbox), where the sandbox's
        curl and wget are told to find it."""
        (host_dir / CA_FILE).write_bytes(self.ca.ca_pem)
        (host_dir / WGETRC_FILE).write_text(f"ca_certificate = {mount}/{CA_FILE}\n")

    async def answer(self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, port = target.rpartition(":")
        if host not in INSTALLER_HOSTS or port != "443":
            raise Refused(403, "Forbidden", f"only uv's installer is answered here, not {target[:100]}")
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.start_tls(self.ca.server_context)
        try:
            request = parse_head(await read_head(reader))
            status, reason, body, kind = await self._route(host, request.target.split("?", 1)[0])
        except Refused as error:
            writer.write(refusal(error))
            await writer.drain()
            return
        writer.write(answer_head(status, reason, _length(body), kind))
        if request.method == "GET":
            await _send(body, writer)
        await writer.drain()

    async def _route(self, host: str, path: str) -> tuple[int, str, bytes | Path, str]:
        binary = BINARY_PATH.match(path)
        is_script, wanted = script_version(path)
        try:
            if host == "astral.sh" and binary:
                found = await asyncio.to_thread(self.uv.binary, binary["version"], binary["name"])
                return 200, "OK", found, "application/octet-stream"
            if is_script and (host == "astral.sh") == path.startswith("/uv/"):
                version = await asyncio.to_thread(self.uv.latest, wanted)
                return 200, "OK", install_script(version), "text/x-shellscript"
        except (InstallerError, httpx.HTTPError) as error:
            raise Refused(503, "Service Unavailable", str(error)) from None
        raise Refused(404, "Not Found", "under `packages` egress only uv's installer is answered here")


def _length(body: bytes | Path) -> int:
    return body.stat().st_size if isinstance(body, Path) else len(body)


async def _send(body: bytes | Path, writer: asyncio.StreamWriter) -> None:
    if isinstance(body, bytes):
        writer.write(body)
        return
    with body.open("rb") as source:
        while chunk := source.read(1 << 20):
            writer.write(chunk)
            await writer.drain()
