"""Branching inside a completion (`rollout.branch`, issue 39's fourth switch) by hand: where a completion is cut,
the continuations through the expander, the two groups' advantages, the update's units and weights, and the
estimator's unbiasedness by exact enumeration over every outcome of a two-token policy (with a cut that reads
the tokens after it, the same enumeration shows the bias a stopping rule avoids)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace

import pytest

from comlrl.learn.advantages import assign_advantages
from comlrl.learn.algorithms import branched_units
from comlrl.learn.units import Unit
from comlrl.learn.update import step_size
from comlrl.policy.sample import Sample
from comlrl.run.metrics import DrawSums
from comlrl.tree.branching import Branch, BranchShape, branch_advantages, branch_point, trunk_values
from comlrl.tree.nodes import Node
from comlrl.tree.records import BranchRecord, NodeRecord, RecordError, node_records
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots

EOS = 9


def sample(ids, logprobs, agent=0, prompt=()) -> Sample:
    return Sample(agent, tuple(prompt), tuple(ids), "", bool(ids) and ids[-1] == EOS, False,
                  None if logprobs is None else tuple(logprobs))


@pytest.mark.parametrize(("ids", "logprobs", "shape", "expected"), [
    ([5, 6, 7, EOS], [-0.1, -2.5, -3.0, -0.01], BranchShape(2, 2.0), 2),  # cut after the first surprising token
    ([5, 6, 7, EOS], [-2.0, -2.5, -3.0, -0.01], BranchShape(2, 2.0), 1),  # -log p = 2.0 is at the threshold
    ([5, 6, 7, EOS], [-2.0, -2.5, -3.0, -0.01], BranchShape(2, 2.0, min_prefix=3), 3),  # the prefix keeps 3 at least
    ([5, 6, 7, EOS], [-0.1, -0.2, -0.3, -5.0], BranchShape(2, 2.0), None),  # only the last token: nothing after it
    ([5, 6, 7, EOS], [-0.1, -0.2, -0.3, -0.01], BranchShape(2, 2.0), None),  # nothing surprising
    ([5, 6, 7, EOS], None, BranchShape(2, 2.0), None),  # no log-probs from the engine
    ([5], [-9.0], BranchShape(2, 2.0), None),
])
def test_a_completion_is_cut_after_its_first_surprising_token(ids, logprobs, shape, expected) -> None:
    assert branch_point(ids, logprobs, shape) == expected


def test_the_expander_draws_k_continuations_of_each_prefix_in_one_call_and_scores_them_with_the_trunks_partner(
        ) -> None:
    """One tree, two agents, G = 2, K = 2. Agent 0's completion 1 is cut after 2 tokens, agent 1's completion 0
    after 1; the others have nothing surprising. Each continuation is scored with the other agent's completion of
    its trunk's joint action."""
    drawn = {0: [sample([1, 2, EOS], [-0.1, -0.1, 0.0]), sample([3, 4, 5, EOS], [-0.1, -3.0, -0.1, 0.0])],
             1: [sample([6, 7, EOS], [-4.0, -0.1, 0.0], agent=1), sample([8, EOS], [-0.1, 0.0], agent=1)]}
    calls = []

    def generate(requests, n, prefixes=None):
        calls.append(([a for a, _ in requests], n, prefixes))
        if prefixes is None:
            return [drawn[a] for a, _ in requests]
        return [[sample([*p, 50 + 10 * a + k, EOS], [-0.5] * (len(p) + 2), agent=a) for k in range(n)]
                for (a, _), p in zip(requests, prefixes, strict=True)]

    scored = []

    def score(pairs):
        out = []
        for node, act in pairs:
            texts = tuple(node.completions[a][k].completion_ids for a, k in enumerate(act))
            scored.append(texts)
            out.append(Scored(float(sum(map(sum, texts)))))
        return out

    roots = make_roots([[[{"role": "user", "content": "p"}]] * 2])
    expand_trees(roots, TreeShape(2, 2, 1, "align", None, branch=BranchShape(2, 2.0)), generate, score,
                 lambda pairs: [])
    node = roots[0]
    assert calls == [([0, 1], 2, None), ([0, 1], 2, [(3, 4), (6,)])]  # the prefixes: one call, K each
    assert [(b.agent, b.trunk, b.prefix) for b in node.branches] == [(0, 1, 2), (1, 0, 1)]
    a0, a1 = node.branches
    assert [s.completion_ids for s in a0.samples] == [(3, 4, 50, EOS), (3, 4, 51, EOS)]
    # agent 0's branches with agent 1's completion 1 (the trunk's joint action (1, 1)); agent 1's with agent 0's 0
    assert scored[2:] == [((3, 4, 50, EOS), (8, EOS)), ((3, 4, 51, EOS), (8, EOS)),
                          ((1, 2, EOS), (6, 60, EOS)), ((1, 2, EOS), (6, 61, EOS))]
    assert a0.rewards == [3 + 4 + 50 + EOS + 8 + EOS, 3 + 4 + 51 + EOS + 8 + EOS]
    assert a1.rewards == [1 + 2 + EOS + 6 + 60 + EOS, 1 + 2 + EOS + 6 + 61 + EOS]
    assert node.rewards == [1 + 2 + EOS + 6 + 7 + EOS, 3 + 4 + 5 + EOS + 8 + EOS]  # the trunks: unchanged


