"""Every role's answer in one completion, as tagged sections `<agent_0>...</agent_0>`, `<agent_1>...`.

A centralized policy writes all the agents' parts in one completion (comlrl/tasks/centralized.py), while
rewards, feedback and the tree still work per role; this module is the one place that writes and reads
the sections. What it reads is untrusted model output, so reading never raises: tags match whatever
their case and the whitespace inside their brackets, a role's part is its first complete section
(stripped), and a role without one gets "".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["close_tag", "join_roles", "open_tag", "split_roles"]


def open_tag(role: int) -> str:
    """The tag that opens role `role`'s section (roles count from 0)."""
    return f"<agent_{role}>"


def close_tag(role: int) -> str:
    """The tag that closes role `role`'s section."""
    return f"</agent_{role}>"


def join_roles(parts: Sequence[str]) -> str:
    """The completion `split_roles` reads back as `parts`: each part in its own section, in role order."""
    return "\n".join(f"{open_tag(i)}\n{part}\n{close_tag(i)}" for i, part in enumerate(parts))


@lru_cache(maxsize=64)
def _tags(role: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return (re.compile(rf"<\s*agent_{role}\s*>", re.IGNORECASE),
            re.compile(rf"<\s*/\s*agent_{role}\s*>", re.IGNORECASE))


def split_roles(text: object, num_roles: int) -> list[str]:
    """One part per role: the text between the first opening tag of the role and the first closing tag
    after it (`.strip()`ped), "" without a complete section. Anything but a string has no sections.

    The search for the closing tag starts after the first opening tag only: if no close follows it, none
    follows a later opening either, so the first match is found in one pass per role (no quadratic
    rescans of a long, unclosed completion).
    """
    if not isinstance(text, str):
        return [""] * max(0, num_roles)
    parts: list[str] = []
    for role in range(num_roles):
        opening, closing = _tags(role)
        start = opening.search(text)
        end = closing.search(text, start.end()) if start is not None else None
        parts.append(text[start.end():end.start()].strip() if start is not None and end is not None else "")
    return parts
