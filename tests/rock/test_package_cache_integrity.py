"""The package cache serves only packages: devpi's root has a real password and the sandbox's forwarder is
read-only; apt-cacher fetches only from its mirrors and keys .deb files by mirror; no scratch copy outlives
its owner. Real devpi-server and apt-cacher on loopback; the only other listener is this test's own."""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rock.fleet import short_tmp
from rock.packages.apt import APT_MIRRORS, location_allowed
from rock.packages.cache import (
    DEVPI_KEY_DERIVATION,
    ROOT_PASSWORD_FILE,
    SCRATCH_PREFIX,
    PackageCache,
    apt_cacher,
    owned_scratch,
    remove_orphan_scratch,
)
from rock.worker.packages import APT_SOCKET, PYPI_SOCKET, PackageBridges

SECRET = b"host-only secret"


class Bridges:
    """The worker's forwarder for one sandbox socket folder, on an event loop of its own."""

    def __init__(self, pypi: str | None, apt: str | None, state_dir: Path | None = None) -> None:
        self.folder = short_tmp("pkg-gate-")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.bridges = PackageBridges(pypi, apt, state_dir=state_dir or self.folder / "installers")
        self._run(self.bridges.attach("sbx", self.folder))

    def _run(self, work) -> None:  # type: ignore[no-untyped-def]
        asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=30)

    def client(self, name: str) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.folder / name))
        return httpx.Client(transport=transport, base_url="http://127.0.0.1", timeout=60)

    def close(self) -> None:
        self._run(self.bridges.detach("sbx"))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageCache]:
    """A fresh cache, offline (nothing leaves the machine), devpi only."""
    cache = PackageCache(tmp_path_factory.mktemp("cache"), offline=True)
    try:
        cache.pypi = cache._start_devpi()
        yield cache
    finally:
        cache.__exit__()


def test_devpi_root_has_a_password_held_owner_only(devpi: PackageCache):
    password_file = devpi.folder / ROOT_PASSWORD_FILE
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    password = password_file.read_text()
    assert len(password) >= 32
    login = f"http://{devpi.pypi}/+login"
    empty = httpx.post(login, json={"user": "root", "password": ""}, timeout=30)
    assert empty.status_code == 401, empty.text
    right = httpx.post(login, json={"user": "root", "password": password}, timeout=30)
    assert right.status_code == 200, right.text
    # Nobody else may make a user (and with it an index to upload to), even straight at devpi.
    user = httpx.put(f"http://{devpi.pypi}/mallory", json={"password": "x", "email": "m@x"}, timeout=30)
    assert user.status_code in (401, 403), user.text


def test_devpi_derives_its_signing_key_from_a_full_entropy_secret(devpi: PackageCache):
    """devpi derives its token-signing key with one cheap argon2 pass (DEVPI_KEY_DERIVATION, so it starts in
    a second rather than 4-18 s): sound only for a secret that needs no stretching, 32 random bytes kept
    owner-only. The root login above is signed with the key so derived."""
    args = list(devpi._procs[0].args)  # type: ignore[arg-type]
    assert set(DEVPI_KEY_DERIVATION) <= set(args)
    secret = Path(args[args.index("--secretfile") + 1])  # offline: beside this instance's scratch copy
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert len(bytes.fromhex(secret.read_text())) == 32


def test_a_sandbox_can_only_read_the_mirror_index(devpi: PackageCache):
    """What the poisoning did (log in as root, make a stage index, upload) is refused before devpi."""
    bridges = Bridges(devpi.pypi, None)
    try:
        with bridges.client(PYPI_SOCKET) as inside:
            assert inside.get("/root/pypi/+simple/").status_code == 200
            login = inside.post("/+login", json={"user": "root", "password": ""})
            assert login.status_code == 405 and "read-only" in login.text
            assert inside.put("/root/stage", json={"type": "stage"}).status_code == 405
            assert inside.patch("/root/pypi", json={"type": "stage"}).status_code == 405
            upload = inside.post("/root/pypi/", files={"content": ("six-99.0.0.tar.gz", b"x")})
            assert upload.status_code == 405
            assert inside.delete("/root/pypi").status_code == 405
            assert inside.get("/+api").status_code == 403
            assert inside.get("/root/pypi/../../+api").status_code == 403
            smuggled = inside.request("GET", "/root/pypi/+simple/", content=b"PUT /root/x HTTP/1.1\r\n\r\n")
            assert smuggled.status_code == 400
    finally:
        bridges.close()
    # Nothing above reached devpi: root/pypi is still the PyPI mirror.
    assert httpx.get(f"http://{devpi.pypi}/root/pypi", timeout=30).json()["result"]["type"] == "mirror"


@pytest.fixture
def own_server() -> Iterator[int]:
    """A loopback listener standing for a host service: it answers every path with a secret."""

    class Secret(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(SECRET)))
            self.end_headers()
            self.wfile.write(SECRET)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Secret)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()