def test_no_branch_leaves_the_tree_as_the_fixed_tree_draws_it() -> None:
    def generate(requests, n, prefixes=None):
        assert prefixes is None
        return [[sample([1, EOS], [-0.1, 0.0], agent=a)] * n for a, _ in requests]

    roots = make_roots([[[{"role": "user", "content": "p"}]]])
    expand_trees(roots, TreeShape(1, 3, 1, "align", None, branch=BranchShape(2, 2.0)), generate,
                 lambda pairs: [Scored(1.0) for _ in pairs], lambda pairs: [])
    assert roots[0].branches == [] and roots[0].rewards == [1.0, 1.0, 1.0]


def test_the_two_groups_advantages_by_hand() -> None:
    """Trunk returns 1, 0, 0, 2; trunk 1 branched with returns 1 and 1 (its value 2/3), trunk 3 with 0 (value 1).
    Prefixes: values 1, 2/3, 0, 1 around their mean 2/3; continuations: (0, 1, 1) around 2/3, (2, 0) around 1."""
    values, branches = [1.0, 0.0, 0.0, 2.0], {1: [1.0, 1.0], 3: [0.0]}
    assert trunk_values(values, branches) == pytest.approx([1.0, 2 / 3, 0.0, 1.0])

    def centre(v):
        return [x - sum(v) / len(v) for x in v]

    got = branch_advantages(values, branches, centre)
    assert got.prefix == pytest.approx([1 / 3, 0.0, -2 / 3, 1 / 3])
    assert got.continuations[1] == pytest.approx([-2 / 3, 1 / 3, 1 / 3]) and got.continuations[3] == [1.0, -1.0]


def _node_with_branches() -> Node:
    prompt = (100, 101)
    row = [sample([1, 2, 3, EOS], [-0.1, -3.0, -0.1, 0.0], prompt=prompt), sample([4, EOS], [-0.1, 0.0], prompt=prompt)]
    node = Node(id="0", turn=1, root=0, messages=[[]], completions=[row], joint=[(0,), (1,)], rewards=[1.0, 0.0],
                returns=[1.0, 0.0])
    branch = [sample([7, EOS], [-0.2, 0.0], prompt=(*prompt, 1, 2)), sample([8, 9, EOS], [-0.2, -0.2, 0.0],
                                                                           prompt=(*prompt, 1, 2))]
    node.branches = [Branch(0, 0, 2, branch, rewards=[0.0, 0.5])]
    return node


