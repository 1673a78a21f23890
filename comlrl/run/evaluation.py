"""Evaluation with statistical power: every problem scored on its own, before and after, from one seed.

Each evaluation runs, per problem, one greedy chain and `evaluation.samples` chains sampled at the
training temperature (a chain is one joint action per turn for `num_turns` turns, no early stop; the k
sampled chains are one tree with k samples at turn 1 and one after), on two sets, both in one greedy and
one sampled rollout (so a turn is one engine call per agent, whatever the sets):

- `heldout`: the held-out split (`eval/...` keys; greedy keeps its historical names `eval/pass_at_1`);
- `probe`: the first distinct training problems the run's steps draw (`eval/probe/...`), so the untrained
  policy is scored on exactly the problems it will train on.

Sampling starts from `evaluation.seed` every time, so the same weights give the same draws and before and
after differ only by the policy. Per-problem scores go to eval.jsonl; at every evaluation after the
first, each set's paired difference to the first one (`..._delta`, `..._delta_lo`, `..._delta_hi`: the
95% paired t interval over problems; for the probe's sampled figures, over the chains with the problems
fixed: comlrl/run/paired.py) goes to metrics.jsonl and TensorBoard.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from accelerate.utils import gather_object

from comlrl.learn.learner import sum_over_ranks
from comlrl.run.components import Components
from comlrl.run.metrics import Sums, TurnSums, turn_means, turn_sums
from comlrl.run.paired import record_difference
from comlrl.run.problem_draw import probe_indices
from comlrl.tree.contracts import Transcribed
from comlrl.tree.nodes import Node
from comlrl.tree.rollout import TreeShape

SETS = ("heldout", "probe")
PREFIX = {"heldout": "eval/", "probe": "eval/probe/"}
# per-problem score -> the metric whose paired difference is logged (greedy keeps its historical name)
PAIRED = {"sampled_pass": "sampled/pass_at_1", "sampled_reward": "sampled/reward_mean", "greedy_pass": "pass_at_1"}


@dataclass
class SetSums(Sums):
    """One evaluation set's per-turn sums: its greedy chains and its sampled chains."""

    greedy: list[TurnSums]
    sampled: list[TurnSums]


@dataclass(frozen=True)
class ProblemScore:
    """One problem's scores in one evaluation (None where that kind of chain was not run)."""

    set: str
    index: int  # position in its set: the pairing key (a run's split and probe are deterministic)
    task_id: str
    category: str = ""  # the task's category of the problem (a benchmark's, e.g. BFCL's); "" for none
    greedy_pass: float | None = None  # 1.0 / 0.0: the greedy chain passed after the last turn
    greedy_reward: float | None = None  # mean reward over the greedy chain's turns
    sampled_pass: float | None = None  # share of the sampled chains that passed after the last turn
    sampled_reward: float | None = None  # mean over the sampled chains of their mean reward per turn
    first_turn_reward: float | None = None  # mean turn-1 reward of the sampled chains (training's turn 1)
    chain_passes: list[float] = field(default_factory=list)  # per sampled chain (the probe's interval)
    chain_rewards: list[float] = field(default_factory=list)
    samples: int = 0
    outcomes: dict[str, float] = field(default_factory=dict)  # the task's outcome rates over sampled chains

    def record(self, step: int) -> dict[str, Any]:
        return {"step": step, **asdict(self)}


def chains(root: Node) -> list[list[tuple[Node, int]]]:
    """The chains of an evaluation tree (align, k samples at turn 1, one after): per turn-1 joint action j,
    the (node, joint action) of each turn."""
    out = []
    for j in range(len(root.rewards)):
        chain, node = [(root, j)], root.children.get(j)
        while node is not None:
            chain.append((node, 0))
            node = node.children.get(0)
        out.append(chain)
    return out


