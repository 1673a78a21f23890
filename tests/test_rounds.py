"""Preference rounds' bookkeeping (comlrl.run.rounds), without a model: which sibling pairs a judge is asked
about, what a step's pairs become in pairs.jsonl and back, what a comparator's verdicts label, and which
earlier pairs a round replays."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from comlrl.config.schema import load_config
from comlrl.learn.algorithms import ALGORITHMS
from comlrl.learn.units import Unit
from comlrl.run.comparators import Comparator, JudgeItem
from comlrl.run.rounds import PairRounds, RoundPair, candidates, joint_text, pair_records, question, read_rounds
from comlrl.tree.nodes import Node, Sample


def _sample(agent: int, text: str) -> Sample:
    return Sample(agent, (1, 2), (3, 4), text, True)


def _node(texts: list[list[str]], returns: list[float], node_id: str = "0") -> Node:
    """One node of two agents in align mode: joint action g = the g-th completion of each."""
    msgs = [[{"role": "system", "content": "sys"}, {"role": "user", "content": f"task for agent {a}"}]
            for a in range(len(texts))]
    n = Node(node_id, 1, 0, msgs)
    n.completions = [[_sample(a, t) for t in row] for a, row in enumerate(texts)]
    n.joint = [tuple(g for _ in texts) for g in range(len(texts[0]))]
    n.rewards = n.returns = list(returns)
    return n


def test_candidates_are_pairs_of_different_texts_in_a_seeded_order_cut_at_the_limit():
    texts = ["x", "y", "x", "z"]  # the second "x" is the first one again: never judged against it
    every = candidates(texts, None, random.Random(0))
    assert sorted(every) == [(0, 1), (0, 3), (1, 3)]
    assert candidates(texts, 2, random.Random(0)) == every[:2]
    assert candidates(["same", "same"], None, random.Random(0)) == []
    orders = {tuple(candidates(["a", "b", "c", "d"], None, random.Random(s))) for s in range(10)}
    assert len(orders) > 1  # the seed matters


def test_the_judge_sees_the_agents_last_user_message_and_a_joint_action_under_agent_names():
    n = _node([["p", "q"], ["r", "s"]], [0.0, 1.0])
    assert question(n, 1) == "task for agent 1"
    assert joint_text(n, 1) == "[agent 0]\nq\n\n[agent 1]\ns"


def test_records_are_the_exports_format_with_their_round_and_come_back_grouped(tmp_path: Path):
    n = _node([["p", "q"], ["r", "s"]], [0.0, 1.0], node_id="7")
    agent_pair = pair_records([RoundPair(n, 1, 1, 0)], step=3, rank=0, comparator="task")
    joint_pair = pair_records([RoundPair(n, None, 1, 0)], step=4, rank=1, comparator="policy")
    assert len(agent_pair) == 1 and len(agent_pair[0]) == 1  # one agent's siblings: one line
    line = agent_pair[0][0]
    assert line["prompt"] == n.messages[1] and line["chosen"] == [{"role": "assistant", "content": "s"}]
    assert line["rejected"] == [{"role": "assistant", "content": "r"}]
    assert line["meta"] == {"step": 3, "rank": 0, "node": "7", "turn": 1, "agent": 1, "joint": False,
                            "chosen_index": 1, "rejected_index": 0, "comparator": "task"}
    assert [rec["meta"]["agent"] for rec in joint_pair[0]] == [0, 1]  # a joint pair: a line per agent
    assert [rec["chosen"][0]["content"] for rec in joint_pair[0]] == ["q", "s"]
    path = tmp_path / "pairs.jsonl"
    lines = [json.dumps(rec) for item in agent_pair + joint_pair for rec in item]
    path.write_text("\n".join(lines) + "\n" + lines[0][:30] + "\n")  # and a line cut by a crash
    back = read_rounds(path, upto=4)
    assert {r: len(items) for r, items in back.items()} == {3: 1, 4: 1}
    assert back[4][0] == joint_pair[0] and back[3][0] == agent_pair[0]
    assert read_rounds(path, upto=3) == {3: agent_pair}  # a resume from round 3 forgets round 4
    assert read_rounds(tmp_path / "none.jsonl", upto=9) == {}


class LongerWins(Comparator):
    """Prefers the longer answer; equal lengths undecided; records what it was asked."""

    name = "longer"

    def __init__(self) -> None:
        self.asked: list[JudgeItem] = []

    def prefer(self, items: Sequence[JudgeItem]) -> list[int | None]:
        self.asked += list(items)
        return [None if len(i.first) == len(i.second) else (1 if len(i.first) > len(i.second) else -1)
                for i in items]


def _rounds(algorithm: str, comparator: Comparator | None, tmp_path: Path, **options) -> PairRounds:
    section = "dpo" if algorithm == "madpo" else "marlhf"
    cfg = load_config(None, [f"algorithm.name={algorithm}", "training.seed=3",
                             *(f"algorithm.{section}.{k}={v}" for k, v in options.items())])
    return PairRounds(cfg, ALGORITHMS[algorithm], getattr(cfg.algorithm, section), comparator, tmp_path)


def test_a_judge_labels_each_agents_sibling_pairs_and_undecided_ones_are_dropped(tmp_path: Path):
    judge = LongerWins()
    rounds = _rounds("madpo", judge, tmp_path, pairs_per_node="null")
    n = _node([["aa", "b", "cc"], ["x", "yyy", "x"]], [0.0, 0.0, 0.0])  # the task's returns tie: no task pair
    pairs = rounds.label([n], [])
    assert len(judge.asked) == 3 + 1  # agent 0: 3 pairs; agent 1: "x" twice is one text -> 1 pair
    assert {(p.agent, p.winner, p.loser) for p in pairs} == {(0, 0, 1), (0, 2, 1), (1, 1, 0)}  # aa = cc: undecided
    assert rounds.counters == {"asked": 4.0, "undecided": 1.0}
    assert {i.agent for i in judge.asked} == {0, 1} and judge.asked[0].question.startswith("task for agent")


def test_a_judge_labels_joint_actions_for_marlhf_and_the_task_labels_by_return_without_one(tmp_path: Path):
    n = _node([["a", "bb"], ["c", "d"]], [1.0, 0.0])
    judge = LongerWins()
    pairs = _rounds("marlhf", judge, tmp_path).label([n], [Unit(())])
    assert [(p.agent, p.winner, p.loser) for p in pairs] == [(None, 1, 0)]  # "[agent 0]\nbb..." is longer
    assert judge.asked[0].agent == 0 and "[agent 1]" in judge.asked[0].first
    task = _rounds("marlhf", None, tmp_path).label([n], [Unit((), pairs=((0, 1),))])
    assert [(p.agent, p.winner, p.loser) for p in task] == [(None, 0, 1)]  # the node unit's task pairs, as they are


def _history(rounds: PairRounds, counts: dict[int, int]) -> None:
    rounds.rounds = {r: [[{"meta": {"step": r, "i": i}}] for i in range(n)] for r, n in counts.items()}


def test_a_round_replays_its_modes_pairs_the_same_on_every_call(tmp_path: Path):
    decay = _rounds("madpo", None, tmp_path, replay="decay", replay_lambda=0.5)
    _history(decay, {1: 4, 2: 4, 3: 4})
    picked = decay.replay(current=4, own=7)  # weights .125, .25, .5 x 4 pairs: 1, 2, 4 of 7
    assert [item[0]["meta"]["step"] for item in picked] == [1, 2, 2, 3, 3, 3, 3]
    assert picked == decay.replay(current=4, own=7)  # every rank draws alike
    nearest = _rounds("madpo", None, tmp_path, replay="nearest_k", replay_k=1)
    _history(nearest, {1: 4, 2: 4, 3: 4})
    assert {item[0]["meta"]["step"] for item in nearest.replay(current=4, own=2)} == {3}
    current = _rounds("madpo", None, tmp_path)
    _history(current, {1: 4})
    assert current.replay(current=2, own=4) == []


def test_replay_size_fixes_the_count_and_a_round_without_own_pairs_replays_as_many_as_the_newest(tmp_path: Path):
    fixed = _rounds("marlhf", None, tmp_path, replay="all", replay_size=3)
    _history(fixed, {1: 5, 2: 5})
    assert len(fixed.replay(current=3, own=10)) == 3
    default = _rounds("marlhf", None, tmp_path, replay="all")
    _history(default, {1: 5, 2: 2})
    assert len(default.replay(current=3, own=0)) == 2  # no pairs of its own: the newest round's count
    assert len(default.replay(current=3, own=4)) == 4


def _line(agent: int, meta: dict) -> str:
    return json.dumps({"prompt": [{"role": "user", "content": f"q{agent}"}], "chosen": f"c{agent}",
                       "rejected": [{"role": "assistant", "content": f"r{agent}"}], "meta": {"agent": agent, **meta}})


def test_a_pairs_file_groups_into_joint_pairs_by_node_and_joint_actions(tmp_path: Path):
    """The export's lines (meta.chosen_joint, one per agent whose texts differ) and a run's pairs.jsonl lines
    (meta.joint, chosen_index) group by node and joint actions; one agent's siblings and bare lines stand alone."""
    from comlrl.learn.preference_file import joint_pairs, read_pairs

    exported = {"step": 2, "tree": 0, "node": "s2r0t0", "chosen_joint": 3, "rejected_joint": 1}
    kept = {"step": 1, "rank": 0, "node": "0", "joint": True, "chosen_index": 0, "rejected_index": 2}
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join([
        _line(0, exported), _line(1, exported),  # one joint pair, both agents
        _line(1, {**exported, "chosen_joint": 0}),  # another pair of the same node: agent 1 alone differed
        _line(0, kept), _line(1, kept),
        _line(0, {**kept, "joint": False}), _line(1, {**kept, "joint": False}),  # madpo's: each agent its own
        _line(1, {}),  # no meta to group by
    ]) + "\n")
    records = read_pairs(path, 2, "algorithm.marlhf.pairs_file")
    groups = joint_pairs(records)
    assert [[r.agent for r in g] for g in groups] == [[0, 1], [1], [0, 1], [0], [1], [1]]
    assert groups[0][1].prompt == [{"role": "user", "content": "q1"}] and groups[0][1].chosen == "c1"
    assert groups[0][1].rejected == "r1"


def test_a_bad_pairs_file_names_the_setting_that_named_it(tmp_path: Path):
    import pytest

    from comlrl.errors import ConfigError
    from comlrl.learn.preference_file import read_pairs

    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line(0, {}) + "\n" + _line(5, {}) + "\n")
    with pytest.raises(ConfigError, match=r"^config error: algorithm\.marlhf\.pairs_file: .*bad\.jsonl:2: "
                                          r"meta\.agent=5 is not an agent of this run \(0\.\.1\)$"):
        read_pairs(bad, 2, "algorithm.marlhf.pairs_file")
