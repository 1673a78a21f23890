"""Preference rounds on the tree (madpo, marlhf): each step labels its pairs, keeps them, and trains on them with
the earlier rounds' pairs its replay mode draws.

A step is a round of CoMLRL's iterative trainers: the rollout samples with the current policy; the comparator
(`comlrl.run.comparators`; the task's returns by default) labels pairs of siblings (madpo: one agent's
completions; marlhf: a node's joint actions); the pairs go to the run folder's pairs.jsonl, one line per
agent in the export's preference format (`comlrl-export --pairs`; `algorithm.dpo.offline_pairs` reads it
back) with `meta.step` its round; and the update trains on them together with the earlier rounds' pairs that
`comlrl.learn.replay` draws (re-tokenized from their text). Every rank holds every round's pairs (gathered
each step, read back on resume), draws the same replay and trains its share of it. With
`algorithm.marlhf.pairs_file` the reward heads learn from the file's joint pairs instead of the tree's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelerate.utils import gather_object

from comlrl.learn.advantages import AdvantageStats
from comlrl.learn.algorithms import madpo_pairs, pair_units
from comlrl.learn.marlhf import MarlhfConfig
from comlrl.learn.preference import Pair
from comlrl.learn.preference_file import PairRecord, joint_pairs, read_pairs, step_slice
from comlrl.learn.replay import PreferenceRounds, replay_draw, replay_quota, round_weights
from comlrl.learn.units import Unit
from comlrl.learn.update import UpdateStats, any_sample, train_units
from comlrl.run.comparators import Comparator, JudgeItem, make_comparator
from comlrl.run.outputs import OUTPUTS
from comlrl.tree.nodes import Node

if TYPE_CHECKING:
    from comlrl.config.schema import RunConfig
    from comlrl.learn.learner import Learner
    from comlrl.learn.units import Algorithm

PAIRS_FILE = OUTPUTS["pairs"]
Item = list[dict[str, Any]]  # one pair: madpo's one line, marlhf's one line per agent of the joint pair


@dataclass(frozen=True)
class RoundPair:
    """At `node`, completion (agent) or joint action (`agent` None) `winner` preferred over `loser`."""

    node: Node
    agent: int | None
    winner: int
    loser: int


def question(node: Node, agent: int) -> str:
    """What a judge is shown as the task: the agent's last user message at the node."""
    users = [m["content"] for m in node.messages[agent] if m.get("role") == "user"]
    return users[-1] if users else str(node.messages[agent][-1].get("content", ""))


def joint_text(node: Node, j: int) -> str:
    """A joint action as one answer: every agent's completion under its name."""
    return "\n\n".join(f"[agent {a}]\n{node.completions[a][k].text}" for a, k in enumerate(node.joint[j]))


def candidates(texts: Sequence[str], limit: int | None, rng: random.Random) -> list[tuple[int, int]]:
    """Pairs (i < j) of different texts to judge, in a seeded random order, at most `limit` (None: all)."""
    seen: dict[str, int] = {}
    for i, t in enumerate(texts):
        seen.setdefault(t, i)
    distinct = sorted(seen.values())
    pairs = [(i, j) for n, i in enumerate(distinct) for j in distinct[n + 1:]]
    rng.shuffle(pairs)
    return pairs if limit is None else pairs[:limit]


def pair_records(pairs: Sequence[RoundPair], step: int, rank: int, comparator: str) -> list[Item]:
    """Each pair as the lines pairs.jsonl keeps (the export's preference format, `meta.step` its round)."""
    out: list[Item] = []
    for p in pairs:
        node = p.node
        if p.agent is not None:
            sides = [(p.agent, p.winner, p.loser)]
        else:
            sides = [(a, node.joint[p.winner][a], node.joint[p.loser][a]) for a in range(len(node.completions))]
        out.append([{"prompt": node.messages[a],
                     "chosen": [{"role": "assistant", "content": node.completions[a][w].text}],
                     "rejected": [{"role": "assistant", "content": node.completions[a][lo].text}],
                     "meta": {"step": step, "rank": rank, "node": node.id, "turn": node.turn, "agent": a,
                              "joint": p.agent is None, "chosen_index": p.winner, "rejected_index": p.loser,
                              "comparator": comparator}}
                    for a, w, lo in sides])
    return out


