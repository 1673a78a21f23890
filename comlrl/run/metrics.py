"""A step's numbers as typed values: sums that add up (over trees, ranks) and the means taken from them.

Every rank builds the same shape of sums whatever its trees hold (a turn without nodes still has its zeros),
so a reduction over ranks adds them position by position (`Sums.reduced`); means are taken once, after it.
Pure: no torch, no models; the reduction itself is passed in (`comlrl.learn.learner.sum_over_ranks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from comlrl.tree.nodes import Node

S = TypeVar("S", bound="Sums")
NAN = float("nan")


class Sums:
    """A dataclass whose fields are numbers, dicts of numbers or lists of `Sums`: `+` adds field by field,
    `flat`/`reduced` turn it into one vector and back, for a reduction over ranks."""

    def _values(self) -> Iterator[tuple[str, Any]]:
        return ((f.name, vars(self)[f.name]) for f in fields(self))  # type: ignore[arg-type]

    def __add__(self: S, other: S) -> S:
        theirs = dict(other._values())
        return replace(self, **{name: _add(mine, theirs[name]) for name, mine in self._values()})  # type: ignore[type-var]

    def flat(self) -> list[float]:
        """Every number, in field order (nested sums and dicts in their own order)."""
        out: list[float] = []
        for _, value in self._values():
            if isinstance(value, Sums):
                out += value.flat()
            elif isinstance(value, list):
                out += [x for item in value for x in item.flat()]
            elif isinstance(value, dict):
                out += [float(v) for v in value.values()]
            else:
                out.append(float(value))
        return out

    def _filled(self: S, numbers: Iterator[float]) -> S:
        new: dict[str, Any] = {}
        for name, value in self._values():
            if isinstance(value, Sums):
                new[name] = value._filled(numbers)
            elif isinstance(value, list):
                new[name] = [item._filled(numbers) for item in value]
            elif isinstance(value, dict):
                new[name] = {k: next(numbers) for k in value}
            else:
                new[name] = next(numbers)
        return replace(self, **new)  # type: ignore[type-var]

    def reduced(self: S, reduce: Callable[[list[float]], list[float]]) -> S:
        """The same sums with every number replaced by `reduce` of the flat vector (a sum over ranks)."""
        return self._filled(iter(reduce(self.flat())))


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, list):
        return [x + y for x, y in zip(a, b, strict=True)]
    if isinstance(a, dict):
        return {k: a[k] + b[k] for k in a}
    return a + b


@dataclass
class TurnSums(Sums):
    """Sums over one turn (1-based position in a list) of a batch of trees."""

    reward: float = 0.0  # immediate rewards of the turn's joint actions
    joint_actions: float = 0.0
    passed: float = 0.0  # joint actions whose reward says every test / check passed
    counts: dict[str, float] = field(default_factory=dict)  # the task's `count_names`: outcomes, reward terms
    reported: dict[str, float] = field(default_factory=dict)  # per count name, the joint actions that reported it
    nodes: float = 0.0
    pruned: float = 0.0  # nodes stopped by the early-termination threshold


def turn_sums(roots: Iterable[Node], num_turns: int, count_names: Sequence[str] = (),
              counts: Callable[[Any], dict[str, float]] | None = None) -> list[TurnSums]:
    """Per-turn sums of a batch of trees; `counts(detail)` gives a scored joint action's `count_names` values
    (`Task.counts`). Every turn has every name, so ranks can add their sums."""
    turns = [TurnSums(counts=dict.fromkeys(count_names, 0.0), reported=dict.fromkeys(count_names, 0.0))
             for _ in range(num_turns)]
    for root in roots:
        for node in root.walk():
            t = turns[node.turn - 1]
            t.reward += sum(node.rewards)
            t.joint_actions += len(node.rewards)
            t.passed += sum(bool(d.all_passed) for d in node.details)
            t.nodes += 1
            t.pruned += int(node.terminated)
            for d in node.details if counts is not None else ():
                for name, value in counts(d).items():
                    t.counts[name] += float(value)
                    t.reported[name] += 1.0
    return turns


def _ratio(num: float, den: float) -> float:
    return num / den if den else NAN


def turn_means(turns: Sequence[TurnSums], prefix: str = "", passed: str = "pass_rate") -> dict[str, float]:
    """`<prefix>turn_<t>/reward_mean`, `/<passed>` and each count as a rate per joint action that reported it
    (every joint action for most tasks; a game reports its result on the round that ended it, so its rates are
    per game), then the same over all turns (`<prefix>reward_mean`, `<prefix><count>`)."""
    out: dict[str, float] = {}
    total_reward = total_n = 0.0
    overall: dict[str, float] = {}
    seen: dict[str, float] = {}
    for t, turn in enumerate(turns, start=1):
        n = turn.joint_actions
        total_reward += turn.reward
        total_n += n
        out[f"{prefix}turn_{t}/reward_mean"] = _ratio(turn.reward, n)
        out[f"{prefix}turn_{t}/{passed}"] = _ratio(turn.passed, n)
        for name, value in turn.counts.items():
            reported = turn.reported.get(name, n)
            out[f"{prefix}turn_{t}/{name}"] = _ratio(value, reported)
            overall[name] = overall.get(name, 0.0) + value
            seen[name] = seen.get(name, 0.0) + reported
    out[f"{prefix}reward_mean"] = _ratio(total_reward, total_n)
    out.update({f"{prefix}{name}": _ratio(value, seen[name]) for name, value in overall.items()})
    return out


@dataclass
class StepSums(Sums):
    """Everything a training step adds up over its trees and ranks."""

    turns: list[TurnSums]
    trees: float = 0.0
    leaves: float = 0.0  # joint actions without a child: where returns start
    return_sum: float = 0.0  # over trees, of the root's mean return
    gen_tokens: float = 0.0
    gen_seconds: float = 0.0
    score_seconds: float = 0.0
    feedback_seconds: float = 0.0
    adv_groups: float = 0.0
    adv_groups_skipped: float = 0.0  # sibling groups without signal (all returns tied)
    samples: float = 0.0  # completions the update trained on
    loss: float = 0.0
    engine_abs_gap: float = 0.0  # token sums of |log p engine - log p trainer| (comlrl.learn.loss.logprob_gap)
    engine_kl: float = 0.0
    engine_tokens: float = 0.0
    vs_start: float = 0.0  # over trees with a start reward: turn-1 reward minus the untrained policy's
    vs_start_trees: float = 0.0
    draws: DrawSums = field(default_factory=lambda: DrawSums())
    algorithm: dict[str, float] = field(default_factory=dict)  # the algorithm's metrics: `<name>`, `<name>/n`

    def means(self, world: int) -> dict[str, float]:
        """metrics.jsonl's numbers of the step (after the reduction over `world` ranks)."""
        turns = self.turns
        out = turn_means(turns)
        for t, turn in enumerate(turns, start=1):
            out[f"turn_{t}/nodes"] = int(turn.nodes)
            out[f"turn_{t}/pruned"] = _ratio(turn.pruned, turn.joint_actions)  # pruned nodes per joint action
        nodes, pruned = sum(t.nodes for t in turns), sum(t.pruned for t in turns)
        out["nodes"], out["pruned"] = int(nodes), int(pruned)
        out["return_mean"] = self.return_sum / max(1.0, self.trees)
        if self.vs_start_trees:
            out["reward_vs_start"] = self.vs_start / self.vs_start_trees
        out.update(leaves=int(self.leaves), joint_actions=int(sum(t.joint_actions for t in turns)),
                   gen_tokens=int(self.gen_tokens), adv_groups=int(self.adv_groups),
                   adv_groups_skipped=int(self.adv_groups_skipped), samples=int(self.samples), trees=int(self.trees))
        for t, turn in enumerate(turns, start=1):
            out[f"turn_{t}/pruned_frac"] = _ratio(turn.pruned, turn.nodes)
        out["pruned_frac"] = pruned / max(1.0, nodes)
        out["loss"] = self.loss / world
        if self.engine_tokens:  # the rollout engine's log-probs against the trainer's, per token
            out["rollout/logprob_abs_gap"] = self.engine_abs_gap / self.engine_tokens
            out["rollout/kl_engine_train"] = self.engine_kl / self.engine_tokens
        out.update({name: _ratio(total, self.algorithm[f"{name}/n"]) for name, total in self.algorithm.items()
                    if not name.endswith("/n")})
        out.update(self.draws.means())
        out["gen_seconds"] = self.gen_seconds / world
        out["score_seconds"] = self.score_seconds / world
        out["feedback_seconds"] = self.feedback_seconds / world
        out["tokens_per_s"] = self.gen_tokens / max(1e-9, self.gen_seconds / world)
        return out


