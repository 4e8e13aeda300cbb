"""Wire models of the rocklet's HTTP API, used by the client and by anyone re-exporting them (rock.sdk.types).

The server builds the same JSON with the standard library only (see rock.rocklet.server), so that it starts in
a few tens of milliseconds; tests check that its answers validate against these models.
"""

from pydantic import BaseModel, ConfigDict, Field

from rock.rocklet.output import DEFAULT_MAX_OUTPUT


class Observation(BaseModel):
    """The result of one command."""

    output: str = Field(description="stdout and stderr interleaved, capped with a visible truncation marker")
    exit_code: int | None = Field(description="the command's exit status; None when it was killed on timeout")
    truncated: bool = Field(False, description="True when the middle of the output was dropped")
    duration: float = Field(0.0, description="seconds from the start of the command to its end")
    timed_out: bool = Field(False, description="True when the timeout killed the command's processes")


class CreateSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    env: dict[str, str] | None = None
    cwd: str | None = None


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cmd: str
    timeout: float = Field(gt=0)
    max_output: int = Field(DEFAULT_MAX_OUTPUT, ge=0)


class ExecRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cmd: str | list[str] = Field(description="a shell command line, or an argv list run without a shell")
    timeout: float = Field(gt=0)
    cwd: str | None = None
    env: dict[str, str] | None = None
    max_output: int = Field(DEFAULT_MAX_OUTPUT, ge=0)


class ForwarderRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    port: int = Field(ge=0, le=65535, description="TCP port on 127.0.0.1 inside the sandbox; 0 picks one")
    target_socket: str = Field(
        description="unix socket path inside the sandbox to forward each connection to"
    )


class ForwarderInfo(BaseModel):
    port: int
    target_socket: str


class Health(BaseModel):
    status: str
    version: str
    pid: int
    python: str
    shell: str
    sessions: list[str]
    forwarders: dict[int, str]


class ErrorInfo(BaseModel):
    type: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorInfo
