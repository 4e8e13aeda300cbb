"""Approval modes: which tool calls run on their own, which need a yes from the user, which are refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from iflow.tools.base import ToolKind


class ApprovalMode(StrEnum):
    DEFAULT = "default"  # asks before shell commands and file changes
    AUTO_EDIT = "auto-edit"  # file changes run on their own; shell commands still ask
    YOLO = "yolo"  # everything runs on its own
    PLAN = "plan"  # read-only: shell and file changes are refused


class Decision(StrEnum):
    ALLOW = "allow"
    ALLOW_ALWAYS = "allow_always"  # this tool, for the rest of the session
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    tool: str
    kind: ToolKind
    description: str
    arguments: dict[str, Any]


Approver = Callable[[ApprovalRequest], Decision]

_ASKS: dict[ApprovalMode, set[ToolKind]] = {
    ApprovalMode.DEFAULT: {ToolKind.SHELL, ToolKind.EDIT},
    ApprovalMode.AUTO_EDIT: {ToolKind.SHELL},
    ApprovalMode.YOLO: set(),
    ApprovalMode.PLAN: set(),
}


def is_refused(mode: ApprovalMode, kind: ToolKind) -> bool:
    return mode is ApprovalMode.PLAN and kind in (ToolKind.SHELL, ToolKind.EDIT)


def needs_approval(mode: ApprovalMode, kind: ToolKind) -> bool:
    return kind in _ASKS[mode]


def deny_all(request: ApprovalRequest) -> Decision:
    """The approver of a run nobody watches: anything that needs a yes is refused."""
    return Decision.DENY


NON_INTERACTIVE_DENIAL = (
    "the user did not approve this call: this run is non-interactive, so calls that need approval are "
    "refused (rerun with --yolo, or --approval-mode auto-edit for file edits only)"
)
INTERACTIVE_DENIAL = "the user declined this call; ask what they want instead or try another way"
PLAN_REFUSAL = (
    "plan mode is read-only: shell commands and file changes are not allowed. Investigate with the read "
    "tools and present a plan; the user switches modes to carry it out"
)