def chain_stats(root: Node, outcome: Any) -> tuple[list[float], list[float], float, dict[str, float]]:
    """Per chain: passed after the last turn (1/0) and mean reward per turn; then the mean turn-1 reward and
    the outcome rates over the chains' joint actions that report them (every joint action, for most tasks; a
    game reports its result on its last round only, so its rates are per game)."""
    cs = chains(root)
    passed = [float(bool(c[-1][0].details[c[-1][1]].all_passed)) for c in cs]
    reward = [statistics.fmean(n.rewards[a] for n, a in c) for c in cs]
    first = statistics.fmean(c[0][0].rewards[c[0][1]] for c in cs)
    rates: dict[str, float] = {}
    counts: dict[str, int] = {}
    for c in cs:
        for n, a in c:
            for name, value in outcome(n.details[a]).items():
                rates[name] = rates.get(name, 0.0) + float(value)
                counts[name] = counts.get(name, 0) + 1
    return passed, reward, first, {k: v / counts[k] for k, v in rates.items()}


class Evaluator:
    """Runs the run's evaluations and keeps the first one's per-problem scores for the paired differences."""

    def __init__(self, comp: Components) -> None:
        self.c = comp
        cfg = comp.cfg
        t, e = cfg.training, cfg.evaluation
        heldout = comp.eval[: t.eval_size] if t.eval_size else list(comp.eval)
        world = comp.accelerator.num_processes
        probe = [comp.train[i] for i in probe_indices(len(comp.train), t.steps, t.trees_per_step, world, t.seed,
                                                       e.probe_problems)] if comp.train else []
        self.sets: dict[str, list[Any]] = {"heldout": heldout, "probe": probe}
        if comp.atropos is not None:  # the run trains on Atropos environments, which evaluate themselves
            self.sets = {"heldout": [], "probe": []}
        self.samples: int = e.samples  # sampled chains per problem, every set
        self.greedy: bool = e.greedy
        self.baseline: dict[str, dict[int, ProblemScore]] = {}
        self.episodes: list[str] = []  # the last evaluation's greedy episodes as text, where rewards carry them

    @property
    def enabled(self) -> bool:
        return any(self.sets.values())

    def start_rewards(self) -> dict[str, float]:
        """The untrained policy's sampled turn-1 reward per probe problem label (empty before the first
        evaluation): what each step's training reward on the same problems is compared with."""
        return {s.task_id: s.first_turn_reward for s in self.baseline.get("probe", {}).values()
                if s.first_turn_reward is not None}

    def restore(self, records: list[dict[str, Any]]) -> None:
        """On resume: the first evaluation's per-problem scores, read back from eval.jsonl."""
        first = min((r["step"] for r in records), default=None)
        for r in records:
            if r["step"] == first:
                score = ProblemScore(**{k: v for k, v in r.items() if k != "step"})
                self.baseline.setdefault(score.set, {})[score.index] = score

    def _rollout(self, problems: list[Any], greedy: bool) -> list[Node]:
        """One rollout over every set's problems, so each turn is one engine call per agent."""
        m = self.c.cfg.magrpo
        if greedy:
            shape = TreeShape(m.num_agents, 1, m.num_turns, "align", None)
            return self.c.rollout(problems, greedy=True, label="evaluation (greedy)").run(shape, tag="eval.g.")
        torch.manual_seed(self.c.cfg.evaluation.seed + 7919 * self.c.accelerator.process_index)
        # k samples of each turn-1 prompt, then one per chain: k chains per problem sharing their first prompt
        shape = TreeShape(m.num_agents, self.samples, m.num_turns, "align", None, later_generations=1)
        return self.c.rollout(problems, label="evaluation (sampled)").run(shape, tag="eval.s.")

    def _turn_sums(self, roots: list[Node]) -> list[TurnSums]:
        task = self.c.task
        return turn_sums(roots, self.c.cfg.magrpo.num_turns, task.count_names, task.counts)

    def _score_sets(self, names: list[str]) -> tuple[dict[str, SetSums], dict[str, list[ProblemScore]]]:
        """This rank's share of every set: summed turn metrics (greedy and sampled) and per-problem scores."""
        acc, task = self.c.accelerator, self.c.task
        mine = [(name, i) for name in names
                for i in range(len(self.sets[name]))[acc.process_index :: acc.num_processes]]
        problems = [self.sets[name][i] for name, i in mine]
        sums = {name: SetSums(self._turn_sums([]), self._turn_sums([])) for name in names}
        scores = [dict(set=name, index=i, task_id=task.problem_label(self.sets[name][i], i),
                       category=task.problem_category(self.sets[name][i]), samples=self.samples) for name, i in mine]
        for kind, wanted in (("g", self.greedy), ("s", self.samples > 0)):
            if not (mine and wanted):
                continue
            roots = self._rollout(problems, greedy=kind == "g")
            for name in names:
                own = self._turn_sums([root for root, (n, _) in zip(roots, mine, strict=True) if n == name])
                if kind == "g":
                    sums[name].greedy = own
                else:
                    sums[name].sampled = own
            if kind == "g":
                self.episodes = interleaved([(score["category"], e) for score, root in zip(scores, roots, strict=True)
                                             if (e := episode_text(root, score["task_id"], score["category"]))])
            for score, root in zip(scores, roots, strict=True):
                passed, reward, first, rates = chain_stats(root, task.counts)
                if kind == "g":
                    score.update(greedy_pass=passed[0], greedy_reward=reward[0])
                else:
                    score.update(sampled_pass=statistics.fmean(passed), sampled_reward=statistics.fmean(reward),
                                 chain_passes=passed, chain_rewards=reward, first_turn_reward=first, outcomes=rates)
        by_set: dict[str, list[ProblemScore]] = {name: [] for name in names}
        for score in scores:
            by_set[score["set"]].append(ProblemScore(**score))
        return sums, by_set

    def run(self, step: int) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """Metrics (`eval/...`) and per-problem records (eval.jsonl) of one evaluation, on every rank."""
        t0 = time.perf_counter()
        acc, num_turns = self.c.accelerator, self.c.cfg.magrpo.num_turns
        metrics: dict[str, float] = {}
        records: list[dict[str, Any]] = []
        names = [name for name in SETS if self.sets[name]]
        all_sums, all_mine = self._score_sets(names)
        for name in names:
            total = all_sums[name].reduced(lambda values: sum_over_ranks(acc, values))
            mine = all_mine[name]
            scores = [s for part in gather_object([mine]) for s in part] if acc.num_processes > 1 else mine
            scores.sort(key=lambda s: s.index)
            metrics.update(self._set_metrics(name, total, scores, num_turns))
            metrics.update(category_metrics(PREFIX[name], scores))
            metrics.update(self._paired(name, scores, step))
            records += [s.record(step) for s in scores]
            if step == 0 or name not in self.baseline:
                self.baseline[name] = {s.index: s for s in scores}
        metrics["eval/seconds"] = time.perf_counter() - t0
        return metrics, records

    def _set_metrics(self, name: str, total: SetSums, scores: list[ProblemScore], num_turns: int
                     ) -> dict[str, float]:
        """The set's per-turn means, its pass@1 (the share of chains that passed after their last turn, which is
        turn `num_turns` unless the episode ended before it) and the outcome rates per problem, averaged."""
        prefix, out = PREFIX[name], {}
        kinds = ((total.greedy, "", self.greedy, [s.greedy_pass for s in scores]),
                 (total.sampled, "sampled/", self.samples > 0, [s.sampled_pass for s in scores]))
        for turns, sub, ran, passes in kinds:
            if not ran:
                continue
            out.update(turn_means(turns, prefix=prefix + sub, passed="pass_at_1"))
            values = [v for v in passes if v is not None]
            out[f"{prefix}{sub}pass_at_1"] = statistics.fmean(values) if values else float("nan")
        names = sorted({k for s in scores for k in s.outcomes})
        for outcome in names:  # per problem, over its sampled chains: a game's win / draw / loss / invalid rates
            own = [s.outcomes[outcome] for s in scores if outcome in s.outcomes]
            out[f"{prefix}sampled/{outcome}_rate"] = statistics.fmean(own)
        out[f"{prefix}problems"] = len(scores)
        if self.samples:
            out[f"{prefix}sampled/samples"] = self.samples
        return out

    def _paired(self, name: str, scores: list[ProblemScore], step: int) -> dict[str, float]:
        """Paired differences to the first evaluation of this set (nothing at the first one)."""
        base = self.baseline.get(name)
        if step == 0 or not base:
            return {}
        out: dict[str, float] = {}
        first = {str(i): asdict(s) for i, s in base.items()}
        now = {str(s.index): asdict(s) for s in scores}
        groups, categories = {"": set(now)}, by_category(scores)
        if len(categories) > 1:  # one category: its figures are the set's
            groups.update({f"category/{c}/": {str(s.index) for s in own} for c, own in categories.items()})
        for group, keys in groups.items():
            before = {k: v for k, v in first.items() if k in keys}
            pairs = [(key, attr, lambda r, attr=attr: r[attr]) for attr, key in PAIRED.items()]
            pairs += [(f"sampled/{o}_rate", "", lambda r, o=o: r["outcomes"].get(o))
                      for o in sorted({o for k in keys for o in now[k]["outcomes"]})]
            for key, attr, value in pairs:
                d = record_difference(before, now, value, attr, fixed=name == "probe")
                if d is None:
                    continue
                stem = f"{PREFIX[name]}{group}{key}"
                out[f"{stem}_delta"] = d.delta
                if d.has_interval:  # one problem: the difference, no interval
                    out.update({f"{stem}_delta_lo": d.lo, f"{stem}_delta_hi": d.hi})
        return out


