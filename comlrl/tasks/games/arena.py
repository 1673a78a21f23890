"""TextArena games as tree states: making a game (each fault one line), what a seat sees, and one round.

A `GameState` is a node's state: the game (a TextArena env, deep-copied for every child, so siblings play
on from the same position and never touch their parent), who sits where, and what the round's trained seats
see. A round starts where a trained seat is to move: each trained agent moves once, in the order the game asks
for moves, fixed opponents reply inside it, and the round ends when a trained agent that already moved is to
move again (its next decision is the next round) or the game ends. Every agent's prompt is what its seat had
seen when the round began, so in a turn-taking game with one trained agent a round is one move and its replies;
with several trained agents a round is their simultaneous move (a later one does not see an earlier one's move
of the same round: exact for simultaneous decisions, an approximation for conversation rounds).
"""

from __future__ import annotations

import copy
import difflib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.errors import ConfigError
from comlrl.tasks.games.seats import agent_of

KEY = "task.textarena.env_id"
MAX_FIXED_MOVES = 200  # fixed-opponent moves in one round before the round is cut (a game that never asks again)
_LISTED = re.compile(r"(?i)(available (?:moves|actions)|valid (?:moves|actions)|legal (?:moves|actions))[^\n]*")
_TOKEN = re.compile(r"\[[^\[\]\n]{1,40}\]")


def textarena() -> Any:
    """The textarena module, or a one-line error saying how to install it."""
    try:
        import textarena as ta
    except ImportError:
        raise ConfigError("config error: task.name=textarena needs the `games` extra: pip install -e '.[games]' "
                          "(textarena 0.7.4)") from None
    return ta


def make_game(env_id: str, num_players: int, seed: int, kwargs: dict[str, Any] | None = None) -> Any:
    """A reset TextArena game (`kwargs`: the game's own options, over its registered ones); an unknown id, missing
    nltk data, a missing API key, a game that does not import on this Python, an option it does not take or a
    wrong player count is a one-line ConfigError naming `task.textarena.env_id`, `.env_kwargs` or `.seats`."""
    ta = textarena()
    from textarena.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        close = difflib.get_close_matches(env_id, list(ENV_REGISTRY), n=3)
        hint = (f"; did you mean {', '.join(close)}?" if close
                else " (textarena.envs.registration.ENV_REGISTRY lists them)")
        raise ConfigError(f"config error: {KEY}={env_id!r} is not a registered TextArena game{hint}")
    options = dict(kwargs or {})
    made = False
    try:
        env = ta.make(env_id, **options)
        made = True
        env.reset(num_players=num_players, seed=seed)
    except Exception as exc:  # noqa: BLE001 - every start-up failure of a game becomes one line
        raise start_fault(exc, env_id, num_players, options, made) from None
    return env


def start_fault(exc: BaseException, env_id: str, num_players: int, options: dict[str, Any], made: bool
                ) -> ConfigError:
    """The one line for a game that failed to be made (`made` False) or reset."""
    if isinstance(exc, LookupError):  # nltk's "Resource 'words' not found"
        found = re.search(r"Resource '?([\w./-]+)'? not found", str(exc))
        what = found.group(1) if found else str(exc).strip().splitlines()[0]
        return ConfigError(f"config error: {KEY}={env_id!r} needs nltk data that is not installed ({what}); "
                           f"install it with: python -m nltk.downloader {what}")
    if isinstance(exc, SyntaxError):
        return ConfigError(f"config error: {KEY}={env_id!r} does not import on this Python ({exc.msg} in "
                           f"{exc.filename}:{exc.lineno}); choose another game")
    if isinstance(exc, TypeError) and not made:
        return ConfigError(f"config error: task.textarena.env_kwargs={options!r} is not allowed for {env_id}: {exc}")
    if isinstance(exc, AssertionError) and made:
        return ConfigError(f"config error: task.textarena.seats has {num_players} entries; {env_id} refuses that: "
                           f"{str(exc).strip() or 'wrong number of players'}")
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigError(f"config error: {KEY}={env_id!r} cannot start here: {line}")


