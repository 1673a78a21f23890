"""task.name=bfcl_multi_turn: BFCL v4's stateful multi-turn entries on the turn tree, judged by BFCL's own
multi-turn checker.

Each tree turn is one reply. The agents answer a user turn with calls in BFCL's prompting format, decoded by
BFCL's own `decode_execute` (comlrl/tasks/bfcl/official.py); agent 0's calls run first, then agent 1's,
against the benchmark's own backend classes, whose instances live on the tree path (`Node.state`, a
`TurnState`: comlrl/tasks/bfcl/environment.py), so sibling joint actions diverge and a child continues from
its parent's state. As in BFCL's inference loop, a reply that made calls is followed by another reply to
the same user turn, shown the calls' results, until a reply makes no call or `steps_per_turn` replies were
made; then the next user turn. The tree branches at the first reply of each user turn: a node that
continues a turn samples one reply per agent (`comlrl.tree.contracts.StepState`). The task is its own
transition: each agent's chat goes on with its own reply, then one user message with the reply's results as
BFCL shows them to prompting models (every agent's calls, in the order they ran) and, at a turn's end, the
next user turn.

Reward of a joint action (one reply):

    1.0            BFCL's multi_turn_checker accepts the trajectory through this reply (states and
                   execution results against the ground truth truncated to the turns begun)
  + format_reward  BFCL's decoder found a call, on a turn whose ground truth has calls
  + lenient_reward the project's lenient decoder found a call (shaping; 0 by default)
  + call_reward x calls_matched   per ground-truth call of this user turn, credit for a (leniently) decoded
                   call of the same name: (1 + its arguments equal to the ground truth's) / (1 + the ground
                   truth's arguments), each gold call matched at most once; the mean over the gold calls
                   (shaping, so a small model that never passes still learns which call a request asks for;
                   the pass is the checker's alone)
  - error_penalty x the share of this reply's calls that failed (unknown function, wrong arguments, an
                   exception or an `{"error": ...}` answer of a backend, a timeout)

Bad output is an observation and a low reward, never an exception. All execution and every verdict run in
one scoring process with a time limit per joint action (comlrl/tasks/bfcl/scorer.py); a joint action that
runs past `step_timeout_s` changes nothing (its calls' result reads "execution timed out", the same user
turn is asked again) and scores -error_penalty. A tree turn past the entry's last user turn runs nothing,
scores 0 and reports the entry's final verdict as its pass, so an evaluation chain's last node carries it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from comlrl.errors import ConfigError, require
from comlrl.tasks.base import TaskDefaults
from comlrl.tasks.bfcl import official, prompts
from comlrl.tasks.bfcl.calls import Call, decode
from comlrl.tasks.bfcl.checker import Verdict
from comlrl.tasks.bfcl.data import MULTI_TURN_CATEGORIES, BfclProblem, answer_groups, load_category
from comlrl.tasks.bfcl.environment import (
    MULTI_TURN_CLASSES,
    TIMED_OUT,
    StepOutcome,
    StepRequest,
    TurnState,
    advanced,
    fresh_instances,
    run_step,
    tool_results,
    unchanged,
    warm_up,
)
from comlrl.tasks.bfcl.scorer import Failed, Scorer
from comlrl.tasks.bfcl.task import check_roles_and_weights
from comlrl.tasks.bfcl.turn_reward import BfclTurnReward, call_match, gold_calls, lines
from comlrl.tasks.datasets import DatasetConfig, DatasetError, split_problems
from comlrl.tree.contracts import Continuation, JointTurn, Messages, Task, TaskConfig, Transition


def first_turn_answer(problem: BfclProblem) -> str | None:
    """An entry's first-turn ground truth as a reply in BFCL's call format, or None where it has no calls or
    a call with positional arguments (the reply format takes keyword arguments only)."""
    calls = list(problem.gold[0]) if problem.gold else []
    if not calls:
        return None
    decoded = decode(f"[{', '.join(calls)}]")
    if not decoded.ok or len(decoded.calls) != len(calls) or any(
            len(c.args) != t.count("=") for c, t in zip(decoded.calls, calls, strict=True)):
        return None
    return f"[{', '.join(c.text() for c in decoded.calls)}]"


NO_MORE_REQUESTS = "The user has no further requests. Reply with an empty list: []"


@dataclass
class BfclMultiTurnConfig:
    """Options of task.name=bfcl_multi_turn (docs/bfcl.md)."""

    categories: list[str] = field(default_factory=lambda: ["multi_turn_base"])  # BFCL multi-turn categories
    roles: list[str] = field(default_factory=lambda: ["caller"])  # one per agent (= magrpo.num_agents)
    docs: str = "brief"  # function documents: brief (one line each, first sentence) | compact | json
                         # (BFCL's own, ~7k tokens for two classes)
    examples: bool = True  # a solved first user turn of a training entry with the same classes, before the question
    max_user_turns: int | None = None  # entries with more user turns are left out; null = magrpo.num_turns
    cut_longer: bool = False  # true: entries with more user turns are cut to their first max_user_turns instead
    classes: list[str] | None = None  # keep entries whose involved classes are all listed; null = all
    step_timeout_s: float = 10.0  # per joint action (its calls and the checker); past it: "execution timed out"
    max_turn_calls: int | None = None  # keep entries whose every kept user turn's ground truth has
                                       # at most this many calls
    max_call_args: int | None = None  # keep entries whose every kept ground-truth call has at most this many
                                      # arguments (a curriculum of short calls: ls(), get_stock_info(symbol=...))
    steps_per_turn: int = 20  # replies per user turn: the agent replies again after its calls' results until
                              # a reply makes no call or this many replies (BFCL's MAXIMUM_STEP_LIMIT, 20)
    format_reward: float = 0.1  # BFCL's decoder found a call, on a turn whose ground truth has calls
    lenient_reward: float = 0.0  # the project's lenient decoder found a call (shaping only; never accuracy)
    call_reward: float = 0.3  # x the ground truth calls matched by name and arguments (shaping; see the docstring)
    error_penalty: float = 0.1  # x the share of the turn's calls that failed


class BfclMultiTurnTask(TaskDefaults):
    """BFCL v4 multi-turn categories on the turn tree, judged by BFCL's multi-turn checker (docs/bfcl.md)."""

    needs_sandbox = False  # BFCL's checkers and backends run in the task's own scoring process
    num_agents = 1
    role_names = ["caller"]
    outcome_names = ("decoded", "decoded_lenient", "turn_passed")
    options_type = BfclMultiTurnConfig  # task.bfcl_multi_turn.*
    centralizable = False  # each agent's calls act on the environment in its own order and it reads its own chat

    def __init__(self, options: BfclMultiTurnConfig | None = None, *, scorer: Scorer | None = None) -> None:
        self.cfg = options or BfclMultiTurnConfig()
        self.role_names = list(self.cfg.roles)
        self.num_agents = len(self.role_names)
        self.format_reward = float(self.cfg.format_reward)
        self.lenient_reward = float(self.cfg.lenient_reward)
        self.call_reward = float(self.cfg.call_reward)
        self.error_penalty = float(self.cfg.error_penalty)
        self.reward_range = (-self.error_penalty, 1.0 + self.format_reward + self.lenient_reward + self.call_reward)
        self.scorer = scorer or Scorer(timeout_s=float(self.cfg.step_timeout_s), warm_up=warm_up)
        self._fresh: dict[str, bytes] = {}  # task id -> its instances before any call
        self.examples: list[BfclProblem] = []  # training entries whose first turn can be shown solved (`load`)
        self._seen = {"timeouts": 0, "starts": 0, "deaths": 0}

    @classmethod
    def validate_options(cls, options: BfclMultiTurnConfig) -> None:
        """task.bfcl_multi_turn.*: known categories and classes, a role per agent, a doc style, numbers in range."""
        o = options
        if not o.categories or any(c not in MULTI_TURN_CATEGORIES for c in o.categories):
            raise ConfigError(f"config error: task.bfcl_multi_turn.categories={list(o.categories)!r} is not allowed; "
                              f"expected some of: {', '.join(MULTI_TURN_CATEGORIES)} (single-turn: task.name=bfcl)")
        check_roles_and_weights("task.bfcl_multi_turn", o.roles, {"format_reward": o.format_reward,
                                                        "lenient_reward": o.lenient_reward,
                                                        "call_reward": o.call_reward,
                                                        "error_penalty": o.error_penalty})
        require(o.docs in prompts.DOC_STYLES, "task.bfcl_multi_turn.docs", o.docs, " or ".join(prompts.DOC_STYLES))
        require(isinstance(o.steps_per_turn, int) and o.steps_per_turn >= 1, "task.bfcl_multi_turn.steps_per_turn",
                o.steps_per_turn, "an integer >= 1 (BFCL's loop: 20)")
        require(o.max_user_turns is None or o.max_user_turns >= 1, "task.bfcl_multi_turn.max_user_turns",
                o.max_user_turns, "an integer >= 1 or null (= magrpo.num_turns)")
        require(o.max_turn_calls is None or o.max_turn_calls >= 1, "task.bfcl_multi_turn.max_turn_calls",
                o.max_turn_calls, "an integer >= 1 or null (no limit)")
        require(o.max_call_args is None or o.max_call_args >= 0, "task.bfcl_multi_turn.max_call_args",
                o.max_call_args, "an integer >= 0 or null (no limit)")
        require(o.classes is None or (bool(o.classes) and all(c in MULTI_TURN_CLASSES for c in o.classes)),
                "task.bfcl_multi_turn.classes", o.classes, f"null or some of: {', '.join(MULTI_TURN_CLASSES)}")
        require(math.isfinite(o.step_timeout_s) and o.step_timeout_s > 0, "task.bfcl_multi_turn.step_timeout_s",
                o.step_timeout_s, "a number of seconds > 0")

    @classmethod
    def resolve_options(cls, options: BfclMultiTurnConfig, num_turns: int, model_name: str = "") -> BfclMultiTurnConfig:
        return options if options.max_user_turns is not None else replace(options, max_user_turns=num_turns)

    @classmethod
    def agents_for(cls, task_cfg: TaskConfig) -> int:
        return len((task_cfg.options() or BfclMultiTurnConfig()).roles)

    @classmethod
    def roles_for(cls, task_cfg: TaskConfig) -> list[str]:
        return list((task_cfg.options() or BfclMultiTurnConfig()).roles)

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> BfclMultiTurnTask:
        return cls(task_cfg.options())

    # -- data + prompts ---------------------------------------------------------------------------------

    def keeps(self, problem: BfclProblem) -> bool:
        """The entry fits `max_user_turns` (or is cut to it: `cut_longer`), `classes`, `max_turn_calls` and
        `max_call_args` (judged on the turns kept; a ground-truth string that does not decode as one call is
        longer than any limit)."""
        limit, classes, most = self.cfg.max_user_turns, self.cfg.classes, self.cfg.max_turn_calls
        kept = problem.gold if limit is None else list(problem.gold)[: int(limit)]
        args = self.cfg.max_call_args

        def short(text: str) -> bool:
            calls = gold_calls(text)
            return len(calls) == 1 and len(calls[0].args) <= int(args)  # type: ignore[arg-type]

        return ((limit is None or self.cfg.cut_longer or len(problem.turns) <= int(limit))
                and (classes is None or set(problem.entry["involved_classes"]) <= set(classes))
                and (most is None or all(len(g) <= most for g in kept))
                and (args is None or all(short(text) for g in kept for text in g)))

    def cut(self, problem: BfclProblem) -> BfclProblem:
        """With `cut_longer`, the entry as its first `max_user_turns` user turns and their ground truth: the
        checker judges those turns, as its per-turn verdict does (the entry's id and state are BFCL's)."""
        limit = self.cfg.max_user_turns
        if not self.cfg.cut_longer or limit is None or len(problem.turns) <= limit:
            return problem
        return replace(problem, turns=problem.turns[:limit], gold=list(problem.gold)[:limit])

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[BfclProblem], list[BfclProblem]]:
        """The chosen categories' entries that `keeps`; dataset.eval_size / max_problems / seed split them as
        task.bfcl's (each category on its own; name/path unused)."""
        train: list[BfclProblem] = []
        evals: list[BfclProblem] = []
        categories = list(dict.fromkeys(self.cfg.categories))
        for i, category in enumerate(categories):
            problems = [self.cut(p) for p in load_category(category) if self.keeps(p)]
            if not problems:
                raise DatasetError(f"task.bfcl_multi_turn: no {category} entry has at most {self.cfg.max_user_turns} "
                                   f"user turns, only the classes {self.cfg.classes}, at most "
                                   f"{self.cfg.max_turn_calls} calls a turn and {self.cfg.max_call_args} "
                                   "arguments a call")
            size = (int(dataset_cfg.eval_size) * (i + 1) // len(categories)
                    - int(dataset_cfg.eval_size) * i // len(categories))
            tr, ev = split_problems(problems, size, int(dataset_cfg.seed), answer_groups(problems))  # type: ignore[arg-type]
            train += tr  # type: ignore[arg-type]
            evals += ev  # type: ignore[arg-type]
        if self.cfg.examples:
            self.examples = [p for p in train if first_turn_answer(p) is not None]
        if dataset_cfg.max_problems is not None:
            train = train[: int(dataset_cfg.max_problems)]
        return train, evals

    def example_chat(self, problem: BfclProblem) -> list[dict[str, str]]:
        """A training entry with the same backend classes, its first user turn answered with its ground
        truth's calls (never the entry itself; none when no such entry was loaded)."""
        classes = set(problem.entry["involved_classes"])
        for p in self.examples:
            if p.task_id != problem.task_id and set(p.entry["involved_classes"]) == classes:
                request = "\n\n".join(m["content"] for m in p.turns[0] if m["role"] == "user")
                return [{"role": "user", "content": f"Example request: {request}"},
                        {"role": "assistant", "content": first_turn_answer(p) or ""}]
        return []

    def role_instructions(self, agent: int) -> str:
        if self.num_agents == 1:
            return ""
        return (f"You are the {self.role_names[agent]}, caller {agent + 1} of a team of {self.num_agents}. Every "
                "caller answers each request at the same time; the callers' calls then run in order (caller 1's "
                "first) on the same system, and the next message shows everyone's calls and results. Write the "
                "calls you can contribute; leave out calls a teammate before you is sure to make.")

    def initial_messages(self, problem: BfclProblem) -> list[Messages]:
        """Per agent: BFCL's system prompt with the entry's documents (and its role in a team), then the
        first user turn."""
        out = []
        for a in range(self.num_agents):
            system = prompts.system_prompt(problem.functions, self.cfg.docs)
            role = self.role_instructions(a)
            chat = [dict(m) for m in problem.turns[0]]
            if chat and chat[0]["role"] == "system":
                system = f"{system}\n\n{chat.pop(0)['content']}"
            out.append([{"role": "system", "content": f"{system}\n{role}" if role else system},
                        *self.example_chat(problem), *chat])
        return out

    def answer_prefix(self, agent: int, problem: BfclProblem) -> str:
        """Replies start with the call list's bracket (BFCL's format), so a small model cannot miss it."""
        return "["

    def observation(self, problem: BfclProblem, state: TurnState) -> str:
        """The user message after a joint action: its results as BFCL shows tool results to prompting models
        (a repr of the tool messages); then, where the user turn is finished, the next user turn (the same
        one again after a timeout)."""
        results = tool_results(state, self.role_names)
        parts = [repr(results)] if results else []
        if state.continues_turn:
            return "\n\n".join(parts)
        if state.answered < len(problem.turns):
            parts.append("\n\n".join(m["content"] for m in problem.turns[state.answered]))
        else:
            parts.append(NO_MORE_REQUESTS)
        return "\n\n".join(parts)

    def transition(self, configured: Transition) -> Transition:
        return self  # the environment's results and the next user turn, not the feedback modes

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """Per agent: its first chat, then per turn on the path its own reply and the observation of the
        state that turn's joint action left."""
        out = []
        for c in paths:
            states = [node.next_states[j] for node, j in c.node.path(c.action)]
            chats = self.initial_messages(c.problem)
            for a, chat in enumerate(chats):
                for reply, state in zip(c.history[a], states, strict=True):
                    chat += [{"role": "assistant", "content": reply},
                             {"role": "user", "content": self.observation(c.problem, state)}]
            out.append(chats)
        return out

    # -- states + scoring ----------------------------------------------------------------------------------

    def initial_state(self, problem: BfclProblem) -> TurnState:
        """The entry's backend instances before any call (made once per entry; the bytes are shared, never changed)."""
        if problem.task_id not in self._fresh:
            self._fresh[problem.task_id] = fresh_instances(problem.entry)
        return TurnState(problem.task_id, self._fresh[problem.task_id])

    def score(self, items: list[tuple[Any, list[str]]]) -> list[BfclTurnReward]:
        """First-turn rewards (each from the entry's initial state)."""
        turns = [JointTurn(p, tuple(texts), self.initial_state(p)) for p, texts in items]
        return [reward for reward, _ in self.score_turns(turns)]

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[BfclTurnReward, TurnState]]:
        """(reward, state after) per joint action, each stepped from its node's state in the scoring process
        (one batch for all of them). Each reply is decoded by BFCL's own `decode_execute`: what runs and what
        the checker judges; the lenient decoder feeds only the shaping terms."""
        out: list[Any] = [None] * len(turns)
        jobs = []
        for k, t in enumerate(turns):
            p: BfclProblem = t.problem
            state = t.state if isinstance(t.state, TurnState) else self.initial_state(p)
            if state.answered >= len(p.turns):
                out[k] = (self._after_end(state), state)
                continue
            replies = [official.decode_execute(text) for text in t.texts]
            lenient = [decode(text) for text in t.texts]
            calls = tuple(tuple(Call(name, dict(args)) for item in r.calls for name, args in item.items())
                          for r in replies)
            names = frozenset(f["name"] for f in p.functions)
            req = StepRequest(p.entry, state.instances, names, calls, state.steps,
                              tuple(tuple(g) for g in p.gold[: state.answered + 1]), state.continues_turn)
            jobs.append((k, p, state, replies, lenient, req))
        results = self.scorer.run(run_step, [job[-1] for job in jobs]) if jobs else []
        for (k, p, state, replies, lenient, req), res in zip(jobs, results, strict=True):
            errors = [r.error for r in replies]
            if isinstance(res, Failed):
                why = TIMED_OUT if res.reason == "timeout" else f"scoring failed ({res.reason})"
                new = unchanged(state, req.calls, errors, why)
                out[k] = (self._failed(new, replies, lenient, why), new)
            else:
                new = advanced(state, res, errors, int(self.cfg.steps_per_turn))
                out[k] = (self._reward(p, state.answered, new, res, replies, lenient), new)
        return out

    def _components(self, replies: Sequence[official.Step], lenient: Sequence[Any], user_turn: int) -> dict[str, float]:
        return {"checker": 0.0, "format": 0.0, "lenient": 0.0, "calls_matched": 0.0, "errors_share": 0.0,
                "decoded": float(any(r.called for r in replies)),
                "decoded_lenient": float(any(d.calls for d in lenient)),
                "refused": float(any(r.refused for r in replies)), "calls": 0.0,
                "call_errors": 0.0, "user_turn": float(user_turn), "timed_out": 0.0, "after_end": 0.0}

    def _reward(self, p: BfclProblem, turn: int, st: TurnState, res: StepOutcome, replies: Sequence[official.Step],
                lenient: Sequence[Any]) -> BfclTurnReward:
        """The reward of a reply to user turn `turn` (0-based) that left `st`."""
        comps = self._components(replies, lenient, turn + 1)
        calls = [c for agent in res.results for c in agent]
        errors = sum(failed for _, _, failed in calls)
        comps.update(checker=float(res.verdict.valid), calls=float(len(calls)), call_errors=float(errors),
                     errors_share=errors / len(calls) if calls else 0.0)
        comps["format"] = self.format_reward * float(comps["decoded"] and bool(p.gold[turn]))
        comps["lenient"] = self.lenient_reward * comps["decoded_lenient"]
        comps["calls_matched"] = call_match(p.gold[turn], [c for d in lenient for c in d.calls])
        total = (comps["checker"] + comps["format"] + comps["lenient"] + self.call_reward * comps["calls_matched"]
                 - self.error_penalty * comps["errors_share"])
        where = f"reply {st.in_turn} of user turn {turn + 1}" if st.continues_turn else f"user turn {turn + 1}"
        notes = [f"state {st.key} after {where}"]
        if not res.verdict.valid:
            notes += [f"{res.verdict.error_type}: {e}"[:300] for e in res.verdict.errors[:2]]
        return BfclTurnReward(round(total, 6), comps, res.verdict, res.verdict.valid,
                              tuple(lines(pairs) for pairs in st.last), tuple(notes))

    def _failed(self, st: TurnState, replies: Sequence[official.Step], lenient: Sequence[Any],
                why: str) -> BfclTurnReward:
        comps = self._components(replies, lenient, st.answered + 1)
        calls = sum(len(pairs) for pairs in st.last)
        comps.update(calls=float(calls), call_errors=float(calls), errors_share=1.0, timed_out=float(why == TIMED_OUT))
        verdict = Verdict(False, "multi_turn:execution_timed_out" if why == TIMED_OUT else "multi_turn:scoring_failed",
                          (why,))
        return BfclTurnReward(-self.error_penalty, comps, verdict, False, tuple(lines(pairs) for pairs in st.last),
                              (f"state {st.key} unchanged: {why}",))

    def _after_end(self, st: TurnState) -> BfclTurnReward:
        comps = self._components((), (), st.answered + 1)
        comps.update(after_end=1.0)
        passed = bool(st.verdict and st.verdict.valid)
        return BfclTurnReward(0.0, comps, st.verdict, passed, (), (f"state {st.key}: every user turn answered",))

    # -- reporting -----------------------------------------------------------------------------------------

    def outcome_counts(self, reward: BfclTurnReward) -> dict[str, float]:
        return {"decoded": reward.components["decoded"], "decoded_lenient": reward.components["decoded_lenient"],
                "turn_passed": float(reward.passed)}

    def problem_id(self, problem: BfclProblem) -> str:
        return problem.task_id

    def problem_category(self, problem: BfclProblem) -> str:
        return problem.category

    def reward_inputs(self, problem: BfclProblem) -> tuple[Any, dict[str, Any]]:
        return problem.prompt, {"task_id": problem.task_id, "category": problem.category, "gold": problem.gold}

    def metrics(self) -> dict[str, float]:
        """The scoring process's timeouts, deaths and starts since the last call."""
        now = {"timeouts": self.scorer.timeouts, "starts": self.scorer.starts, "deaths": self.scorer.deaths}
        out = {f"scorer_{k}": float(v - self._seen[k]) for k, v in now.items()}
        self._seen = now
        return out

    def close(self) -> None:
        self.scorer.close()
