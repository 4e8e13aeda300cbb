"""The iflow agent inside the task's sandbox: `iflow -p` runs there, its model endpoint the rocklet's
forwarder (127.0.0.1:PORT in the sandbox) to the proxy's socket for this episode, so a `--network none`
sandbox reaches its model and nothing else.

Images need no Python of their own: iflow runs on the interpreter the worker mounts in every sandbox for the
rocklet (the host's, with its loader and libraries), and the agent bundle (iflow and its dependencies,
installed on the host once with `pip install --target`, pinned to the host's versions, cached under
`~/.cache/ale/`) is uploaded to the sandbox and put on PYTHONPATH.

With an expert prefix, `roll/rollout/terminal/resampling/prefill.py` (iflow-only) is uploaded too and run
instead of the CLI: it replays the expert's commands in the sandbox through iflow's shell tool and lets iflow
continue from that history, exactly as the host-side agent does (`roll.rollout.terminal.episode`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from iflow.types import TRAINING_ENVIRONMENT, FixedEnvironment, PromptProfile
from rock.proxy.client import ProxyClient
from rock.sdk.host_python import cache_root, installed_pins
from rock.sdk.runtime import sandbox_python
from roll.rollout.terminal.episode import AgentOutcome
from rome.terminal_tasks.rock_sandbox import RockSandbox
from rome.terminal_tasks.task import Task

AGENT_REQUIREMENTS = ("httpx", "pydantic", "typer", "rich", "prompt_toolkit", "pyyaml")
BUNDLE_DIR = "/var/tmp/ale-agent"  # /tmp is noexec in sandboxes: pydantic-core could not load
SANDBOX_SOCKET = "model.sock"
IFLOW_MAIN = "from iflow.cli import main; main()"  # iflow has no __main__ module
# The host's own interpreter, mounted read-only in every sandbox for the rocklet (rock.sdk.runtime): the agent
# bundle is built for it, and images need no Python of their own.
SANDBOX_PYTHON = " ".join(sandbox_python())
PREFILL_SCRIPT = "/var/tmp/ale-prefill.py"
PREFILL_SPEC = "/var/tmp/ale-prefill.json"


def agent_bundle() -> Path:
    """A folder `ale-agent/` with iflow and its dependencies, built once per iflow source and pins."""
    import iflow

    source = Path(iflow.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*.py")):
        digest.update(str(path.relative_to(source)).encode() + path.read_bytes())
    pins = installed_pins()
    digest.update("\n".join(pins).encode())
    folder = cache_root() / f"agent-bundle-{digest.hexdigest()[:16]}" / "ale-agent"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.is_dir():
            return folder
        staging = folder.with_name("ale-agent.partial")
        shutil.rmtree(staging, ignore_errors=True)
        constraints = folder.parent / "constraints.txt"
        constraints.write_text("\n".join(pins) + "\n")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-compile",
                "--target",
                str(staging),
                "-c",
                str(constraints),
                *AGENT_REQUIREMENTS,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"building the agent bundle failed (pip needs PyPI once):\n{done.stderr[-2000:]}"
            )
        shutil.copytree(source, staging / "iflow", ignore=shutil.ignore_patterns("__pycache__"))
        staging.rename(folder)
    return folder


class InSandboxIflowAgent:
    """`iflow -p` inside the sandbox, its model calls recorded in `episode_id`."""

    name = "iflow-in-sandbox"

    def __init__(
        self,
        proxy: ProxyClient,
        episode_id: str,
        model: str,
        max_turns: int = 20,
        prefix: list[dict[str, object]] | None = None,
        prompt_profile: PromptProfile = "full",
        environment: FixedEnvironment = TRAINING_ENVIRONMENT,
    ) -> None:
        """`prefix`: expert assistant messages to replay before iflow continues (none: iflow -p).
        `environment`: the date and OS iflow's environment reminder states."""
        self.proxy, self.episode_id, self.model, self.max_turns = proxy, episode_id, model, max_turns
        self.prefix = prefix or []
        self.prompt_profile = prompt_profile
        self.environment = environment

    def run(self, sandbox: RockSandbox, task: Task, timeout: float) -> AgentOutcome:
        box = sandbox.rock
        host_dir = box.info.host_dir
        if host_dir is None:
            return AgentOutcome(error="the sandbox has no host socket folder; the proxy cannot reach it")
        box.upload(agent_bundle(), BUNDLE_DIR.rsplit("/", 1)[0])
        self.proxy.attach_socket(box.id, f"{host_dir}/{SANDBOX_SOCKET}", self.episode_id)
        try:
            port = box.forward(0)
            base_url = f"http://127.0.0.1:{port}/v1"
            if self.prefix:
                from roll.rollout.terminal.resampling import prefill

                spec = {
                    "base_url": base_url,
                    "model": self.model,
                    "max_turns": self.max_turns,
                    "max_time_s": timeout,
                    "prompt_profile": self.prompt_profile,
                    "instruction": task.instruction,
                    "steps": self.prefix,
                }
                box.write_file(PREFILL_SCRIPT, Path(prefill.__file__).read_bytes())
                box.write_file(PREFILL_SPEC, json.dumps(spec).encode())
                agent = f"{SANDBOX_PYTHON} {PREFILL_SCRIPT} {PREFILL_SPEC}"
            else:
                agent = (
                    f"{SANDBOX_PYTHON} -c {shlex.quote(IFLOW_MAIN)} --yolo --max-turns {self.max_turns} "
                    f"--prompt-profile {self.prompt_profile} "
                    f"--environment-date {shlex.quote(self.environment.date)} "
                    f"--environment-os {shlex.quote(self.environment.os)} "
                    f"--max-time {timeout:g} --base-url {base_url} --model {shlex.quote(self.model)} "
                    f"-p {shlex.quote(task.instruction)}"
                )
            command = (
                f"cd {shlex.quote(sandbox.workdir)} && HOME=/tmp/ale-home PYTHONPATH={BUNDLE_DIR} {agent}"
            )
            result = sandbox.run(command, timeout=timeout + 30)
        finally:
            self.proxy.detach_socket(box.id)
        error = None if result.timed_out or result.exit_code == 0 else f"iflow exited {result.exit_code}"
        return AgentOutcome(timed_out=result.timed_out, error=error, log=result.output)