def _layers(env: Any) -> list[Any]:
    """The wrapper chain, outermost first, ending with the game itself (TextArena's `Wrapper.env`)."""
    ta = textarena()
    out = [env]
    while isinstance(out[-1], ta.Wrapper):
        out.append(out[-1].env)
    return out


def view_of(env: Any, player: int) -> str:
    """What `player` sees now: its pending observations handed to the game's observation wrapper, as the game's
    own `get_observation` does for the player to move (so asking again later shows only what came since)."""
    ta = textarena()
    layers = _layers(env)
    state = layers[-1].state
    pending = state.observations[player]
    state.observations[player] = []
    for layer in layers:
        if isinstance(layer, ta.ObservationWrapper):
            return str(layer.observation(player, pending))
    return "\n".join(str(m) for _, m, *_ in pending)  # an unwrapped id (-raw): the messages as written


def game_scores(env: Any, key: str, seats: int) -> tuple[float, ...]:
    """Per seat, the number the game keeps under `key` in its state (`state.game_state[key]`, e.g. the
    Prisoner's Dilemma's `scores`); a one-line ConfigError naming task.textarena.score_key where it has none."""
    kept = _layers(env)[-1].state.game_state
    table = kept.get(key) if isinstance(kept, dict) else None
    if not isinstance(table, dict):
        found = ", ".join(k for k, v in (kept or {}).items() if isinstance(v, dict)) or "none"
        raise ConfigError(f"config error: task.textarena.score_key={key!r} is not a per-player table of this game's "
                          f"state; its tables: {found}")
    return tuple(float(table.get(s, 0.0)) for s in range(seats))


def current_player(env: Any) -> int:
    return int(_layers(env)[-1].state.current_player_id)


def legal_moves(observation: str) -> list[str]:
    """The moves the game lists on its last line naming available / valid / legal moves ("Available Moves:
    '[0]', '[4]'"), in order; empty where it lists none."""
    lines = [m.group(0) for m in _LISTED.finditer(observation)]
    if not lines:
        return []
    return list(dict.fromkeys(_TOKEN.findall(lines[-1])))


def random_move(observation: str, rng: random.Random) -> str:
    """A uniformly random listed move; where the game lists none, a random bracketed token of its text (its
    examples, e.g. '[4]'), else "[0]"."""
    moves = legal_moves(observation) or list(dict.fromkeys(_TOKEN.findall(observation)))
    return rng.choice(moves) if moves else "[0]"


def well_formed(text: str, observation: str) -> bool:
    """The reply names one of the listed moves (where the game lists them), else holds a bracketed token."""
    moves = legal_moves(observation)
    return any(m.lower() in text.lower() for m in moves) if moves else bool(_TOKEN.search(text))


# a fixed opponent: (its seat, what it sees, the game's random generator) -> its reply
Opponent = Callable[[int, str, random.Random], str]


@dataclass
class GameState:
    """One node's game: the env (this node's own copy), the seats, and the views of this round's trained seats."""

    env: Any
    seats: tuple[str, ...]
    rng: random.Random  # the fixed opponents' draws: copied with the game, so siblings meet the same replies
    views: dict[int, tuple[int, str]] = field(default_factory=dict)  # agent -> (its seat this round, its view)
    done: bool = False
    rewards: tuple[float, ...] = ()  # per seat, the game's rewards once done
    invalid: tuple[bool, ...] = ()  # per seat, the game ended on its invalid move
    reason: str = ""  # the game's reason for its end
    log: tuple[str, ...] = ()  # the moves so far, "seat: move" (the readable game)
    rounds: int = 0

    @property
    def ended(self) -> bool:
        """The game is over: the joint action that left this state gets no child (`EndState`)."""
        return self.done

    @property
    def trained_seats(self) -> tuple[int, ...]:
        """The seats this round's agents play (whose rewards the node's returns take); in a game that ended before
        any trained seat moved (a fixed seat that opened with invalid moves), every seat a trained agent holds."""
        if self.views:
            return tuple(sorted(seat for seat, _ in self.views.values()))
        return tuple(s for s, name in enumerate(self.seats) if agent_of(name) is not None)

    def view(self, seat_returns: Sequence[float]) -> float:
        """This node's return from per-seat returns: the mean over the seats its trained agents play this round
        (one agent against fixed opponents: its seat; self-play: the seat to move; a team: its mean)."""
        seats = self.trained_seats
        return sum(seat_returns[s] for s in seats) / len(seats) if seats else 0.0


