"""Every role's answer in one completion, as tagged sections `<agent_0>...</agent_0>`, `<agent_1>...`.

A centralized policy writes all the agents' parts in one completion (comlrl/tasks/centralized.py), while
rewards, feedback and the tree still work per role; this module is the one place that writes and reads
the sections. What it reads is untrusted model output, so reading never raises and reads leniently: tags
match whatever their case and the whitespace inside their brackets; a role's part starts at its first
opening tag and ends at the next role tag of any kind (its own close, another role's opening) or at the
end of the completion (stripped), so a section left open still counts; a role with no opening gets "".
(A small model rarely closes its sections: SmolLM2-135M closed 2 of 352, docs/results.md.)
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


_ANY_TAG = re.compile(r"<\s*/?\s*agent_\d+\s*>", re.IGNORECASE)


@lru_cache(maxsize=64)
def _opening(role: int) -> re.Pattern[str]:
    return re.compile(rf"<\s*agent_{role}\s*>", re.IGNORECASE)


def split_roles(text: object, num_roles: int) -> list[str]:
    """One part per role: the text after the role's first opening tag, up to the next role tag or the end
    (`.strip()`ped); "" without an opening tag. Anything but a string has no sections. Two linear searches
    per role, however long and malformed the completion."""
    if not isinstance(text, str):
        return [""] * max(0, num_roles)
    parts: list[str] = []
    for role in range(num_roles):
        start = _opening(role).search(text)
        if start is None:
            parts.append("")
            continue
        end = _ANY_TAG.search(text, start.end())
        parts.append(text[start.end():end.start() if end is not None else len(text)].strip())
    return parts