def read_rounds(path: Path, upto: int) -> dict[int, list[Item]]:
    """The pairs of rounds <= `upto` in a run's pairs.jsonl, grouped back into pairs (a cut last line is
    skipped: a crash mid-write)."""
    rounds: dict[int, list[Item]] = {}
    if not path.is_file():
        return rounds
    last: dict[tuple, Item] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        meta = rec.get("meta", {})
        r = int(meta.get("step", 0))
        if not 0 < r <= upto:
            continue
        key = (r, meta.get("rank"), meta.get("node"), meta.get("chosen_index"), meta.get("rejected_index"))
        if meta.get("joint") and key in last:
            last[key].append(rec)
            continue
        item = [rec]
        last[key] = item
        rounds.setdefault(r, []).append(item)
    return rounds


@dataclass
class PairRounds:
    """The run's preference rounds: its comparator, its replay and every round's pairs so far."""

    cfg: RunConfig
    algorithm: Algorithm
    options: PreferenceRounds
    comparator: Comparator | None  # None: the task's returns label the pairs
    out_dir: Path
    rounds: dict[int, list[Item]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    # algorithm.marlhf.pairs_file's joint pairs: the heads learn from them (a slice per step) instead of the tree's
    file_pairs: list[list[PairRecord]] = field(default_factory=list)

    @property
    def joint(self) -> bool:
        return self.algorithm.preference == "joint"

    def resume(self, step: int) -> None:
        """Every round up to `step` back from pairs.jsonl (the writer drops later lines on rank 0)."""
        self.rounds = read_rounds(self.out_dir / PAIRS_FILE, step)

    def train(self, learner: Learner, roots: list[Node], step: int) -> UpdateStats:
        """Label this round's pairs, keep them, and one update on them and the replayed earlier ones."""
        acc, algo, cfg = learner.accelerator, self.algorithm, self.cfg
        values = (learner.action_values if algo.per_action_values else learner.state_values) if algo.critic else None
        # marlhf's node units (advantages of the learned reward); madpo's are its pairs, made below
        units, groups = algo.units(roots, cfg, values) if self.joint else ([], AdvantageStats())
        if self.file_pairs:  # the heads learn from the file: the tree's siblings pair up for nothing
            units = [replace(u, pairs=()) for u in units]
        pairs = self.label(roots, units) if not self.file_pairs else []
        if self.joint:  # the node units carry their judged pairs (the task's are already there)
            by_node: dict[str, list[tuple[int, int]]] = {}
            for p in pairs:
                by_node.setdefault(p.node.id, []).append((p.winner, p.loser))
            nodes = [n for root in roots for n in root.walk()]
            units = [replace(u, pairs=tuple(by_node.get(n.id, ()))) for u, n in zip(units, nodes, strict=True)]
        else:
            units, groups = pair_units(roots, [Pair(p.node, p.agent, p.winner, p.loser, 0.0) for p in pairs])
        name = self.comparator.name if self.comparator is not None else "task"
        mine = pair_records(pairs, step + 1, acc.process_index, name)
        everyone = gather_object(mine) if acc.num_processes > 1 else mine
        replayed = self.replay(step + 1, len(everyone))
        self.rounds[step + 1] = everyone
        if acc.is_main_process:
            with (self.out_dir / PAIRS_FILE).open("a", encoding="utf-8") as f:
                f.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for item in everyone for rec in item)
        extra = [self.pair_unit(learner, records(item), seen=True)
                 for item in replayed[acc.process_index::acc.num_processes]]
        from_file = [self.file_pairs[i] for i in step_slice(len(self.file_pairs), cfg.training.steps, step,
                                                            cfg.training.seed)] if self.file_pairs else []
        extra += [self.pair_unit(learner, p) for p in from_file[acc.process_index::acc.num_processes]]
        spare = units[0].samples[0] if units else any_sample(roots)
        update = train_units(learner, algo, cfg, units + extra, groups, spare)
        # summed over the ranks, then divided by the "/n" sum (1: rank 0's): every rank knows the round's totals,
        # counted once; each rank's own judge counters, added up
        rank0 = float(acc.is_main_process)
        totals = {"pairs/labeled": len(everyone), "pairs/replayed": len(replayed), "pairs/from_file": len(from_file),
                  "pairs/rounds_replayed": len({item[0]["meta"]["step"] for item in replayed})}
        own = {f"comparator/{k}": v for k, v in self.counters.items()}
        self.counters = {"asked": 0.0, "undecided": 0.0} if self.comparator is not None else {}
        metrics = dict(update.metrics)
        for k, v in totals.items():
            metrics[k], metrics[f"{k}/n"] = float(v) * rank0, rank0
        for k, v in own.items():
            metrics[k], metrics[f"{k}/n"] = float(v), rank0
        return replace(update, metrics=metrics)

    def label(self, roots: list[Node], units: list[Unit]) -> list[RoundPair]:
        """This rank's pairs of the step: the task's selection, or the comparator's verdicts on candidates."""
        cfg = self.cfg
        nodes = [n for root in roots for n in root.walk()]
        if self.comparator is None:
            if self.joint:
                return [RoundPair(n, None, w, lo) for n, u in zip(nodes, units, strict=True) for w, lo in u.pairs]
            return [RoundPair(p.node, p.agent, p.winner, p.loser) for p in madpo_pairs(roots, cfg)]
        import torch

        rng = random.Random(torch.initial_seed())  # seeded per step and rank by the trainer
        asked: list[tuple[Node, int | None, int, int]] = []
        items: list[JudgeItem] = []
        for node in nodes:
            if self.joint:
                texts = [joint_text(node, j) for j in range(len(node.joint))]
                for i, j in candidates(texts, self.options.pairs_per_node, rng):
                    asked.append((node, None, i, j))
                    items.append(JudgeItem(0, question(node, 0), texts[i], texts[j]))
                continue
            for a, row in enumerate(node.completions):
                for i, j in candidates([s.text for s in row], self.options.pairs_per_node, rng):
                    asked.append((node, a, i, j))
                    items.append(JudgeItem(a, question(node, a), row[i].text, row[j].text))
        verdicts = self.comparator.prefer(items)
        self.counters["asked"] = self.counters.get("asked", 0.0) + len(items)
        self.counters["undecided"] = self.counters.get("undecided", 0.0) + sum(v is None for v in verdicts)
        return [RoundPair(node, a, i, j) if v > 0 else RoundPair(node, a, j, i)
                for (node, a, i, j), v in zip(asked, verdicts, strict=True) if v is not None]

    def replay(self, current: int, own: int) -> list[Item]:
        """The earlier rounds' pairs this round replays: the same draw on every rank (seeded by the round)."""
        o = self.options
        weights = round_weights(o.replay, list(self.rounds), current, o.replay_k, o.replay_lambda)
        counts = {r: len(self.rounds[r]) for r in weights}
        newest = next((counts[r] for r in sorted(counts, reverse=True) if counts[r]), 0)
        size = o.replay_size if o.replay_size is not None else (own or newest)
        quota = replay_quota(counts, weights, size)
        draw = replay_draw(quota, counts, random.Random(self.cfg.training.seed * 1_000_003 + current))
        return [self.rounds[r][i] for r, i in draw]

    def pair_unit(self, learner: Learner, pair: list[PairRecord], seen: bool = False) -> Unit:
        """A written pair as a unit, re-tokenized: madpo's (chosen, rejected); marlhf's joint pair (a line per
        agent it holds) as a unit of no advantages whose chosen joint action is 0 and rejected 1: it trains the
        reward heads only. `seen`: replayed from an earlier round (the heads trained on it then)."""
        pol = learner.policies
        samples = []
        for r in sorted(pair, key=lambda r: r.agent):
            samples += [pol.sample_of(r.agent, r.prompt, r.chosen), pol.sample_of(r.agent, r.prompt, r.rejected)]
        return Unit(tuple(samples), pairs=((0, 1),) if self.joint else (), seen=seen)


