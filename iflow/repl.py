"""The interactive terminal: prompt-toolkit input, rich output, slash commands, approvals, Ctrl-C."""

from __future__ import annotations

import sys

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel

from iflow import workflows
from iflow.agent import Agent, AgentEvents, ApprovalMode, ApprovalRequest, Decision, TerminationReason
from iflow.agent.build import AgentParts, build_agent, load_memory, system_prompt
from iflow.sessions import Session, SessionError, SessionStore
from iflow.settings import iflow_home
from iflow.tools import ToolResult

HELP = """\
[bold]Slash commands[/]
  /help                 this help
  /compress             summarize the conversation now to free context
  /memory show|refresh  show the loaded IFLOW.md/AGENTS.md memory, or reload it
  /todo                 show this project's todo list
  /mode [MODE]          show or set the approval mode: default, auto-edit, yolo, plan
  /clear                start a new session
  /resume [ID]          list this directory's sessions, or resume one
  /exit                 quit (Ctrl-D works too)
[bold]Keys[/]  Enter sends · Alt-Enter (or Esc, Enter) starts a new line · Ctrl-C stops the running turn"""


class PlainEvents(AgentEvents):
    """Non-interactive output: the answer on stdout, tool activity on stderr."""

    def __init__(self) -> None:
        self._streaming = False

    def on_text(self, text: str) -> None:
        self._streaming = True
        sys.stdout.write(text)
        sys.stdout.flush()

    def on_reply_end(self) -> None:
        if self._streaming:
            sys.stdout.write("\n")
            sys.stdout.flush()
        self._streaming = False

    def on_tool_call(self, tool: str, description: str) -> None:
        print(f"  → {description}", file=sys.stderr)

    def on_tool_result(self, tool: str, result: ToolResult) -> None:
        print(f"    {'ok' if result.ok else 'failed'}: {result.summary}", file=sys.stderr)

    def on_notice(self, text: str) -> None:
        print(f"  · {text}", file=sys.stderr)


