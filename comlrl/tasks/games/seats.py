"""Who sits at each seat of a game (`task.textarena.seats`): trained agents and fixed opponents. Pure.

    agent0, agent1, ...   a trained agent (the same agent may hold several seats: self-play with one policy)
    random                a uniformly random legal move where the game lists them, else a random bracketed
                          token of its text
    base                  the untrained initial policy (`model.name`), played greedily
    frozen:<dir>          a saved policy: a model folder (a full-weight checkpoint's agent folder, or a LoRA run
                          merged with comlrl-export), played greedily
    llm:<spec>            any model of the project's LLM stack (comlrl/llm/spec.py), played greedily
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from comlrl.errors import ConfigError

_AGENT = re.compile(r"agent(\d+)")
FIXED_KINDS = ("random", "base", "frozen:<dir>", "llm:<spec>")


def agent_of(seat: str) -> int | None:
    """The trained agent a seat names (`agent3` -> 3), None for a fixed opponent."""
    m = _AGENT.fullmatch(seat)
    return int(m.group(1)) if m else None


def check_seat(seat: str, key: str) -> None:
    """Raise a one-line ConfigError naming `key` for a seat that is neither an agent nor a fixed opponent."""
    if agent_of(seat) is not None or seat in ("random", "base"):
        return
    for prefix in ("frozen:", "llm:"):
        if seat.startswith(prefix):
            if not seat[len(prefix):].strip():
                what, form = ("folder", "dir") if prefix == "frozen:" else ("model", "spec")
                raise ConfigError(f"config error: {key}={seat!r} names no {what}; expected {prefix}<{form}>")
            return
    raise ConfigError(f"config error: {key}={seat!r} is not allowed; expected agent0, agent1, ... or one of: "
                      f"{', '.join(FIXED_KINDS)}")


def check_seats(seats: Sequence[str], key: str = "task.textarena.seats") -> int:
    """The number of trained agents in `seats` (its distinct agentK); a one-line ConfigError for a bad seat, no
    trained seat, or agents not numbered 0..N-1."""
    if not seats:
        raise ConfigError(f"config error: {key} is empty; expected one entry per player (agent0, random, ...)")
    for i, seat in enumerate(seats):
        check_seat(str(seat), f"{key}[{i}]")
    agents = sorted({a for a in (agent_of(str(s)) for s in seats) if a is not None})
    if not agents:
        raise ConfigError(f"config error: {key}={list(seats)!r} has no trained seat; expected at least one agentK")
    if agents != list(range(len(agents))):
        raise ConfigError(f"config error: {key}={list(seats)!r} numbers its agents {agents}; expected agent0.."
                          f"agent{len(agents) - 1} (the number of trained agents is the number of distinct agentK)")
    return len(agents)


def fixed_kinds(seats: Sequence[str]) -> list[str]:
    """The distinct fixed opponents of `seats`, in order."""
    return list(dict.fromkeys(s for s in seats if agent_of(s) is None))


def against(seats: Sequence[str], opponent: str) -> tuple[str, ...]:
    """`seats` with every fixed seat played by `opponent`; with no fixed seat (self-play, or only trained seats),
    the first seat of each trained agent kept and every other seat played by `opponent`."""
    if fixed_kinds(seats):
        return tuple(opponent if agent_of(s) is None else s for s in seats)
    seen: set[str] = set()
    out = []
    for s in seats:
        out.append(s if s not in seen else opponent)
        seen.add(s)
    return tuple(out)


def rotations(seats: Sequence[str]) -> list[tuple[str, ...]]:
    """Every seat order of an arrangement: its cyclic rotations, distinct, the given one first (two players:
    both orders)."""
    n = len(seats)
    return list(dict.fromkeys(tuple(seats[(i + k) % n] for i in range(n)) for k in range(n)))


def self_play(seats: Sequence[str]) -> bool:
    """No fixed seat, and an agent holds several seats."""
    agents = [s for s in seats if agent_of(s) is not None]
    return not fixed_kinds(seats) and len(set(agents)) < len(agents)


def evaluation_arrangements(seats: Sequence[str], opponents: Sequence[str]) -> list[tuple[str, ...]]:
    """The seat lists the evaluation plays: each opponent against the trained seats, in every seat order; with no
    opponent (a team of trained agents alone), the seats themselves in every order."""
    if not opponents:
        return rotations(seats)
    return [order for o in opponents for order in rotations(against(seats, o))]