def test_locations_outside_the_mirrors_are_refused():
    assert location_allowed("http://deb.debian.org/debian/dists/bookworm/InRelease", APT_MIRRORS)
    assert location_allowed("/deb.debian.org/debian-security/pool/x_1_amd64.deb", APT_MIRRORS)
    for target in (
        "/127.0.0.1:8080/x/dists/x/InRelease",
        "http://127.0.0.1:8080/x/dists/x/InRelease",
        "http://deb.debian.org:8080/debian/dists/x/InRelease",
        "http://deb.debian.org/debian-evil/pool/evil_1.0_amd64.deb",
        "http://deb.debian.org/debian/../evil/evil_1.0_amd64.deb",
        "http://user@deb.debian.org/debian/dists/x/InRelease",
        "/report",
        "deb.debian.org/debian/dists/x/InRelease",
    ):
        assert not location_allowed(target, APT_MIRRORS), target


@pytest.mark.skipif(apt_cacher() is None, reason="apt-cacher is not installed (scripts/setup.sh installs it)")
def test_apt_cacher_is_no_proxy_to_host_services(tmp_path: Path, own_server: int):
    cache = PackageCache(tmp_path, offline=False)
    try:
        cache.apt = cache._start_apt()
        assert cache.apt is not None
        relative = f"/127.0.0.1:{own_server}/x/dists/x/InRelease"
        absolute = f"http://127.0.0.1:{own_server}/x/dists/x/InRelease"
        # Straight at apt-cacher (as if past the forwarder): its own allowed_locations refuse.
        direct = httpx.get(f"http://{cache.apt}{relative}", timeout=30)
        assert direct.status_code == 403 and SECRET not in direct.content
        with httpx.Client(proxy=f"http://{cache.apt}", timeout=30) as proxied:
            answer = proxied.get(absolute)
            assert answer.status_code == 403 and SECRET not in answer.content
        bridges = Bridges(None, cache.apt)
        try:
            with bridges.client(APT_SOCKET) as inside:
                for target in (relative, "/report"):
                    refused = inside.get(target)
                    assert refused.status_code == 403 and SECRET not in refused.content
        finally:
            bridges.close()
    finally:
        cache.__exit__()


def _cached_deb(apt: Path, name: str, url: str) -> None:
    """A package file as apt-cacher kept it before namespaces: under its bare file name."""
    for kind in ("packages", "headers", "private"):
        (apt / kind).mkdir(parents=True, exist_ok=True)
    (apt / "packages" / name).write_bytes(b"!<arch>\n" + url.encode())
    (apt / "headers" / name).write_text(
        f"200 OK\r\nContent-Length: {8 + len(url)}\r\nContent-Type: application/vnd.debian.binary-package\r\n"
        f"X-AptCacher-URL: {url}\r\n\r\n"
    )
    (apt / "private" / f"{name}.complete").write_text(url)


@pytest.mark.skipif(apt_cacher() is None, reason="apt-cacher is not installed (scripts/setup.sh installs it)")
def test_a_foreign_deb_never_answers_a_debian_url(tmp_path: Path):
    debian = "http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb"
    foreign = "http://127.0.0.1:9/evil/pool/e/evil/evil_1.0_amd64.deb"
    _cached_deb(tmp_path / "apt", "hello%5f2.10-3%5famd64.deb", debian)
    _cached_deb(tmp_path / "apt", "evil%5f1.0%5famd64.deb", foreign)
    cache = PackageCache(tmp_path, offline=True)
    try:
        cache.apt = cache._start_apt()
        with httpx.Client(proxy=f"http://{cache.apt}", timeout=30) as apt:
            served = apt.get(debian)
            assert served.status_code == 200 and served.content.endswith(debian.encode())
            asked = "http://deb.debian.org/debian/pool/main/e/evil/evil_1.0_amd64.deb"
            assert foreign.encode() not in apt.get(asked).content
    finally:
        cache.__exit__()
    assert not (tmp_path / "apt" / "packages" / "evil%5f1.0%5famd64.deb").exists()


def test_a_killed_owners_scratch_copy_is_removed(tmp_path: Path):
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from rock.packages.cache import owned_scratch; "
            "folder, _ = owned_scratch(Path(sys.argv[1])); print(folder, flush=True); time.sleep(600)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    orphan = Path(owner.stdout.readline().strip())
    live, lock = owned_scratch(tmp_path)
    try:
        assert orphan.is_dir() and orphan.name.startswith(SCRATCH_PREFIX)
        assert remove_orphan_scratch(tmp_path) == []  # both owners run
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
        assert remove_orphan_scratch(tmp_path) == [orphan]
        assert live.is_dir() and not orphan.exists()
    finally:
        lock.close()
        owner.stdout.close()
