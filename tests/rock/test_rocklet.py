"""The rocklet as a local process on a temporary socket, driven through RockletClient (no Docker)."""

import asyncio
import io
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from rock.rocklet.client import RockletClient
from rock.rocklet.errors import (
    BadRequest,
    ForwarderError,
    RemoteFileError,
    RemoteFileNotFound,
    RockletUnavailable,
    SessionExists,
    SessionNotFound,
)
from rock.rocklet.types import RockletHealth


@pytest.fixture(scope="module")
def rocklet_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    socket_path = tmp_path_factory.mktemp("rocklet") / "rocklet.sock"
    proc = subprocess.Popen([sys.executable, "-m", "rock.rocklet", "--socket", str(socket_path)])
    yield socket_path
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    assert not socket_path.exists()


@pytest.fixture
async def client(rocklet_socket: Path) -> AsyncIterator[RockletClient]:
    async with RockletClient(rocklet_socket) as rocklet:
        await rocklet.wait_ready(timeout=20)
        yield rocklet


def _processes_with(arg: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if arg.encode() in handle.read().split(b"\0"):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


async def test_health(client: RockletClient) -> None:
    health = await client.health()
    assert isinstance(health, RockletHealth)
    assert health.status == "ok"


async def test_session_keeps_cwd_env_variables_and_functions(client: RockletClient, tmp_path: Path) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    first = await client.run(
        f"cd {tmp_path} && export GREETING=hello; plain=1; f() {{ echo f:$1; }}", session
    )
    assert first.exit_code == 0 and first.output == ""
    second = await client.run("pwd; echo $GREETING $plain; f x; sh -c 'echo child:$GREETING'", session)
    assert second.output.splitlines() == [str(tmp_path), "hello 1", "f:x", "child:hello"]
    other = await client.run("echo ${GREETING:-unset}", session=f"{session}-other")
    assert other.output == "unset\n"


async def test_exit_codes_and_stderr(client: RockletClient) -> None:
    result = await client.run("echo out; echo err >&2; (exit 7)", "codes")
    assert result.exit_code == 7
    assert result.output == "out\nerr\n"
    assert not result.timed_out and not result.truncated


async def test_syntax_error_and_exit_leave_the_session_usable(client: RockletClient) -> None:
    await client.run("export KEEP=yes; cd /", "errors")
    broken = await client.run('echo "unterminated', "errors")
    assert broken.exit_code not in (0, None)
    exited = await client.run("exit 4", "errors")
    assert exited.exit_code == 4
    after = await client.run("echo $KEEP; pwd", "errors")
    assert after.output == "yes\n/\n"


async def test_user_functions_named_like_builtins_do_not_break_the_session(client: RockletClient) -> None:
    await client.run("printf() { echo hijacked; }; set -x", "shadow")
    result = await client.run("echo visible", "shadow")
    assert result.exit_code == 0 and "visible" in result.output


async def test_create_and_close_session(client: RockletClient, tmp_path: Path) -> None:
    await client.create_session("made", env={"ONLY_HERE": "1"}, cwd=str(tmp_path))
    result = await client.run("echo $ONLY_HERE; pwd", "made")
    assert result.output == f"1\n{tmp_path}\n"
    with pytest.raises(SessionExists):
        await client.create_session("made")
    await client.close_session("made")
    with pytest.raises(SessionNotFound):
        await client.close_session("made")
    with pytest.raises(BadRequest, match="session name"):
        await client.run("true", session="no/slashes")
    with pytest.raises(BadRequest, match="not a directory"):
        await client.create_session("nowhere", cwd=str(tmp_path / "missing"))


async def test_timeout_kills_the_command_and_the_session_stays_usable(client: RockletClient) -> None:
    tag = f"3{uuid.uuid4().int % 10**6}"
    await client.run("export STAYS=1; cd /tmp", "slow")
    result = await client.run(f"sh -c 'sleep {tag}' & sleep {tag}; echo not-reached", "slow", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert "not-reached" not in result.output
    assert "timed out after 1 s" in result.output
    assert _processes_with(tag) == []
    after = await client.run("echo $STAYS; pwd", "slow")
    assert after.output == "1\n/tmp\n" and after.exit_code == 0


async def test_timeout_interrupts_a_builtin_loop_and_kills_what_ignores_sigint(client: RockletClient) -> None:
    await client.run("v=kept", "loop")
    looped = await client.run("while :; do :; done", "loop", timeout=0.5)
    assert looped.timed_out
    tag = f"4{uuid.uuid4().int % 10**6}"
    stubborn = await client.run(f"sh -c \"trap '' INT; sleep {tag}\"", "loop", timeout=0.5)
    assert stubborn.timed_out
    assert _processes_with(tag) == []
    assert (await client.run("echo $v", "loop")).output == "kept\n"


async def test_timeout_spares_jobs_started_earlier(client: RockletClient) -> None:
    tag = f"5{uuid.uuid4().int % 10**6}"
    await client.run(f"sleep {tag} >/dev/null &", "jobs")
    await client.run("sleep 100", "jobs", timeout=0.5)
    survivors = _processes_with(tag)
    assert len(survivors) == 1
    await client.close_session("jobs")
    assert _processes_with(tag) == []


async def test_output_is_capped_with_a_marker(client: RockletClient) -> None:
    result = await client.run(
        "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo END", "big", max_output=1000
    )
    assert result.truncated and result.exit_code == 0
    assert "bytes of output truncated" in result.output
    assert result.output.startswith("a" * 500) and result.output.endswith("END\n")
    assert len(result.output) < 1200
    assert (await client.health()).status == "ok"
    assert (await client.run("echo small", "big")).output == "small\n"


async def test_concurrent_sessions(client: RockletClient) -> None:
    results = await asyncio.gather(*(client.run(f"sleep 0.3; echo {i}", f"par-{i}") for i in range(4)))
    assert [r.output for r in results] == [f"{i}\n" for i in range(4)]


async def test_exec(client: RockletClient, tmp_path: Path) -> None:
    listed = await client.exec(["printf", "%s|", "a b", "c"])
    assert listed.output == "a b|c|" and listed.exit_code == 0
    shell = await client.exec("echo $X; pwd; exit 3", cwd=str(tmp_path), env={"X": "x"})
    assert shell.output == f"x\n{tmp_path}\n" and shell.exit_code == 3
    missing = await client.exec(["no-such-program-here"])
    assert missing.exit_code == 127 and "command not found" in missing.output
    tag = f"6{uuid.uuid4().int % 10**6}"
    slow = await client.exec(f"sleep {tag} & sleep {tag}", timeout=0.5)
    assert slow.timed_out and slow.exit_code is None
    assert _processes_with(tag) == []
    capped = await client.exec("yes | head -c 3000000", max_output=100)
    assert capped.truncated and len(capped.output) < 200


async def test_files(client: RockletClient, tmp_path: Path) -> None:
    target = tmp_path / "sub" / "script.sh"
    await client.write_file(str(target), b"#!/bin/sh\necho run\n", mode=0o755)
    assert target.read_bytes() == b"#!/bin/sh\necho run\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert await client.read_file(str(target)) == b"#!/bin/sh\necho run\n"
    assert (await client.exec([str(target)])).output == "run\n"
    with pytest.raises(RemoteFileNotFound):
        await client.read_file(str(tmp_path / "absent"))
    with pytest.raises(RemoteFileError):
        await client.read_file(str(tmp_path))
    odd = tmp_path / "a folder" / "ü+%&=.txt"
    await client.write_file(str(odd), b"odd name")
    assert odd.read_bytes() == b"odd name"


async def test_upload_and_download_tar(client: RockletClient, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in [("proj/a.txt", b"A"), ("proj/deep/b.txt", b"B")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    await client.upload(buffer.getvalue(), str(tmp_path / "dest"))
    assert (tmp_path / "dest" / "proj" / "deep" / "b.txt").read_bytes() == b"B"

    tar_bytes = await client.download(str(tmp_path / "dest" / "proj"))
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as archive:
        names = sorted(archive.getnames())
        assert names == ["proj", "proj/a.txt", "proj/deep", "proj/deep/b.txt"]
        member = archive.extractfile("proj/a.txt")
        assert member is not None and member.read() == b"A"

    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as archive:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(RemoteFileError):
        await client.upload(evil.getvalue(), str(tmp_path / "dest2"))
    assert not (tmp_path / "escaped.txt").exists()
    with pytest.raises(RemoteFileNotFound):
        await client.download(str(tmp_path / "absent"))


async def test_forwarder_carries_tcp_to_a_unix_socket(client: RockletClient, tmp_path: Path) -> None:
    async def shout(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()
        writer.write(data.upper())
        await writer.drain()
        writer.close()

    target = tmp_path / "model.sock"
    server = await asyncio.start_unix_server(shout, path=str(target))
    async with server:
        info = await client.start_forwarder(0, str(target))
        assert info.port > 0
        assert (await client.start_forwarder(info.port, str(target))).port == info.port

        async def roundtrip(payload: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", info.port)
            writer.write(payload)
            writer.write_eof()
            answer = await reader.read()
            writer.close()
            return answer

        big = bytes(range(97, 123)) * 100_000
        answers = await asyncio.gather(roundtrip(b"hello model"), *(roundtrip(big) for _ in range(4)))
        assert answers[0] == b"HELLO MODEL"
        assert all(answer == big.upper() for answer in answers[1:])
        health = await client.health()
        assert health.forwarders[info.port] == str(target)
        with pytest.raises(ForwarderError, match="already forwards"):
            await client.start_forwarder(info.port, str(tmp_path / "other.sock"))

    busy = await asyncio.start_server(shout, "127.0.0.1", 0)
    async with busy:
        busy_port = busy.sockets[0].getsockname()[1]
        with pytest.raises(ForwarderError, match="cannot listen"):
            await client.start_forwarder(busy_port, str(target))
    dangling = await client.start_forwarder(0, str(tmp_path / "nobody-listens.sock"))
    reader, writer = await asyncio.open_connection("127.0.0.1", dangling.port)
    assert await reader.read() == b""
    writer.close()


async def test_unreachable_socket_is_a_typed_error(tmp_path: Path) -> None:
    async with RockletClient(tmp_path / "nothing.sock") as absent:
        with pytest.raises(RockletUnavailable):
            await absent.health()
        with pytest.raises(RockletUnavailable, match="did not become ready"):
            await absent.wait_ready(timeout=0.2)


async def test_large_multiline_command_and_binary_output(client: RockletClient, tmp_path: Path) -> None:
    body = "\n".join(f"line {i} with 'quotes' and \"double\" and $dollar" for i in range(5000))
    target = tmp_path / "big.txt"
    result = await client.run(f"cat > {target} <<'EOF'\n{body}\nEOF\nwc -l < {target}", "heredoc")
    assert result.output.strip() == "5000" and result.exit_code == 0
    assert target.read_text() == body + "\n"
    binary = await client.exec("printf 'ok\\377\\376end'")
    assert binary.output == "ok\ufffd\ufffdend"


async def test_closing_a_session_stops_its_running_command(client: RockletClient) -> None:
    running = asyncio.create_task(client.run("sleep 60", "closing", timeout=60))
    await asyncio.sleep(0.5)
    await client.close_session("closing")
    result = await asyncio.wait_for(running, timeout=10)
    assert result.exit_code == 128 + 9


async def test_malformed_http_is_refused_and_the_rocklet_keeps_serving(
    client: RockletClient, rocklet_socket: Path
) -> None:
    reader, writer = await asyncio.open_unix_connection(str(rocklet_socket))
    writer.write(b"NONSENSE\r\n\r\n")
    await writer.drain()
    assert (await reader.read()).startswith(b"HTTP/1.1 400")
    writer.close()

    reader, writer = await asyncio.open_unix_connection(str(rocklet_socket))
    body = b'{"cmd": ["echo", "chunked"], "timeout": 5}'
    writer.write(
        b"POST /exec HTTP/1.1\r\nHost: rocklet\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )
    await writer.drain()
    response = await reader.read()
    writer.close()
    assert response.startswith(b"HTTP/1.1 200") and b'"output": "chunked\\n"' in response
    assert (await client.health()).status == "ok"


def test_split_target_decodes_like_urllib() -> None:
    from urllib.parse import urlencode

    from rock.rocklet.wire import split_target

    params = {"path": "/tmp/a b/ü+%.txt", "mode": "755"}
    parts, query = split_target("/sessions/s%2F1/run?" + urlencode(params))
    assert parts == ["sessions", "s/1", "run"]
    assert query == params


async def test_the_default_session_opens_at_boot_and_an_explicit_create_replaces_it(tmp_path: Path) -> None:
    socket_path = tmp_path / "rocklet.sock"
    proc = subprocess.Popen([sys.executable, "-m", "rock.rocklet", "--socket", str(socket_path)])
    try:
        async with RockletClient(socket_path) as rocklet:
            await rocklet.wait_ready(timeout=20)
            assert (await rocklet.run("echo ready")).output == "ready\n"
            assert "default" in (await rocklet.health()).sessions
            with pytest.raises(SessionExists):  # used already: it is the caller's now
                await rocklet.create_session("default")
        proc.terminate()
        proc.wait(timeout=10)
        proc = subprocess.Popen([sys.executable, "-m", "rock.rocklet", "--socket", str(socket_path)])
        async with RockletClient(socket_path) as rocklet:
            await rocklet.wait_ready(timeout=20)
            await rocklet.create_session("default", env={"SHADE": "teal"}, cwd=str(tmp_path))
            assert (await rocklet.run("echo $SHADE $(pwd)")).output.split() == ["teal", str(tmp_path)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
