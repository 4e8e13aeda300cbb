"""`rock.Sandbox` (sync) and `rock.AsyncSandbox`: one sandbox on the fleet, through the admin's HTTP API.

with Sandbox(image="python:3.11", memory="1g") as sb:
    print(sb.run("python3 -V").output)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypedDict, TypeVar, Unpack

import httpx

from rock.sdk import archive, calls
from rock.sdk.errors import RockError, SandboxNotFound
from rock.sdk.types import CreateGroupRequest, CreateSandboxRequest, GroupMember, Observation, SandboxInfo

T = TypeVar("T")
Network = Literal["none", "packages", "bridge"]


class SandboxOptions(TypedDict, total=False):
    """What a sandbox should be (see SandboxSpec); options not given take the admin's defaults."""

    cpus: float
    memory: str
    disk: str
    pids: int
    ttl: float
    idle_timeout: float
    network: Network
    egress: list[str]
    user: str
    env: dict[str, str]
    build_context: str
    start_timeout: float
    queue_timeout: float


def _request(image: str, options: SandboxOptions) -> CreateSandboxRequest:
    return CreateSandboxRequest(image=image, **{k: v for k, v in options.items() if v is not None})


def _group_request(count: int, image: str, options: SandboxOptions) -> CreateGroupRequest:
    return CreateGroupRequest(count=count, image=image, **{k: v for k, v in options.items() if v is not None})


S = TypeVar("S", "Sandbox", "AsyncSandbox")


@dataclass
class SandboxGroup(Generic[S]):
    """The answer to a group create: `sandboxes` (running, in member order), `failed` (the members that are
    not, each with its `error`), `summary` in one plain line. Each sandbox is deleted by its own `close()`."""

    sandboxes: list[S]
    failed: list[GroupMember]
    summary: str

    @property
    def complete(self) -> bool:
        return not self.failed

    def first_error(self) -> RockError | None:
        """The error of the first member that is not running, as the SDK raises a single create's."""
        return error_of(self.failed[0]) if self.failed else None


def error_of(member: GroupMember) -> RockError:
    """The RockError of a group member that is not running."""
    if member.error is None:
        return RockError(f"group member {member.id} has no error: it runs")
    return calls.member_error(member.error)


