"""Conversation patterns: they script the user turns (troubleshooting, setup workflow, iterative
improvement); `register_pattern` adds one task files may name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    """Scripts the user: `opening` is turn 1, `followups[t-2]` turn t (the last one repeats).

    Placeholders: {goal}, {host} (the API host or "none"), {files} (the initial files).
    """

    name: str
    opening: str
    followups: tuple[str, ...]
    description: str = ""

    def user_turn(self, turn: int, **fields: str) -> str:
        if turn <= 1:
            template = self.opening
        else:
            template = self.followups[min(turn - 2, len(self.followups) - 1)] if self.followups else "Continue."
        return fill(template, fields)


def fill(template: str, fields: Mapping[str, str]) -> str:
    """Replace `{name}` placeholders; any other braces (JSON examples) stay as they are."""
    for name, value in fields.items():
        template = template.replace("{" + name + "}", value)
    return template


PATTERNS: dict[str, Pattern] = {}


def register_pattern(pattern: Pattern, *, replace: bool = False) -> Pattern:
    """Make a conversation pattern available to task files by its name."""
    if pattern.name in PATTERNS and not replace:
        raise ValueError(f"pattern {pattern.name!r} is already registered (pass replace=True)")
    PATTERNS[pattern.name] = pattern
    return pattern


register_pattern(Pattern(
    "troubleshooting",
    "Something is wrong and I need your help.\n{goal}\nPlease investigate first (read the files, query the "
    "service), then fix the root cause.",
    ("Thanks. Based on what you found, please fix the root cause now.",
     "Please verify that the fix works (run it or check the service again) and tell me the result.",
     "If everything works, call complete_task with a short summary; otherwise keep fixing."),
    "the user reports a fault; investigate, fix, verify",
))
register_pattern(Pattern(
    "setup_workflow",
    "Please set this up for me.\n{goal}\nWork step by step, one or two actions per turn.",
    ("Good. Continue with the next setup step.",
     "Check that everything is set up and consistent, and fix what is missing.",
     "Finish up: call complete_task with a summary of what you set up."),
    "a multi-step setup the agents carry out in order",
))
register_pattern(Pattern(
    "iterative_improvement",
    "I would like to improve something.\n{goal}\nStart by looking at the current version.",
    ("Now make the improvement.",
     "Test the improved version with run_python and refine it if needed.",
     "When you are satisfied, call complete_task with a summary of the changes."),
    "inspect, improve, test, refine",
))