def test_the_units_of_a_branched_node_split_the_trunk_and_weigh_its_continuations() -> None:
    node = _node_with_branches()
    assign_advantages([node], "mean", "none", 1e-6)
    # trunk 0's value (1 + 0 + 0.5) / 3 = 0.5 against trunk 1's 0: prefixes +0.25, -0.25
    assert node.advantages == [pytest.approx([0.25, -0.25])]
    assert node.branches[0].advantages == pytest.approx([0.5, -0.5, 0.0])
    units = branched_units(node)
    prefix, whole, rest = units
    assert prefix.samples[0].completion_ids == (1, 2) and not prefix.samples[0].finished
    assert prefix.samples[0].logprobs == (-0.1, -3.0) and prefix.advantages == (0.25,) and prefix.weights == ()
    assert whole.samples == (node.completions[0][1],) and whole.advantages == (-0.25,)
    tail = rest.samples[0]
    assert tail.prompt_ids == (100, 101, 1, 2) and tail.completion_ids == (3, EOS) and tail.logprobs == (-0.1, 0.0)
    assert rest.samples[1:] == tuple(node.branches[0].samples)  # they share the prompt: packed once
    assert rest.advantages == pytest.approx((0.5, -0.5, 0.0)) and rest.weights == pytest.approx((1 / 3,) * 3)
    # the step's tokens: the prefix's 2, the unbranched trunk's 2, a third of the three continuations' 2 + 2 + 3
    assert step_size(units, "token_mean").policy == pytest.approx(2 + 2 + 7 / 3)
    sums = DrawSums.of([node])  # the two trunks and two continuations generated; the prefix kept 2 of 4 tokens
    assert sums.means() == {"signal_share": 1.0, "completions_generated": 4, "branch/prefixes": 1,
                            "branch/prefix_share": 0.5}


def test_a_tied_continuation_group_trains_only_the_prefixes() -> None:
    node = _node_with_branches()
    node.branches[0].rewards = [1.0, 1.0]  # as the trunk's own 1.0
    assign_advantages([node], "mean", "group", 1e-6)
    assert node.branches[0].advantages is None
    assert [u.samples[0].completion_ids for u in branched_units(node)] == [(1, 2), (4, EOS)]


def test_without_branches_the_units_are_the_fixed_trees() -> None:
    node = _node_with_branches()
    node.branches = []
    assign_advantages([node], "mean", "none", 1e-6)
    assert branched_units(node) == [Unit((node.completions[0][0],), (0.5,)), Unit((node.completions[0][1],), (-0.5,))]


# ---- unbiasedness by exact enumeration ---------------------------------------------------------------------
# A two-token policy: p(x1 = 1) = s(t0), p(x2 = 1 | x1) = s(t1 + t2 x1), then EOS with probability 1. A trunk is
# cut after its first token of -log p >= 0.7: x1 = 0 (-log 0.43 = 0.85) is; x1 = 1 (0.55) is not; x2 may be.

THETA = (0.3, -0.5, 1.2)
REWARD = {(0, 0): 0.0, (0, 1): 1.0, (1, 0): 0.5, (1, 1): 2.0}
SHAPE = BranchShape(samples=1, surprisal=0.7)


