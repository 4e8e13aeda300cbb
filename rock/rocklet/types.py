"""The worker↔rocklet wire contract: the models of the rocklet's HTTP API, used by its client (the worker's
side). Names start with `Rocklet` where the SDK has a model of the same purpose; a command's result is
`rock.observation.Observation`, one model on every hop.

The server builds the same JSON with the standard library only (see rock.rocklet.server), so that it starts in
a few tens of milliseconds; tests check that its answers validate against these models.
"""

from pydantic import BaseModel, ConfigDict, Field

from rock.rocklet.output import DEFAULT_MAX_OUTPUT


class RockletSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    env: dict[str, str] | None = None
    cwd: str | None = None


class RockletRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cmd: str
    timeout: float = Field(gt=0)
    max_output: int = Field(DEFAULT_MAX_OUTPUT, ge=0)


class RockletExecRequest(BaseModel):
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


class RockletHealth(BaseModel):
    status: str
    version: str
    pid: int
    python: str
    shell: str
    sessions: list[str]
    forwarders: dict[int, str]


class RockletErrorInfo(BaseModel):
    type: str
    message: str


class RockletErrorBody(BaseModel):
    error: RockletErrorInfo