class MarkdownStream:
    """Streams Markdown: finished blocks are printed for good, the block in progress is redrawn live.

    Redrawing only the current block (never the whole answer) keeps the live area smaller than the screen,
    so nothing is drawn twice when a long answer scrolls.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pending = ""
        self.live: Live | None = None

    def feed(self, text: str) -> None:
        self.pending += text
        while (cut := _block_end(self.pending)) is not None:
            block, self.pending = self.pending[:cut], self.pending[cut:].lstrip("\n")
            self._stop_live()
            self.console.print(Markdown(block))
        if self.pending.strip():
            if self.live is None:
                self.live = Live(console=self.console, transient=True, auto_refresh=False)
                self.live.start()
            self.live.update(Markdown(self.pending), refresh=True)

    def end(self) -> None:
        self._stop_live()
        if self.pending.strip():
            self.console.print(Markdown(self.pending))
        self.pending = ""

    def _stop_live(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _block_end(text: str) -> int | None:
    """End of the first complete Markdown block (a blank line outside a code fence), if any."""
    start = 0
    while (index := text.find("\n\n", start)) >= 0:
        if text[:index].count("```") % 2 == 0:
            return index
        start = index + 2
    return None


class RichEvents(AgentEvents):
    def __init__(self, console: Console) -> None:
        self.console = console
        self.stream = MarkdownStream(console)

    def on_text(self, text: str) -> None:
        self.stream.feed(text)

    def on_reply_end(self) -> None:
        self.stream.end()

    def on_tool_call(self, tool: str, description: str) -> None:
        self.stream.end()
        self.console.print(f"[cyan]●[/] [bold]{escape(description)}[/]", highlight=False)

    def on_tool_result(self, tool: str, result: ToolResult) -> None:
        style = "green" if result.ok else "red"
        summary = escape(result.summary or result.output[:100])
        self.console.print(f"  [{style}]⎿ {summary}[/]", highlight=False)

    def on_notice(self, text: str) -> None:
        self.stream.end()
        self.console.print(f"[yellow]· {escape(text)}[/]", highlight=False)


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event) -> None:  # type: ignore[no-untyped-def]
        event.current_buffer.insert_text("\n")

    return bindings


class Repl:
    def __init__(self, parts: AgentParts, store: SessionStore, session: Session | None) -> None:
        self.parts = parts
        self.store = store
        self.console = Console(highlight=False)
        self.events = RichEvents(self.console)
        home = iflow_home()
        home.mkdir(parents=True, exist_ok=True)
        self.input = PromptSession(history=FileHistory(str(home / "history")), key_bindings=_key_bindings())
        self.confirm: PromptSession[str] = PromptSession()  # answers to approvals stay out of the history
        self.agent = self._new_agent(session)

    def _new_agent(self, session: Session | None) -> Agent:
        if session is None:
            session = self.store.create(str(self.parts.options.cwd), self.parts.llm.config.model)
        self.session = session
        return build_agent(self.parts, approver=self.approve, events=self.events, session=session)

    def loop(self) -> None:
        self._banner()
        try:
            while True:
                try:
                    text = self.input.prompt(self._prompt_text(), multiline=False)
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    break
                text = text.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self.command(text):
                        break
                    continue
                self.turn(text)
        finally:
            self.agent.close()
            self.console.print(
                f"[dim]session saved: {self.session.id} (resume with iflow -r {self.session.id})[/]"
            )

    def _prompt_text(self) -> str:
        mode = self.agent.config.approval_mode
        return "> " if mode is ApprovalMode.DEFAULT else f"({mode.value}) > "

    def _banner(self) -> None:
        parts = self.parts
        self.console.print(
            Panel.fit(
                f"[bold]iFlow[/] · model [cyan]{escape(parts.llm.config.model)}[/] · "
                f"{parts.executor.kind} executor in {escape(parts.executor.workdir)} · "
                f"approval [cyan]{parts.config.approval_mode.value}[/]\n"
                "/help for commands · Ctrl-C stops a turn · /exit or Ctrl-D quits",
                border_style="blue",
            )
        )
        if self.agent.messages:
            count = sum(1 for m in self.agent.messages if m["role"] in ("user", "assistant"))
            self.console.print(f"[dim]resumed session {self.session.id} ({count} messages)[/]")

    def turn(self, prompt: str) -> None:
        result = self.agent.run(prompt)
        if result.termination is TerminationReason.COMPLETED:
            self.console.print(
                f"[dim]{result.rounds} rounds · {result.usage.total_tokens} tokens · "
                f"{result.elapsed_s:.1f} s[/]"
            )
        else:
            self.console.print(
                f"[red]turn ended: {result.termination.value}[/]"
                + (f" [red]{escape(result.error)}[/]" if result.error else "")
            )

    def approve(self, request: ApprovalRequest) -> Decision:
        self.console.print(
            Panel(
                escape(request.description), title=f"iflow wants to run {request.tool}", border_style="yellow"
            )
        )
        while True:
            answer = self.confirm.prompt("Allow? [y]es / [a]lways for this tool / [n]o: ")
            choice = answer.strip().lower()[:1]
            if choice == "y":
                return Decision.ALLOW
            if choice == "a":
                return Decision.ALLOW_ALWAYS
            if choice == "n":
                return Decision.DENY

    # -- slash commands ------------------------------------------------------------------------------
    def command(self, text: str) -> bool:
        """Run a slash command; False means quit."""
        name, _, argument = text[1:].partition(" ")
        argument = argument.strip()
        if name in ("exit", "quit"):
            return False
        handler = {
            "help": self._help,
            "compress": self._compress,
            "memory": self._memory,
            "todo": self._todo,
            "mode": self._mode,
            "clear": self._clear,
            "resume": self._resume,
        }.get(name)
        if handler is not None:
            handler(argument)
            return True
        custom = self._custom_commands().get(name)
        if custom is None:
            self.console.print(f"[red]unknown command /{escape(name)}[/]; /help lists the commands")
        else:
            self.turn(custom.render(argument))
        return True

    def _custom_commands(self) -> dict[str, workflows.SlashCommand]:
        try:
            return workflows.load_commands(self.parts.options.cwd)
        except workflows.WorkflowError as error:
            self.console.print(f"[red]{escape(str(error))}[/]")
            return {}

    def _help(self, argument: str) -> None:
        self.console.print(HELP)
        custom = self._custom_commands()
        if custom:
            self.console.print("[bold]Project commands[/] (.iflow/commands)")
            for name, command in sorted(custom.items()):
                hint = f" {command.argument_hint}" if command.argument_hint else ""
                self.console.print(f"  /{escape(name + hint):<20} {escape(command.description)}")

    def _compress(self, argument: str) -> None:
        try:
            report = self.agent.compress()
        except KeyboardInterrupt:
            self.console.print("[yellow]compression interrupted[/]")
            return
        if report is None:
            self.console.print("nothing to compress yet: the conversation is too short")

    def _memory(self, argument: str) -> None:
        cwd = self.parts.options.cwd
        if argument == "refresh":
            self.agent.set_system_prompt(
                system_prompt(cwd, self.agent.config.approval_mode, self.parts.prompt_profile)
            )
            self.console.print("memory reloaded")
        elif argument in ("", "show"):
            memory = load_memory(cwd)
            self.console.print(
                Panel(escape(memory) if memory.strip() else "(no memory files)", title="memory")
            )
        else:
            self.console.print("usage: /memory show | /memory refresh")

    def _todo(self, argument: str) -> None:
        self.console.print(Panel(escape(self.parts.todos.render()), title="todo"))

    def _mode(self, argument: str) -> None:
        if argument:
            try:
                mode = ApprovalMode(argument)
            except ValueError:
                allowed = ", ".join(mode.value for mode in ApprovalMode)
                self.console.print(f"[red]unknown mode {escape(argument)}[/]; use one of {allowed}")
                return
            self.agent.config.approval_mode = mode
            self.agent.set_system_prompt(
                system_prompt(self.parts.options.cwd, mode, self.parts.prompt_profile)
            )
        self.console.print(f"approval mode: {self.agent.config.approval_mode.value}")

    def _clear(self, argument: str) -> None:
        self.agent.close()
        self.agent = self._new_agent(None)
        self.console.print(f"new session {self.session.id}")

    def _resume(self, argument: str) -> None:
        if not argument:
            infos = self.store.list(str(self.parts.options.cwd))
            if not infos:
                self.console.print("no sessions in this directory yet")
            for info in infos[:20]:
                self.console.print(f"{info.id}  {info.created[:19]}  {escape(info.first_prompt)}")
            return
        try:
            session = self.store.load(argument)
        except SessionError as error:
            self.console.print(f"[red]{escape(str(error))}[/]")
            return
        self.agent.close()
        self.agent = self._new_agent(session)
        self.console.print(f"resumed session {session.id} ({len(session.messages)} messages)")