def _sig(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def _p(token: int, context: tuple[int, ...]) -> float:
    if len(context) == 0:
        q = _sig(THETA[0])
    elif len(context) == 1:
        q = _sig(THETA[1] + THETA[2] * context[0])
    else:
        return 1.0 if token == EOS else 0.0
    return q if token == 1 else 1 - q


def _grad(token: int, context: tuple[int, ...]) -> list[float]:
    """d log p(token | context) / d theta."""
    if len(context) == 0:
        return [token - _sig(THETA[0]), 0.0, 0.0]
    if len(context) == 1:
        d = token - _sig(THETA[1] + THETA[2] * context[0])
        return [0.0, d, d * context[0]]
    return [0.0, 0.0, 0.0]


def _completion(x: tuple[int, int]) -> Sample:
    ids = (*x, EOS)
    return sample(ids, [math.log(_p(t, ids[:i])) for i, t in enumerate(ids)])


def _seq_grad(s: Sample) -> list[float]:
    total = [0.0, 0.0, 0.0]
    for i, t in enumerate(s.completion_ids):
        for j, d in enumerate(_grad(t, s.prompt_ids + s.completion_ids[:i])):
            total[j] += d
    return total


def _continuations(prefix: tuple[int, ...]) -> list[tuple[float, tuple[int, ...]]]:
    """Every continuation of `prefix` to EOS, with its probability."""
    if prefix and prefix[-1] == EOS:
        return [(1.0, ())]
    out = []
    for t in ((0, 1) if len(prefix) < 2 else (EOS,)):
        p = _p(t, prefix)
        out += [(p * q, (t, *rest)) for q, rest in _continuations((*prefix, t))]
    return out


def _expected_estimate(cut) -> list[float]:
    """E[sum over units and samples of weight x advantage x grad log p], G = 2 trunks, K = 1, baseline loo."""
    trunks = [(x1, x2) for x1 in (0, 1) for x2 in (0, 1)]
    total = [0.0, 0.0, 0.0]
    for pair in itertools.product(trunks, repeat=2):
        p_trunks = math.prod(_p(x[0], ()) * _p(x[1], (x[0],)) for x in pair)
        row = [_completion(x) for x in pair]
        points = [cut(s) for s in row]
        options = [_continuations(s.completion_ids[:p]) if p is not None else [(1.0, None)]
                   for s, p in zip(row, points, strict=True)]
        for draws in itertools.product(*options):
            prob = p_trunks * math.prod(q for q, _ in draws)
            node = Node(id="0", turn=1, root=0, messages=[[]], completions=[row], joint=[(0,), (1,)],
                        rewards=[REWARD[x] for x in pair], returns=[REWARD[x] for x in pair])
            for g, ((_, rest), p) in enumerate(zip(draws, points, strict=True)):
                if p is not None:
                    prefix = row[g].completion_ids[:p]
                    ids = (*prefix, *rest)
                    lps = [math.log(_p(t, ids[:i])) for i, t in enumerate(ids)][p:]
                    branch = sample(rest, lps, prompt=prefix)
                    node.branches.append(Branch(0, g, p, [branch], rewards=[REWARD[ids[:2]]]))
            assign_advantages([node], "loo", "none", 1e-6)
            for unit in branched_units(node):
                for s, a, w in zip(unit.samples, unit.advantages, unit.weights or (1.0,) * len(unit.samples),
                                   strict=True):
                    total = [t + prob * w * a * d for t, d in zip(total, _seq_grad(s), strict=True)]
    return total


def _true_gradient() -> list[float]:
    out = [0.0, 0.0, 0.0]
    for x, r in REWARD.items():
        s = _completion(x)
        p = math.exp(sum(s.logprobs))
        out = [o + p * r * d for o, d in zip(out, _seq_grad(s), strict=True)]
    return out


def test_the_branched_estimator_is_unbiased_by_exact_enumeration() -> None:
    """With a loo baseline and no scaling, each trunk's prefix and continuations are an unbiased estimate of the
    policy gradient, so two trunks' expected sum is twice it."""
    true = _true_gradient()
    assert any(abs(t) > 0.05 for t in true)
    assert _expected_estimate(lambda s: branch_point(s.completion_ids, s.logprobs, SHAPE)) == pytest.approx(
        [2 * t for t in true], abs=1e-12)
    # the fixed tree's estimator (no cut anywhere) is the same in expectation: the branches cost no bias
    assert _expected_estimate(lambda s: None) == pytest.approx([2 * t for t in true], abs=1e-12)


def test_a_cut_that_reads_the_tokens_after_it_is_biased() -> None:
    """Cut after x1 only when x2 came out 1 (it reads the token after the cut): the trunk's own continuation is
    then no draw from p(. | prefix), and the expectation misses the gradient."""
    def peeking(s: Sample) -> int | None:
        return 1 if s.completion_ids[1] == 1 else None

    true = _true_gradient()
    got = _expected_estimate(peeking)
    assert max(abs(g - 2 * t) for g, t in zip(got, true, strict=True)) > 0.01


def test_trees_jsonl_keeps_the_branches_and_reads_them_back() -> None:
    node = _node_with_branches()
    node.completions[0] = [replace(s, text=t) for s, t in zip(node.completions[0], ["def f(): ab", "x"], strict=True)]
    texts = ["def f(): q", "def f(): rs"]
    node.branches[0].samples = [replace(s, text=t) for s, t in zip(node.branches[0].samples, texts, strict=True)]
    assign_advantages([node], "mean", "none", 1e-6)
    [record] = node_records([node], step=3, prefix="s3r0t", num_agents=1)
    back = NodeRecord.from_json(json.loads(record.to_line()))
    assert back == record
    assert back.branches == [BranchRecord(0, 0, 2, ["def f(): q", "def f(): rs"], [0.0, 0.5], [0.5, -0.5, 0.0])]
    data = json.loads(record.to_line())
    data["branches"][0]["advantages"] = [0.5]
    with pytest.raises(RecordError, match=r"branches\[0\].advantages"):
        NodeRecord.from_json(data)
    del data["branches"]
    assert NodeRecord.from_json(data).branches == []  # a node that did not branch writes none