@dataclass
class DrawSums(Sums):
    """What the step's sampling bought: completions generated against those in a sibling group with signal."""

    generated: float = 0.0  # completions sampled
    groups: float = 0.0  # sibling groups given advantages (none under madpo and marlhf's heads: they train pairs)
    with_signal: float = 0.0  # completions in an advantage group that trains (not tied)

    @staticmethod
    def of(roots: Iterable[Node]) -> DrawSums:
        """Counted on the trees after the advantages were assigned (a node without them counts no signal)."""
        out = DrawSums()
        for root in roots:
            for node in root.walk():
                size = sum(len(row) for row in node.completions)
                out.generated += size
                out.groups += len(node.advantages)
                out.with_signal += sum(len(adv) for adv in node.advantages if adv is not None)
        return out

    def means(self) -> dict[str, float]:
        """`signal_share` and `completions_generated` (its denominator: a run's share is weighted by it) on steps
        that assign advantages."""
        out: dict[str, float] = {}
        if self.groups and self.generated:
            out.update(signal_share=self.with_signal / self.generated, completions_generated=int(self.generated))
        return out


def leaves(roots: Iterable[Node]) -> int:
    """Joint actions without a child node (where the returns start), over the trees."""
    return sum(1 for root in roots for node in root.walk() for j in range(len(node.rewards)) if j not in node.children)


def mean_root_returns(roots: Iterable[Node]) -> float:
    """Sum over trees of the mean return of the root's joint actions."""
    return sum(sum(r.returns) / len(r.returns) for r in roots)