def records(item: Item) -> list[PairRecord]:
    """A kept pair's lines (pairs.jsonl, as written) as records."""
    return [PairRecord(int(rec["meta"]["agent"]), rec["prompt"], rec["chosen"][-1]["content"],
                       rec["rejected"][-1]["content"]) for rec in item]


def build_rounds(cfg: RunConfig, algorithm: Algorithm, learner: Learner | None) -> PairRounds | None:
    """The run's preference rounds (None unless the algorithm learns from pairs), its comparator built at
    start-up (a bad spec or a missing key fails there, in one line). Earlier rounds come back with `resume`."""
    from comlrl.models import resolve_model_path

    if algorithm.preference is None or algorithm.options is None or learner is None:
        return None
    key, _ = algorithm.options
    options = getattr(cfg.algorithm, key)
    if not isinstance(options, PreferenceRounds):
        return None
    comparator = make_comparator(options.comparator, learner, f"algorithm.{key}.comparator",
                                 lambda name: str(resolve_model_path(name)))
    file_pairs = []
    if isinstance(options, MarlhfConfig) and options.pairs_file:
        file_pairs = joint_pairs(read_pairs(options.pairs_file, cfg.magrpo.num_agents, "algorithm.marlhf.pairs_file"))
    return PairRounds(cfg, algorithm, options, comparator, Path(cfg.training.output_dir), file_pairs=file_pairs)