def _finish(state: GameState) -> None:
    rewards, info = state.env.close()
    n = len(state.seats)
    state.done = True
    state.rewards = tuple(float((rewards or {}).get(s, 0.0)) for s in range(n))
    state.invalid = tuple(bool((info or {}).get(s, {}).get("invalid_move", False)) for s in range(n))
    reasons = [str((info or {}).get(s, {}).get("reason", "")) for s in range(n)]
    state.reason = next((r for r in reasons if r), "")


def _forfeit(state: GameState, seat: int, reason: str) -> None:
    """The game ends on `seat`'s move as on an invalid one: -1 to it, 0 to the others."""
    n = len(state.seats)
    state.done = True
    state.rewards = tuple(-1.0 if s == seat else 0.0 for s in range(n))
    state.invalid = tuple(s == seat for s in range(n))
    state.reason = reason


def advance(state: GameState, moves: dict[int, str], opponents: dict[str, Opponent]) -> list[tuple[int, str]]:
    """Play on from `state` (changed in place): each agent in `moves` plays its text at its next turn, fixed
    seats reply, until an agent that already moved (or one without a move) is to move, or the game ends. Then
    the next round's views are taken. Returns the (seat, text) played."""
    played: list[tuple[int, str]] = []
    moved: set[int] = set()
    fixed = 0
    while not state.done:
        seat = current_player(state.env)
        agent = agent_of(state.seats[seat])
        if agent is not None:
            if agent in moved or agent not in moves:
                break
            text = moves[agent]
            moved.add(agent)
        else:
            fixed += 1
            if fixed > MAX_FIXED_MOVES:
                break
            text = opponents[state.seats[seat]](seat, view_of(state.env, seat), state.rng)
        played.append((seat, text))
        try:
            done, _ = state.env.step(text)
        except Exception as exc:  # noqa: BLE001 - a game that raises on a reply: that seat's invalid move
            _forfeit(state, seat, f"the game raised {type(exc).__name__} on seat {seat}'s move: {exc}"[:300])
            break
        if done:
            _finish(state)
    state.log = (*state.log, *(f"{state.seats[s]} (seat {s}): {t.strip()}" for s, t in played))
    state.views = {} if state.done else round_views(state)
    state.rounds += 1
    return played


def round_views(state: GameState) -> dict[int, tuple[int, str]]:
    """Per trained agent, the seat it plays this round (the one to move, else its first seat after it) and what
    that seat sees now."""
    n, now = len(state.seats), current_player(state.env)
    out: dict[int, tuple[int, str]] = {}
    for k in range(n):
        seat = (now + k) % n
        agent = agent_of(state.seats[seat])
        if agent is not None and agent not in out:
            out[agent] = (seat, view_of(state.env, seat))
    return out


def start(env: Any, seats: Sequence[str], seed: int, opponents: dict[str, Opponent]) -> GameState:
    """The root's state: a fresh game, the fixed seats that move first played, the first round's views taken."""
    state = GameState(env=env, seats=tuple(seats), rng=random.Random(seed))
    advance(state, {}, opponents)  # no agent moves: fixed seats play until a trained seat is to move
    state.rounds = 0
    return state


def branch(state: GameState) -> GameState:
    """A child's own copy of the game (the parent is never touched)."""
    return copy.deepcopy(state)
