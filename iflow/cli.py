"""`iflow`: the interactive terminal agent, or one task with -p."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast, get_args

import typer

if TYPE_CHECKING:
    from iflow.types import PromptProfile

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="iFlow: a terminal agent for software work. Without -p it opens an interactive session.",
)


@app.command()
def run(
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="Run this task non-interactively and exit.")
    ] = None,
    yolo: Annotated[bool, typer.Option("--yolo", "-y", help="Run every tool call without asking.")] = False,
    approval_mode: Annotated[
        str | None,
        typer.Option(help="default (ask before shell and writes), auto-edit, yolo, plan (read-only)."),
    ] = None,
    max_turns: Annotated[int | None, typer.Option(help="Most model calls per prompt.", min=1)] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Most tokens (prompt + completion) per prompt.")
    ] = None,
    max_time: Annotated[float | None, typer.Option(help="Most wall-clock seconds per prompt.")] = None,
    output_file: Annotated[
        Path | None,
        typer.Option(help="With -p: write JSON (session id, rounds, token usage, time, termination reason)."),
    ] = None,
    trajectory: Annotated[
        Path | None,
        typer.Option(
            help="Write the session as an ATIF trajectory (Harbor's format) to this file: after the -p run, "
            "or, with --resume/--continue and no prompt, the saved session without running anything."
        ),
    ] = None,
    continue_: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the latest session of this directory.")
    ] = False,
    resume: Annotated[
        str | None, typer.Option("--resume", "-r", help="Resume the session with this id.")
    ] = None,
    list_sessions: Annotated[
        bool, typer.Option("--list-sessions", help="List this directory's sessions.")
    ] = False,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint (overrides baseUrl).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model name (overrides modelName).")
    ] = None,
    api_key: Annotated[str | None, typer.Option(help="API key (overrides apiKey).")] = None,
    text_tools: Annotated[
        bool, typer.Option(help="For models without native tool calls: use <tool_call> blocks in text.")
    ] = False,
    prompt_profile: Annotated[
        str | None,
        typer.Option(
            help="full (every tool, full instructions), compact (shell, read_file, write_file and "
            "replace with one-line descriptions, a short prompt: for small models) or shell (compact with "
            "the shell as the only tool); overrides promptProfile."
        ),
    ] = None,
    environment_date: Annotated[
        str | None,
        typer.Option(
            help="The date the environment reminder states, instead of today's (for reproducible runs)."
        ),
    ] = None,
    environment_os: Annotated[
        str | None,
        typer.Option(
            help="The OS the environment reminder states, instead of the machine's (for reproducible runs)."
        ),
    ] = None,
    sandbox: Annotated[
        str | None,
        typer.Option(
            help="Run every tool in a ROCK sandbox from this image; the current directory is copied in, "
            "changes stay in the sandbox (ROCK_ADMIN_URL picks the admin)."
        ),
    ] = None,
    sandbox_workdir: Annotated[
        str, typer.Option(help="Folder in the sandbox that receives the copy.")
    ] = "/tmp/workspace",
) -> None:
    from rich.console import Console

    from iflow.agent import ApprovalMode
    from iflow.agent.build import AgentOptions, ConfigurationError, build_parts
    from iflow.executors.base import ExecutorError
    from iflow.sessions import SessionError, SessionStore
    from iflow.settings import SettingsError

    errors = Console(stderr=True)
    cwd = Path.cwd().resolve()
    store = SessionStore()
    if list_sessions:
        for info in store.list(str(cwd)):
            print(f"{info.id}  {info.created[:19]}  {info.first_prompt}")
        return
    if trajectory is not None and prompt is None and (resume or continue_):
        raise typer.Exit(_export_session(store, resume, str(cwd), trajectory, errors))
    mode = _approval_mode(yolo, approval_mode, errors)
    profile = _prompt_profile(prompt_profile)
    options = AgentOptions(
        cwd=cwd,
        base_url=base_url,
        api_key=api_key,
        model=model,
        approval_mode=ApprovalMode(mode) if mode else None,
        max_turns=max_turns,
        max_tokens=max_tokens,
        max_time_s=max_time,
        tool_format="text" if text_tools else "native",
        prompt_profile=profile,
        environment_date=environment_date,
        environment_os=environment_os,
        sandbox_image=sandbox,
        sandbox_workdir=sandbox_workdir,
    )
    if prompt is None and not sys.stdin.isatty():
        prompt = sys.stdin.read().strip() or None
    try:
        session = None
        if resume:
            session = store.load(resume)
        elif continue_:
            session = store.latest(str(cwd))
        parts = build_parts(options)
    except (ConfigurationError, SettingsError, SessionError, ExecutorError) as error:
        errors.print(f"[red]iflow:[/] {error}")
        raise typer.Exit(2) from error
    try:
        if prompt is None:
            from iflow.repl import Repl

            Repl(parts, store, session).loop()
            return
        if session is None:
            session = store.create(str(parts.options.cwd), parts.llm.config.model)
        code = _run_once(parts, store, session, prompt, output_file)
        if trajectory is not None:
            code = _export_session(store, session.id, str(cwd), trajectory, errors) or code
    finally:
        parts.close()
    raise typer.Exit(code)


def _export_session(store, session_id: str | None, cwd: str, path: Path, errors) -> int:  # type: ignore[no-untyped-def]
    """Write a saved session (the latest of `cwd` when no id is given) as ATIF; 0, or 2 with the reason."""
    from iflow.atif import AtifError, write_trajectory
    from iflow.session_atif import session_trajectory
    from iflow.sessions import SessionError

    try:
        chosen = session_id or store.latest(cwd).id
        write_trajectory(path, session_trajectory(store, chosen))
    except (SessionError, AtifError, OSError) as error:
        errors.print(f"[red]iflow:[/] cannot write the ATIF trajectory to {path}: {error}")
        return 2
    errors.print(f"iflow: ATIF trajectory of session {chosen} written to {path}")
    return 0


def _approval_mode(yolo: bool, approval_mode: str | None, errors: object) -> str | None:
    from iflow.agent import ApprovalMode

    if yolo:
        return ApprovalMode.YOLO.value
    if approval_mode is None:
        return None
    allowed = [mode.value for mode in ApprovalMode]
    if approval_mode not in allowed:
        print(f"iflow: --approval-mode {approval_mode!r} is not one of {', '.join(allowed)}", file=sys.stderr)
        raise typer.Exit(2)
    return approval_mode


def _prompt_profile(value: str | None) -> PromptProfile | None:
    from iflow.types import PromptProfile

    allowed = get_args(PromptProfile)
    if value is not None and value not in allowed:
        print(f"iflow: --prompt-profile {value!r} is not one of {', '.join(allowed)}", file=sys.stderr)
        raise typer.Exit(2)
    return cast("PromptProfile | None", value)


def _run_once(parts, store, session, prompt: str, output_file: Path | None) -> int:  # type: ignore[no-untyped-def]
    from iflow.agent import ApprovalMode, TerminationReason
    from iflow.agent.build import build_agent
    from iflow.repl import PlainEvents

    if session is None:
        session = store.create(str(parts.options.cwd), parts.llm.config.model)
    if parts.config.approval_mode in (ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT):
        print(
            f"iflow: approval mode {parts.config.approval_mode.value} in a non-interactive run: calls that "
            "need approval will be refused (use --yolo to allow them)",
            file=sys.stderr,
        )
    agent = build_agent(parts, events=PlainEvents(), session=session)
    # A supervisor's SIGTERM ends the run like Ctrl-C: the session and the output file are still written.
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        result = agent.run(prompt)
    finally:
        signal.signal(signal.SIGTERM, previous)
        agent.close()
    summary = {"session_id": session.id, "session_file": str(session.path), **result.to_dict()}
    if output_file is not None:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        output_file.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"\n[iflow] {result.termination.value}: {result.rounds} rounds, {result.usage.total_tokens} tokens, "
        f"{result.elapsed_s:.1f} s, session {session.id}",
        file=sys.stderr,
    )
    if result.error:
        print(f"iflow: {result.error}", file=sys.stderr)
    return 0 if result.termination is TerminationReason.COMPLETED else 1


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point (`iflow`)."""
    app()