class Sandbox:
    """A sandbox created on construction and deleted by `close()` (or at the end of a `with` block).

    Options not given (or None) take the admin's defaults (SandboxSpec).
    `Sandbox.attach(id)` wraps one that exists.
    """

    def __init__(
        self,
        image: str = "python:3.11",
        *,
        admin_url: str | None = None,
        api_key: str | None = None,
        _attach: str | None = None,
        **options: Unpack[SandboxOptions],
    ) -> None:
        self._http = httpx.Client(
            base_url=calls.admin_url(admin_url),
            headers=calls.auth_headers(api_key),
            verify=calls.tls_context(),
        )
        try:
            if _attach is not None:
                self.info = self._do(calls.get(_attach))
            else:
                self.info = self._do(calls.create(_request(image, options)))
        except BaseException:
            self._http.close()
            raise
        self.id = self.info.id

    @classmethod
    def attach(cls, sandbox_id: str, admin_url: str | None = None, api_key: str | None = None) -> Sandbox:
        return cls(admin_url=admin_url, api_key=api_key, _attach=sandbox_id)

    @classmethod
    def group(
        cls,
        count: int,
        image: str = "python:3.11",
        *,
        admin_url: str | None = None,
        api_key: str | None = None,
        **options: Unpack[SandboxOptions],
    ) -> SandboxGroup[Sandbox]:
        """`count` sandboxes of one spec from one request; some may fail while the others run (see
        `SandboxGroup.failed`). Each running one is a `Sandbox` of its own, deleted by its `close()`."""
        url = calls.admin_url(admin_url)
        call = calls.create_group(_group_request(count, image, options))
        with httpx.Client(
            base_url=url, headers=calls.auth_headers(api_key), verify=calls.tls_context()
        ) as http:
            try:
                response = http.request(call.method, call.path, **call.request_kwargs())
            except httpx.TransportError as exc:
                raise call.unsent(exc, http.base_url) from exc
            created = call.finish(response)
        running = [cls._of(m.sandbox, url, api_key) for m in created.members if m.sandbox is not None]
        return SandboxGroup(running, [m for m in created.members if m.sandbox is None], created.summary)

    @classmethod
    def _of(cls, info: SandboxInfo, admin_url: str, api_key: str | None) -> Sandbox:
        """A `Sandbox` for one that was just created (no request made)."""
        sandbox = cls.__new__(cls)
        sandbox._http = httpx.Client(
            base_url=admin_url, headers=calls.auth_headers(api_key), verify=calls.tls_context()
        )
        sandbox.info, sandbox.id = info, info.id
        return sandbox

    def _do(self, call: calls.Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, **call.request_kwargs())
        except httpx.TransportError as exc:
            raise call.unsent(exc, self._http.base_url) from exc
        return call.finish(response)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> SandboxInfo:
        self.info = self._do(calls.get(self.id))
        return self.info

    def run(self, cmd: str, session: str = "default", timeout: float = 60.0) -> Observation:
        """Run `cmd` in a persistent bash session (cwd and env persist). CommandTimeout past `timeout`."""
        return self._do(calls.run(self.id, cmd, session, timeout))

    def exec(
        self,
        cmd: str | list[str],
        timeout: float = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Observation:
        """Run `cmd` as a fresh process (a list runs without a shell)."""
        return self._do(calls.exec_(self.id, cmd, timeout, cwd, env))

    def create_session(self, name: str, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self._do(calls.create_session(self.id, name, env, cwd))

    def close_session(self, name: str) -> None:
        self._do(calls.close_session(self.id, name))

    def read_file(self, path: str) -> bytes:
        return self._do(calls.read_file(self.id, path))

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        self._do(calls.write_file(self.id, path, data.encode() if isinstance(data, str) else data, mode))

    def upload(self, src: str | Path, dest: str) -> None:
        """Copy a local file or folder to `dest/<its name>` inside the sandbox (sent as a tar in pieces)."""
        with archive.pack(src) as tar:
            self._do(calls.upload(self.id, archive.pieces(tar), dest))

    def download(self, path: str, dest: str | Path) -> Path:
        """Copy `path` (file or folder) from the sandbox into the local folder `dest`; returns the copy."""
        return archive.unpack(self._do(calls.download(self.id, path)), dest)

    def forward(self, port: int = 0, target_socket: str = "/run/rock/model.sock") -> int:
        """Listen on 127.0.0.1:`port` inside the sandbox, forwarding to `target_socket`; returns the port."""
        return self._do(calls.forward(self.id, port, target_socket))

    def set_network(self, network: Network) -> str:
        """Narrow the running sandbox's network to `none`, or give back the one it was made with (never
        more): for a phase that asks less of the network than another. Returns the network it now has."""
        return self._do(calls.set_network(self.id, network))

    def close(self) -> None:
        """Delete the sandbox (its container goes away) and close the connection. Closing twice is fine."""
        try:
            if not self._http.is_closed:
                with contextlib.suppress(SandboxNotFound):  # deleted already (by another client, say)
                    self.info = self._do(calls.delete(self.id))
        finally:
            self._http.close()


class AsyncSandbox:
    """The async twin of `Sandbox`: `async with AsyncSandbox(...) as sb`, or `await AsyncSandbox.create()`."""

    def __init__(
        self,
        image: str = "python:3.11",
        *,
        admin_url: str | None = None,
        api_key: str | None = None,
        **options: Unpack[SandboxOptions],
    ) -> None:
        self._request = _request(image, options)
        self._http = httpx.AsyncClient(
            base_url=calls.admin_url(admin_url),
            headers=calls.auth_headers(api_key),
            verify=calls.tls_context(),
            limits=httpx.Limits(max_connections=16),
        )
        self.info: SandboxInfo | None = None

    @classmethod
    async def create(
        cls,
        image: str = "python:3.11",
        *,
        admin_url: str | None = None,
        api_key: str | None = None,
        **options: Unpack[SandboxOptions],
    ) -> AsyncSandbox:
        sandbox = cls(image, admin_url=admin_url, api_key=api_key, **options)
        await sandbox.start()
        return sandbox

    @classmethod
    async def group(
        cls,
        count: int,
        image: str = "python:3.11",
        *,
        admin_url: str | None = None,
        api_key: str | None = None,
        **options: Unpack[SandboxOptions],
    ) -> SandboxGroup[AsyncSandbox]:
        """The async twin of `Sandbox.group`."""
        call = calls.create_group(_group_request(count, image, options))
        async with httpx.AsyncClient(
            base_url=calls.admin_url(admin_url),
            headers=calls.auth_headers(api_key),
            verify=calls.tls_context(),
        ) as http:
            try:
                response = await http.request(call.method, call.path, **call.request_kwargs())
            except httpx.TransportError as exc:
                raise call.unsent(exc, http.base_url) from exc
            created = call.finish(response)
        running = []
        for member in created.members:
            if member.sandbox is not None:
                sandbox = cls(admin_url=admin_url, api_key=api_key)
                sandbox.info = member.sandbox
                running.append(sandbox)
        return SandboxGroup(running, [m for m in created.members if m.sandbox is None], created.summary)

    @classmethod
    async def attach(
        cls, sandbox_id: str, admin_url: str | None = None, api_key: str | None = None
    ) -> AsyncSandbox:
        sandbox = cls(admin_url=admin_url, api_key=api_key)
        sandbox.info = await sandbox._do(calls.get(sandbox_id))
        return sandbox

    @property
    def id(self) -> str:
        if self.info is None:
            raise RuntimeError("the sandbox is not created yet: `await sb.start()` or `async with` first")
        return self.info.id

    async def _do(self, call: calls.Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, **call.request_kwargs())
        except httpx.TransportError as exc:
            raise call.unsent(exc, self._http.base_url) from exc
        return call.finish(response)

    async def start(self) -> SandboxInfo:
        try:
            self.info = await self._do(calls.create(self._request))
        except BaseException:
            await self._http.aclose()
            raise
        return self.info

    async def __aenter__(self) -> AsyncSandbox:
        if self.info is None:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def refresh(self) -> SandboxInfo:
        self.info = await self._do(calls.get(self.id))
        return self.info

    async def run(self, cmd: str, session: str = "default", timeout: float = 60.0) -> Observation:
        return await self._do(calls.run(self.id, cmd, session, timeout))

    async def exec(
        self,
        cmd: str | list[str],
        timeout: float = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Observation:
        return await self._do(calls.exec_(self.id, cmd, timeout, cwd, env))

    async def create_session(
        self, name: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> None:
        await self._do(calls.create_session(self.id, name, env, cwd))

    async def close_session(self, name: str) -> None:
        await self._do(calls.close_session(self.id, name))

    async def read_file(self, path: str) -> bytes:
        return await self._do(calls.read_file(self.id, path))

    async def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        await self._do(
            calls.write_file(self.id, path, data.encode() if isinstance(data, str) else data, mode)
        )

    async def upload(self, src: str | Path, dest: str) -> None:
        """Copy a local file or folder to `dest/<its name>` inside the sandbox (sent as a tar in pieces)."""
        with archive.pack(src) as tar:
            await self._do(calls.upload(self.id, archive.apieces(tar), dest))

    async def download(self, path: str, dest: str | Path) -> Path:
        return archive.unpack(await self._do(calls.download(self.id, path)), dest)

    async def forward(self, port: int = 0, target_socket: str = "/run/rock/model.sock") -> int:
        return await self._do(calls.forward(self.id, port, target_socket))

    async def close(self) -> None:
        try:
            if self.info is not None and not self._http.is_closed:
                with contextlib.suppress(SandboxNotFound):
                    self.info = await self._do(calls.delete(self.id))
        finally:
            await self._http.aclose()
