"""`task.name=textarena`: TextArena's games on the turn tree (docs/games.md).

A problem is a game seed and a seat list; a tree's node is one round (comlrl/tasks/games/arena.py) and holds
its own copy of the game, so the G moves sampled at a node play on from the same position. The game's own
per-player rewards at its end (its invalid-move handling included) are the seats' rewards; each node's return
is taken from the seats its trained agents play (`GameState.view`), so self-play with one policy learns each
move from the mover's side. A joint action that ends the game gets no child.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from comlrl.errors import ConfigError, require
from comlrl.tasks.base import TaskDefaults
from comlrl.tasks.datasets import DatasetConfig
from comlrl.tasks.games import arena
from comlrl.tasks.games.seats import (
    agent_of,
    check_seat,
    check_seats,
    evaluation_arrangements,
    fixed_kinds,
    self_play,
)
from comlrl.tree.contracts import Continuation, JointTurn, Messages, Task, TaskConfig, Transition

EVAL_SEED_BASE = 1_000_000  # held-out games start here; training seeds are below it
INSTRUCTION = "Reply with your next move only, written as the game writes moves (in square brackets)."


@dataclass
class TextArenaOptions:
    """Options of task.name=textarena (`task.textarena.*`, docs/games.md)."""

    env_id: str = "TicTacToe-v0-train"  # any registered TextArena id (`-train`: compact board observations)
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # the game's own options (e.g. num_rounds)
    seats: list[str] = field(default_factory=lambda: ["agent0", "random"])  # one per player: agentK | random
                       # | base | frozen:<dir> | llm:<spec>
    eval_opponents: list[str] | None = None  # whom evaluation seats against the trained ones; null = the fixed
                                             # seats of `seats`, or [random, base] where there are none
    instruction: str = INSTRUCTION  # a line after the game's observation in every prompt
    answer_prefix: str = ""  # how every reply starts ("[": a small model cannot miss the bracketed form)
    stop: list[str] = field(default_factory=list)  # a reply ends after one of these (e.g. "]": one move, no more)
    well_formed_bonus: float = 0.0  # shaping: added to a seat's reward per move that names a listed move
    score_key: str | None = None  # a per-player number the game keeps in its state (IteratedPrisonersDilemma:
                                  # scores): each round's change of it is the seats' reward, not the end's result
    base_model: str | None = None  # the model `base` seats play; null = model.name (filled at load)
    opponent_max_tokens: int = 32  # reply length of base / frozen / llm seats


@dataclass(frozen=True)
class GameProblem:
    """One game: its seed and who sits where (`category`: the evaluation's arrangement, "" in training)."""

    seed: int
    seats: tuple[str, ...]
    category: str = ""


@dataclass(frozen=True)
class GameReward:
    """One round's result. `seat_rewards` are per seat (the game's rewards at its end, plus shaping); `total` is
    the node's view of them (`GameState.view`)."""

    total: float
    seat_rewards: tuple[float, ...]
    components: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    moves: tuple[str, ...] = ()  # per agent, the text it played
    ended: bool = False
    outcome: str = ""  # win | draw | loss once ended, from the trained seats' side
    invalid: bool = False  # the game ended on a trained seat's invalid move
    transcript: tuple[str, ...] = ()  # the game's moves so far (on the last round: the whole game)

    @property
    def all_passed(self) -> bool:
        return self.outcome == "win"

    @property
    def scored(self) -> tuple[str, ...]:
        return self.moves


def outcome_of(rewards: Sequence[float], trained: Sequence[int]) -> str:
    """win / draw / loss of the trained seats: their mean reward above, at or below the others' mean (with no
    other seat, above, at or below 0)."""
    mine = sum(rewards[s] for s in trained) / len(trained)
    others = [r for s, r in enumerate(rewards) if s not in set(trained)]
    ref = sum(others) / len(others) if others else 0.0
    return "win" if mine > ref else "loss" if mine < ref else "draw"


class TextArenaTask(TaskDefaults):
    """Trained agents and fixed opponents in a TextArena game; `cfg` holds its options (`task.textarena`)."""

    num_agents = 1
    role_names = ["agent0"]
    options_type = TextArenaOptions
    needs_sandbox = False
    centralizable = False
    outcome_names = ("win", "draw", "loss", "invalid")
    headline_outcome = ("win", "win")

    def __init__(self, cfg: TextArenaOptions | None = None) -> None:
        self.cfg = cfg if cfg is not None else TextArenaOptions()
        self.seats = tuple(self.cfg.seats)
        self.num_agents = check_seats(self.seats)
        self.role_names = [f"agent{k}" for k in range(self.num_agents)]
        self._opponents: dict[str, arena.Opponent] = {}
        self._starts: dict[GameProblem, arena.GameState] = {}
        # every fault of the game, one line, at start-up
        probe = arena.make_game(self.cfg.env_id, len(self.seats), 0, self.cfg.env_kwargs)
        if self.cfg.score_key:
            arena.game_scores(probe, self.cfg.score_key, len(self.seats))
        self._counters: dict[str, float] = {}
        self.stop_strings = tuple(self.cfg.stop)

    # ---- config -------------------------------------------------------------------------------------------
    @classmethod
    def validate_options(cls, options: TextArenaOptions) -> None:
        check_seats(options.seats)
        for i, o in enumerate(options.eval_opponents or []):
            check_seat(str(o), f"task.textarena.eval_opponents[{i}]")
            require(agent_of(str(o)) is None, f"task.textarena.eval_opponents[{i}]", o, "a fixed opponent")
        require(options.well_formed_bonus >= 0, "task.textarena.well_formed_bonus", options.well_formed_bonus,
                "a number >= 0")
        require(options.opponent_max_tokens >= 1, "task.textarena.opponent_max_tokens", options.opponent_max_tokens,
                "an integer >= 1")

    @classmethod
    def agents_for(cls, task_cfg: TaskConfig) -> int:
        return check_seats(task_cfg.options().seats)

    @classmethod
    def roles_for(cls, task_cfg: TaskConfig) -> list[str]:
        return [f"agent{k}" for k in range(cls.agents_for(task_cfg))]

    @classmethod
    def resolve_options(cls, options: TextArenaOptions, num_turns: int, model_name: str = "") -> TextArenaOptions:
        return options if options.base_model else replace(options, base_model=model_name or None)

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> TextArenaTask:
        return cls(task_cfg.options())

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        if self.cfg.score_key:  # the game's own numbers: no bound known here
            return (float("-inf"), float("inf"))
        return (-1.0, 1.0 + self.cfg.well_formed_bonus)  # TextArena's win / draw / loss scale

    def answer_prefix(self, agent: int, problem: Any) -> str:
        return self.cfg.answer_prefix

    # ---- opponents ----------------------------------------------------------------------------------------
    def _opponent(self, seat: str) -> arena.Opponent:
        """The fixed opponent a seat names, built once (a model that does not load fails at start-up)."""
        if seat not in self._opponents:
            self._opponents[seat] = self._make_opponent(seat)
        return self._opponents[seat]

    def _make_opponent(self, seat: str) -> arena.Opponent:
        if seat == "random":
            return lambda _seat, view, rng: arena.random_move(view, rng)
        from comlrl.llm.factory import make_client
        from comlrl.llm.settings import LLMSettings
        from comlrl.models import resolve_model_path

        if seat == "base":
            if not self.cfg.base_model:
                raise ConfigError("config error: task.textarena.base_model is not set; a `base` seat plays model.name")
            spec = f"local:{self.cfg.base_model}"
        elif seat.startswith("frozen:"):
            spec = f"local:{seat.removeprefix('frozen:')}"
        else:
            spec = seat.removeprefix("llm:")
        client = make_client(spec, LLMSettings(max_tokens=self.cfg.opponent_max_tokens, temperature=0.0),
                             key="task.textarena.seats", resolve_local=resolve_model_path)
        instruction = self.cfg.instruction

        prefix, stops = self.cfg.answer_prefix, tuple(self.cfg.stop)

        def play(_seat: int, view: str, rng: random.Random) -> str:
            """The model's greedy reply to the seat's view, started and cut as the trained agents' are."""
            begun = [{"role": "assistant", "content": prefix}] if prefix and client.continues_answer else []
            messages = _messages(view, instruction) + begun
            reply = client.complete(messages, lambda t: t or None, counter_prefix="opponent")
            if reply is None:  # a failed request: a random legal move rather than a forfeit, and counted
                self._counters["opponent_fallbacks"] = self._counters.get("opponent_fallbacks", 0.0) + 1
                return arena.random_move(view, rng)
            reply = str(reply)
            return _cut(prefix + reply if client.continues_answer else reply, stops)

        return play

    def _opponents_for(self, seats: Sequence[str]) -> dict[str, arena.Opponent]:
        return {s: self._opponent(s) for s in fixed_kinds(seats)}

    # ---- problems -----------------------------------------------------------------------------------------
    def evaluation_opponents(self) -> list[str]:
        """`eval_opponents`, else the fixed seats, else `random` and `base` for self-play (none for a team of
        trained agents alone: it plays itself, in every seat order)."""
        fixed = fixed_kinds(self.seats)
        return list(self.cfg.eval_opponents or fixed or (["random", "base"] if self_play(self.seats) else []))

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[GameProblem], list[GameProblem]]:
        """Training games: seeds 0.. (dataset.max_problems of them, default 1000; shifted by dataset.seed) at the
        configured seats. Held-out games: dataset.eval_size seeds from EVAL_SEED_BASE, each played by every
        evaluation arrangement (each opponent against the trained seats, in every seat order)."""
        n = dataset_cfg.max_problems or 1000
        base = dataset_cfg.seed * 10_000
        require(base + n <= EVAL_SEED_BASE, "dataset.max_problems", n, f"at most {EVAL_SEED_BASE - base} games")
        train = [GameProblem(base + i, self.seats) for i in range(n)]
        evals = [GameProblem(EVAL_SEED_BASE + i, arr, f"{arr_label(arr)}: {' / '.join(arr)}")
                 for arr in evaluation_arrangements(self.seats, self.evaluation_opponents())
                 for i in range(dataset_cfg.eval_size)]
        return train, evals

    def problem_id(self, problem: GameProblem) -> str:
        return f"{self.cfg.env_id}/seed-{problem.seed}/{'-'.join(problem.seats)}"

    def problem_category(self, problem: GameProblem) -> str:
        return problem.category

    # ---- the game -----------------------------------------------------------------------------------------
    def _start(self, problem: GameProblem) -> arena.GameState:
        env = arena.make_game(self.cfg.env_id, len(problem.seats), problem.seed, self.cfg.env_kwargs)
        return arena.start(env, problem.seats, problem.seed, self._opponents_for(problem.seats))

    def initial_messages(self, problem: GameProblem) -> list[Messages]:
        if problem not in self._starts:
            self._starts[problem] = self._start(problem)
        return self.messages_of(self._starts[problem])

    def initial_state(self, problem: GameProblem) -> arena.GameState:
        state = self._starts.pop(problem, None)
        return state if state is not None else self._start(problem)

    def begin_rollout(self) -> None:
        self._starts.clear()

    def messages_of(self, state: arena.GameState) -> list[Messages]:
        """Per agent, its seat's view this round and the instruction (an agent without a move this round, which
        only a finished game has, sees the game's end)."""
        return [_messages(state.views[k][1] if k in state.views else f"The game is over: {state.reason}",
                          self.cfg.instruction) for k in range(self.num_agents)]

    def score(self, items: list[tuple[GameProblem, list[str]]]) -> list[GameReward]:
        """The first round of each game, from its start (`score_turns` plays every round on its node's state)."""
        return [self._play(JointTurn(p, tuple(texts), self.initial_state(p)))[0] for p, texts in items]

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[GameReward, Any]]:
        """Each joint action played on its own copy of its node's game: its reward and the game it leaves."""
        return [self._play(t) for t in turns]

    def _play(self, turn: JointTurn) -> tuple[GameReward, arena.GameState]:
        parent: arena.GameState = turn.state
        state = arena.branch(parent)
        moves = {k: text for k, text in enumerate(turn.texts) if k in parent.views}
        arena.advance(state, moves, self._opponents_for(state.seats))
        n = len(state.seats)
        shaped = [0.0] * n
        bonus = self.cfg.well_formed_bonus
        formed = 0.0
        for k, (seat, view) in parent.views.items():
            ok = arena.well_formed(moves.get(k, ""), view)
            formed += ok / len(parent.views)
            shaped[seat] += bonus * ok
        if self.cfg.score_key:  # the round's change of the game's own per-player numbers
            before = arena.game_scores(parent.env, self.cfg.score_key, n)
            after = arena.game_scores(state.env, self.cfg.score_key, n)
            final = tuple(a - b for a, b in zip(after, before, strict=True))
        else:
            final = state.rewards if state.done else (0.0,) * n
        seat_rewards = tuple(f + s for f, s in zip(final, shaped, strict=True))
        trained = parent.trained_seats
        outcome = outcome_of(state.rewards, trained) if state.done else ""
        invalid = state.done and any(state.invalid[s] for s in trained)
        reward = GameReward(
            total=parent.view(seat_rewards), seat_rewards=seat_rewards,
            components={"outcome": parent.view(final), "well_formed": formed},
            notes=(state.reason,) if state.done and state.reason else (),
            moves=tuple(turn.texts), ended=state.done, outcome=outcome, invalid=invalid,
            transcript=state.log)
        return reward, state

    # ---- next round ---------------------------------------------------------------------------------------
    def transition(self, configured: Transition) -> Transition:
        return self  # the game's next observations, not the feedback modes, make the next round

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        return [self.messages_of(c.state) for c in paths]

    # ---- counts -------------------------------------------------------------------------------------------
    def outcome_counts(self, reward: GameReward) -> dict[str, float]:
        """The game's result, reported on the round that ended it only (rates are per game)."""
        if not reward.ended:
            return {}
        return {"win": float(reward.outcome == "win"), "draw": float(reward.outcome == "draw"),
                "loss": float(reward.outcome == "loss"), "invalid": float(reward.invalid)}

    def metrics(self) -> dict[str, float]:
        out, self._counters = self._counters, {}
        return out

    def close(self) -> None:
        self._opponents.clear()


def arr_label(seats: Sequence[str]) -> str:
    """How an evaluation arrangement is named: `vs <its first fixed seat>`, or `team` with none."""
    fixed = next((s for s in seats if agent_of(s) is None), None)
    return f"vs {fixed}" if fixed else "team"


def _cut(text: str, stops: Sequence[str]) -> str:
    """`text` up to and including the first of `stops` (all of it where none occurs)."""
    ends = [text.index(s) + len(s) for s in stops if s in text]
    return text[: min(ends)] if ends else text


def _messages(view: str, instruction: str) -> Messages:
    return [{"role": "user", "content": f"{view.strip()}\n\n{instruction}".strip()}]
