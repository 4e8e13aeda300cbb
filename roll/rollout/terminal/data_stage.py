"""The data stage of a terminal run (`env.data`): tasks and SFT data made before training starts.

roll defines what the stage must deliver (`PreparedTerminalData`); the ROME data pipeline makes it. That
pipeline sits above roll (it imports roll's configs and serves ROLL's engines while collecting), so roll
never imports it: it runs `rome data prepare` as a child process, hands it the env section as JSON on stdin,
relays each line the child prints as a progress line, and reads the prepared data back as JSON from a file.
The child's failures arrive as one line on its stderr (exit status 2) and are raised here as
DataStageError."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import Field, ValidationError

from roll.config import StrictConfig
from roll.rollout.terminal.config import TerminalEnvConfig

# `rome data prepare`, run by this interpreter so it works in a virtual environment whose bin/ is not on PATH.
STAGE_COMMAND = (sys.executable, "-m", "rome.cli", "data", "prepare")
# The exit status and stderr prefix of a failure the stage explains in one line (`rome data`'s own).
FAILED_STATUS = 2
ERROR_PREFIX = "error: "
# How long a stopped stage may take to unwind (stop its sandboxes and private fleet) before it is killed, and
# how often it is asked again meanwhile.
STOP_GRACE_S = 60.0
STOP_RETRY_S = 5.0


class PreparedTerminalData(StrictConfig):
    """What the data stage made: RL trains on `train_ids`, the run evaluates on `eval_ids` (both valid
    instances under `tasks_dir`) and warm-starts with SFT on `sft_path`."""

    folder: Path = Field(description="The content-addressed dataset folder (funnel report inside).")
    tasks_dir: Path
    train_ids: list[str] = Field(
        min_length=1,
        description="The tasks RL plays: the instances SFT imitated, or with env.data.rl_per_family the "
        "RL-only ones.",
    )
    eval_ids: list[str] = Field(
        description="In-family held-out instances: new instances of the trained families."
    )
    out_of_family_ids: list[str] = Field(
        default_factory=list, description="Held-out instances of the families the run never trains on."
    )
    sft_path: Path
    experts: Path | None = Field(
        None, description="The kept trajectories (JSONL): train tasks' experts for initialized resampling."
    )
    summary: list[str] = Field(default_factory=list, description="Lines for the run's log.")


class DataStageError(RuntimeError):
    """The data stage cannot run or made nothing usable; the message says what to do."""


def prepare_terminal_data(env: TerminalEnvConfig, say: Callable[[str], None]) -> PreparedTerminalData:
    """Run the data stage for `env.data` and check that it made something to train and evaluate on."""
    assert env.data is not None
    with tempfile.TemporaryDirectory(prefix="roll-data-stage-") as scratch:
        prepared = run_data_stage(env, say, Path(scratch))
    if not prepared.sft_path.is_file():
        raise DataStageError(
            f"the data stage wrote no SFT data ({prepared.sft_path}); read its funnel report in "
            f"{prepared.folder} and loosen env.data (more attempts, other families)"
        )
    return prepared


def run_data_stage(env: TerminalEnvConfig, say: Callable[[str], None], scratch: Path) -> PreparedTerminalData:
    """`rome data prepare --out FILE` with the env section on stdin; each stdout line goes to `say`. The child
    runs in its own session, so Ctrl-C reaches roll alone and roll stops the child exactly once (whatever
    ends this function early, the child is stopped before it returns); it also gets SIGTERM should roll be
    killed outright."""
    out, errors = scratch / "prepared.json", scratch / "stderr.txt"
    command = [*STAGE_COMMAND, "--out", str(out)]
    with errors.open("w+") as stderr:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(env.model_dump_json())
                process.stdin.close()
            except BrokenPipeError:  # it ended before reading: its status and stderr say why
                pass
            for line in process.stdout:
                say(line.rstrip("\n"))
            status = process.wait()
        finally:
            _stop(process)
        stderr.seek(0)
        told = stderr.read()
    if status != 0:
        raise DataStageError(_failure(status, told, command))
    if told.strip():  # warnings of a stage that went well still reach the user
        sys.stderr.write(told)
    try:
        return PreparedTerminalData.model_validate_json(out.read_text())
    except (OSError, ValidationError) as error:
        raise DataStageError(
            f"the data stage (`{' '.join(command)}`) ended well but its prepared data cannot be read: "
            f"{error}; run it again (the finished steps are cached)"
        ) from error


def _failure(status: int, told: str, command: list[str]) -> str:
    lines = [line for line in told.splitlines() if line.strip()]
    if status == FAILED_STATUS and lines and lines[-1].startswith(ERROR_PREFIX):
        return lines[-1].removeprefix(ERROR_PREFIX)
    how = f"was stopped by signal {-status}" if status < 0 else f"failed with exit status {status}"
    tail = "\n".join(lines[-20:]) or "(nothing on stderr)"
    return (
        f"the data stage (`{' '.join(command)}`) {how}; what it printed last:\n{tail}\n"
        "Fix what it names and run again (the finished steps are cached)"
    )


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop the child if it still runs: SIGTERM, which it turns into an unwind that stops its sandboxes and
    private fleet, sent again every STOP_RETRY_S (on a loaded machine one was seen lost, the child running
    on); SIGKILL after STOP_GRACE_S or at a second interrupt (its fleet's guard then cleans up after it)."""
    waited = 0.0
    try:
        while process.poll() is None and waited < STOP_GRACE_S:
            process.terminate()
            try:
                process.wait(timeout=STOP_RETRY_S)
            except subprocess.TimeoutExpired:
                waited += STOP_RETRY_S
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when roll dies, even by SIGKILL (Linux PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)
