"""The result of one command in a sandbox, the one model every hop carries unchanged: the rocklet writes it
(with the standard library, `rock.rocklet.output`), the worker's rocklet client reads it, the admin passes it
through and the SDK returns it. Both ends of each hop import it from here, so neither the SDK nor the worker
contract depends on the other's package for it."""

from pydantic import BaseModel, Field


class Observation(BaseModel):
    """The result of one command."""

    output: str = Field(description="stdout and stderr interleaved, capped with a visible truncation marker")
    exit_code: int | None = Field(description="the command's exit status; None when it was killed on timeout")
    truncated: bool = Field(False, description="True when the middle of the output was dropped")
    duration: float = Field(0.0, description="seconds from the start of the command to its end")
    timed_out: bool = Field(False, description="True when the timeout killed the command's processes")
