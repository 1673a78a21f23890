"""The one chat of a policy that writes every role's answer, built from the chats the roles would get.

Each role keeps the words its task gives it (problem, role, instructions, worked examples, feedback), so
the single policy is told exactly what N separate agents would be told, plus who it writes for and the
tagged sections to write (comlrl/tree/role_sections.py). The same function joins the first turn's chats and
every later turn's (the feedback modes' per-role prompts), so a joint prompt never depends on the turn.

Layout: `[system, user]`. The system message says that the reply holds N agents' separate answers and,
when every role has the same system prompt, gives it once. The user message has one section per role,
`### agent_<i> (<role>)`, holding the role's chat as text (a single message as written; a longer chat,
e.g. worked examples or earlier answers, as a transcript with each message's speaker), then the format.
"""

from __future__ import annotations

from collections.abc import Sequence

from comlrl.tree.contracts import Messages
from comlrl.tree.role_sections import join_roles

TEAM_SYSTEM = ("You write the answers of a team of {n} agents in one reply: {names}. Each agent has its own "
               "role and its own instructions, shown under its name; each answer is used as that agent's own, "
               "so write each one exactly as that agent is asked to.")
SHARED_SYSTEM = "The system prompt every agent gets: {system}"
FORMAT = ("Write the {n} answers in one reply, each in its own section, in this order; only what is inside "
          "the sections is read:\n{layout}")


def role_label(agent: int, role: str) -> str:
    """How the joint chat names agent `agent`: its section's tag name and its role."""
    return f"agent_{agent} ({role})"


def team_instructions(roles: Sequence[str]) -> str:
    """What the single policy is: the writer of every role's answer, in the sections' format."""
    return f"{team_system(roles)}\n\n{answer_format(roles)}"


def team_system(roles: Sequence[str]) -> str:
    return TEAM_SYSTEM.format(n=len(roles), names=", ".join(role_label(a, r) for a, r in enumerate(roles)))


def answer_format(roles: Sequence[str]) -> str:
    """The exact sections to write, with a placeholder for each role's answer."""
    layout = join_roles([f"({role}'s answer)" for role in roles])
    return FORMAT.format(n=len(roles), layout=layout)


def _shared_system(chats: Sequence[Messages]) -> str | None:
    """The leading system prompt, if every role's chat starts with the same one."""
    firsts = {c[0]["content"] if c and c[0].get("role") == "system" else None for c in chats}
    return firsts.pop() if len(firsts) == 1 else None


def _as_text(chat: Messages) -> str:
    """A role's chat as the text of its section: one message as written, more as a transcript."""
    if len(chat) == 1:
        return str(chat[0]["content"])
    return "\n\n".join(f"[{m.get('role', 'user')}]\n{m['content']}" for m in chat)


def joint_chat(chats: Sequence[Messages], roles: Sequence[str]) -> Messages:
    """One `[system, user]` chat from each role's chat (`chats[i]` is role i's, in role order)."""
    if len(chats) != len(roles):
        raise ValueError(f"joint_chat: {len(chats)} chats for {len(roles)} roles")
    shared = _shared_system(chats)
    system = team_system(roles) + (f"\n\n{SHARED_SYSTEM.format(system=shared)}" if shared else "")
    own = [list(c[1:]) if shared is not None else list(c) for c in chats]
    sections = [f"### {role_label(a, r)}\n{_as_text(chat)}" for a, (r, chat) in enumerate(zip(roles, own, strict=True))]
    user = "\n\n".join([*sections, answer_format(roles)])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
