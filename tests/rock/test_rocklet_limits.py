"""The rocklet under inputs that used to exhaust it (issue 18, item 8): endless or huge reads, and uploads
held whole in memory. The rocklet runs as a local process under an address-space limit, so a regression
fails with an error here instead of eating the machine's memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from rock.rocklet.client import RockletClient
from rock.rocklet.errors import RemoteFileError
from rock.rocklet.files import MAX_READ

MIB = 1024 * 1024
ADDRESS_SPACE = 1024 * MIB
UPLOAD = 96 * MIB


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.fixture
def rocklet(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    socket_path = tmp_path / "rocklet.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rock.rocklet", "--socket", str(socket_path)], preexec_fn=_limited
    )
    yield socket_path, proc
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
async def client(rocklet: tuple[Path, subprocess.Popen[bytes]]) -> AsyncIterator[RockletClient]:
    async with RockletClient(rocklet[0]) as client:
        await client.wait_ready(timeout=20)
        yield client


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def test_read_file_refuses_devices_and_pipes_instead_of_reading_forever(client, tmp_path):
    for path in ("/dev/zero", "/dev/urandom"):
        with pytest.raises(RemoteFileError, match="is not a regular file"):
            await client.read_file(path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RemoteFileError, match="is not a regular file"):
        await client.read_file(str(fifo))
    assert (await client.health()).status == "ok"


async def test_read_file_refuses_a_file_over_its_limit_and_names_download(client, tmp_path):
    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(MAX_READ + 1)  # sparse: no disk used
    with pytest.raises(RemoteFileError, match=f"over read_file's limit of {MAX_READ} bytes.*download"):
        await client.read_file(str(big))
    exact = tmp_path / "exact.bin"
    with exact.open("wb") as handle:
        handle.truncate(MAX_READ)
    assert len(await client.read_file(str(exact))) == MAX_READ


async def _zeros(total: int, piece: int = MIB) -> AsyncIterator[bytes]:
    for start in range(0, total, piece):
        yield bytes(min(piece, total - start))


async def _tar_of_zeros(name: str, size: int) -> AsyncIterator[bytes]:
    info = tarfile.TarInfo(name)
    info.size = size
    yield info.tobuf(format=tarfile.USTAR_FORMAT)
    async for piece in _zeros(size):
        yield piece
    yield bytes(tarfile.BLOCKSIZE - size % tarfile.BLOCKSIZE) if size % tarfile.BLOCKSIZE else b""
    yield bytes(2 * tarfile.BLOCKSIZE)


async def test_an_upload_streams_through_without_being_held_in_memory(client, rocklet, tmp_path):
    await client.upload(_tar_of_zeros("data/zeros.bin", UPLOAD), str(tmp_path / "dest"))
    assert (tmp_path / "dest" / "data" / "zeros.bin").stat().st_size == UPLOAD
    assert _peak_rss(rocklet[1].pid) < UPLOAD // 2


async def test_a_file_write_streams_through_without_being_held_in_memory(client, rocklet, tmp_path):
    await client.write_file(str(tmp_path / "zeros.bin"), _zeros(UPLOAD), mode=0o600)
    target = tmp_path / "zeros.bin"
    assert target.stat().st_size == UPLOAD and target.stat().st_mode & 0o777 == 0o600
    assert _peak_rss(rocklet[1].pid) < UPLOAD // 2


async def test_a_path_with_a_nul_byte_is_a_bad_request_not_an_internal_error(client):
    from rock.rocklet.errors import BadRequest

    with pytest.raises(BadRequest, match="null byte"):
        await client.read_file("/tmp/a\x00b")


async def test_a_download_streams_out_without_being_held_in_memory(client, rocklet, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    with (folder / "zeros.bin").open("wb") as handle:
        handle.truncate(UPLOAD)
    archive = await client.open_download(str(folder))
    try:
        received = 0
        async for piece in archive.aiter_raw():
            received += len(piece)
    finally:
        await archive.aclose()
    assert received >= UPLOAD + 3 * tarfile.BLOCKSIZE
    assert _peak_rss(rocklet[1].pid) < UPLOAD // 2