def episode_text(root: Node, label: str, category: str) -> str:
    """The greedy chain's episode as text (its last reward's transcript, result and notes); "" where the task's
    rewards carry no transcript."""
    node, action = chains(root)[0][-1]
    detail = node.details[action]
    if not isinstance(detail, Transcribed):
        return ""
    head = f"== {label}" + (f" ({category})" if category else "")
    result = f"result: reward {node.rewards[action]:+.2f}" + ("".join(f"; {n}" for n in detail.notes))
    return "\n".join([head, *detail.transcript, result, ""])


def interleaved(items: list[tuple[str, str]]) -> list[str]:
    """The texts of (category, text) items taken in turn from each category, so the first few show them all."""
    groups: dict[str, list[str]] = {}
    for category, text in items:
        groups.setdefault(category, []).append(text)
    out, rows = [], list(groups.values())
    for i in range(max((len(r) for r in rows), default=0)):
        out += [r[i] for r in rows if i < len(r)]
    return out


def by_category(scores: list[ProblemScore]) -> dict[str, list[ProblemScore]]:
    """The scores of each named category, in first-seen order (none when the task names no categories)."""
    out: dict[str, list[ProblemScore]] = {}
    for s in scores:
        if s.category:
            out.setdefault(s.category, []).append(s)
    return out


def category_metrics(prefix: str, scores: list[ProblemScore]) -> dict[str, float]:
    """Per category, its share of problems whose greedy chain passed and its mean sampled pass rate (BFCL's
    accuracy per category, counted as the benchmark counts it: passed entries over entries), and its size."""
    out: dict[str, float] = {}
    for category, own in by_category(scores).items():
        stem = f"{prefix}category/{category}/"
        out[f"{stem}problems"] = len(own)
        for key, values in (("pass_at_1", [s.greedy_pass for s in own]),
                            ("sampled/pass_at_1", [s.sampled_pass for s in own])):
            known = [v for v in values if v is not None]
            if known:
                out[stem + key] = statistics.fmean(known)
    return out
