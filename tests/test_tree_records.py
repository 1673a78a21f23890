"""The trees.jsonl record type (comlrl/tree/records.py): built from real trees, exact round trips, files of the
writer before it (tests/data/trees_v1.jsonl) still load, and every bad line is one error naming file and line.

tests/data/trees_v1.jsonl was written by `comlrl.run.outputs.node_records` at commit 5999580 (the writer
before the record type) from real trees (align N=2 G=3 T=2, cross N=2 G=2 T=3 with pruned nodes, align
N=1 G=2 T=3) whose joint actions carry real CodeReward, ActionReward and ToolReward objects, a plugin-style
reward and None.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from comlrl.export.trees import load_trees, preference_pairs, sft_records
from comlrl.learn.advantages import assign_advantages
from comlrl.tasks.code.reward import CodeReward
from comlrl.tree.contracts import Reward
from comlrl.tree.nodes import backup_returns
from comlrl.tree.records import (
    SCHEMA_VERSION,
    NodeRecord,
    RecordError,
    RewardRecord,
    node_records,
    read_records,
)
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots

V1 = Path(__file__).with_name("data") / "trees_v1.jsonl"


@dataclass(frozen=True)
class PlainReward:
    """A task's own reward that counts no tests (like tests/plugins/rhyme_task.py)."""

    total: float
    components: dict[str, float] = field(default_factory=dict)
    all_passed: bool = False
    notes: tuple[str, ...] = ()
    scored: tuple[str, ...] = ()


def code_reward(passed: int, total: int, notes: tuple[str, ...] = ()) -> CodeReward:
    return CodeReward(total=0.5 + 2.0 * passed / total, components={"syntax": 0.5, "tests": 2.0 * passed / total},
                      analyses=(), tests_passed=passed, tests_total=total, helper_called=False,
                      helper_result_used=False, thin_wrapper=False, exec=None, notes=notes, codes=("x = 1",))


def reward_for(node_id: str, j: int) -> Reward | None:
    """A deterministic mix of reward kinds (and no reward) per joint action."""
    k = (len(node_id) + j) % 4
    if k == 0:
        return code_reward(j % 3, 2, notes=("main does not call aux",) if j % 2 else ())
    if k == 1:
        return PlainReward(0.3 * j, {"rhymes": 0.3 * j}, all_passed=j % 2 == 1, notes=("a \"quoted\" note é",))
    if k == 2:
        return None
    return code_reward(2, 2)


def grow(mode: str, n: int, g: int, turns: int, threshold: float | None, trees: int = 2) -> list:
    def generate(requests, k):
        return [[f"agent {a} sample {s} <é\u2603>\n```python\nx = {a}\n```" for s in range(k)] for a, _ in requests]

    def score(pairs):
        out = []
        for node, act in pairs:
            j = node.joint.index(act)
            r = reward_for(node.id, j)
            out.append(Scored(r.total if r is not None else -0.5 * j, r))
        return out

    def next_messages(pairs):
        return [[[{"role": "user", "content": f"next {node.id}.{j}"}] for _ in range(n)] for node, j in pairs]

    roots = make_roots([[[{"role": "system", "content": "sys"}, {"role": "user", "content": f"p{i}"}]] * n
                        for i in range(trees)])
    expand_trees(roots, TreeShape(n, g, turns, mode, threshold), generate, score, next_messages)
    for root in roots:
        backup_returns(root, 0.9)
    assign_advantages(roots, "mean", "group", 1e-6)
    return roots


SHAPES = [(mode, n, g, t, thr) for mode, n, g, t, thr in
          itertools.product(("align", "cross"), (1, 2, 3), (2, 3), (1, 2, 3), (None, 0.2))
          if not (mode == "cross" and n == 3 and t == 3)]  # 8^2 or 27^2 nodes: no new case, just slow


@pytest.mark.parametrize(("mode", "n", "g", "turns", "threshold"), SHAPES)
def test_records_of_real_trees_round_trip_exactly(mode: str, n: int, g: int, turns: int,
                                                  threshold: float | None) -> None:
    roots = grow(mode, n, g, turns, threshold)
    records = node_records(roots, 3, "s3r1t", n)
    nodes = [node for root in roots for node in root.walk()]
    assert len(records) == len(nodes)
    for rec, node in zip(records, nodes, strict=True):
        line = rec.to_line()
        assert line.endswith("\n") and "\n" not in line[:-1]
        back = NodeRecord.from_json(json.loads(line))
        assert back == rec and back.to_line() == line
        assert list(json.loads(line)) == ["schema", "step", "id", "parent", "parent_action", "turn", "tree", "problem",
                                          "prompts", "completions", "joint_actions", "rewards", "returns", "advantages",
                                          "reward_details", "pruned", "children"]
        assert json.loads(line)["schema"] == SCHEMA_VERSION == 2
        assert rec.id == f"s3r1t{node.id}" and rec.tree == f"s3r1t{node.root}" and rec.pruned == node.terminated
        assert rec.parent == (None if node.parent is None else f"s3r1t{node.parent.id}")
        for act in rec.actions:  # the per-joint-action view agrees with the tree
            j = act.index
            assert act.choice == node.joint[j] and act.reward == node.rewards[j] and act.ret == node.returns[j]
            assert act.texts == tuple(node.completions[a][k] for a, k in enumerate(node.joint[j]))
            assert act.child == (f"s3r1t{node.children[j].id}" if j in node.children else None)
            reward = node.details[j]
            assert act.detail == (None if reward is None else
                                  RewardRecord(reward.components, reward.all_passed, reward.notes))


def test_a_reward_record_holds_what_the_contract_declares() -> None:
    r = code_reward(1, 2, notes=("main calls aux but ignores its result",))
    assert isinstance(r, Reward)
    assert RewardRecord.of(r).to_json() == {"components": {"syntax": 0.5, "tests": 1.0}, "all_passed": False,
                                            "notes": ["main calls aux but ignores its result"]}
    assert RewardRecord.of(PlainReward(1.0, {"rhymes": 1.0}, all_passed=True)).to_json() == {
        "components": {"rhymes": 1.0}, "all_passed": True, "notes": []}


def test_non_finite_numbers_survive_a_round_trip_as_before() -> None:
    [rec] = node_records(grow("align", 1, 2, 1, None, trees=1), 1, "s1r0t", 1)
    rec.rewards[0], rec.returns[1] = math.nan, math.inf
    line = rec.to_line()
    assert '"rewards": [NaN' in line and "Infinity]" in line  # what json.dumps always wrote
    assert NodeRecord.from_json(json.loads(line)).to_line() == line


# ------------------------------------------------------------------------------- files of the old writer

def v1_lines() -> list[str]:
    return V1.read_text(encoding="utf-8").splitlines()


def test_the_old_writers_file_loads_field_for_field() -> None:
    records = list(read_records(V1))
    assert len(records) == 32 and sum(r.pruned for r in records) == 8
    for rec, line in zip(records, v1_lines(), strict=True):
        old = json.loads(line)
        assert "schema" not in old
        new = rec.to_json()
        # every field but the reward details is the same text; the line gains only the schema version and the
        # problem id, which the old writer did not record
        assert new["problem"] is None
        assert json.dumps({k: v for k, v in new.items() if k not in ("schema", "problem")}
                          | {"reward_details": old["reward_details"]}) == line
        assert len(rec.reward_details) == len(old["reward_details"])
        for got, was in zip(rec.reward_details, old["reward_details"], strict=True):
            if was is None:
                assert got is None
                continue
            assert got.components == was["components"] and got.notes == ()
            comps = was["components"]  # the success rule export.is_success applied to these lines
            expect = comps["success"] >= 1.0 if "success" in comps else \
                bool(was.get("tests_total")) and was.get("tests_passed") == was.get("tests_total")
            assert got.all_passed == expect


def test_old_verdicts_per_reward_kind() -> None:
    """One of each kind in the fixture: code 4/4 and 0/4, actions with success 1, tool 1/2, a task's own reward."""
    seen = {}
    for rec, line in zip(read_records(V1), v1_lines(), strict=True):
        for got, was in zip(rec.reward_details, json.loads(line)["reward_details"], strict=True):
            if was is not None:
                key = (tuple(sorted(was["components"])), was.get("tests_passed"), was.get("tests_total"))
                seen[key] = got.all_passed
    code = ("helper_defined", "helper_used", "main_defined", "not_thin_wrapper", "syntax", "tests")
    assert seen == {
        (code, 4, 4): True, (code, 0, 4): False,
        (("actions", "judge/quality", "success"), 2, 2): True,
        (("fake_response", "format", "reasoning", "tests"), 1, 2): False,
        (("rhymes",), None, None): False,
    }


def test_old_and_new_lines_mix_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "trees.jsonl"
    new = node_records(grow("cross", 2, 2, 2, None, trees=1), 9, "s9r0t", 2)
    path.write_text("\n".join(v1_lines()) + "\n" + "".join(r.to_line() for r in new))
    records = list(read_records(path))
    assert len(records) == 32 + len(new) and records[32:] == new


# ------------------------------------------------------------------------------------------ bad lines

GOOD = json.loads(v1_lines()[1])


def _with(**changes) -> dict:
    return {**GOOD, **changes}


def _without(key: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != key}


BAD = [
    ([1, 2], "field '(line)': expected a JSON object"),
    (_with(schema=3), "schema version 3 is not one this comlrl reads (1 or 2); a newer comlrl wrote it"),
    (_without("rewards"), "missing field(s): rewards"),
    (_with(step="1"), "field 'step': expected an integer"),
    (_with(id=7), "field 'id/tree': expected strings"),
    (_with(parent=3), "field 'parent': expected a string or null"),
    (_with(parent_action="0"), "field 'parent_action': expected an integer or null"),
    (_with(turn=None), "field 'turn': expected an integer"),
    (_with(prompts=[["hi"]]), "field 'prompts': expected per agent a list of {role, content} messages"),
    (_with(completions=[[1]]), "field 'completions': expected per agent a list of strings"),
    (_with(joint_actions=[["0"]]), "field 'joint_actions': expected per joint action a list of integers"),
    (_with(rewards=["x", 1, 2]), "field 'rewards': expected a list of numbers"),
    (_with(rewards=[1.0]), "field 'rewards/returns': expected 3 values (one per joint action)"),
    (_with(advantages="none"), "field 'advantages': expected per agent a list of numbers or null"),
    (_with(reward_details=[None]), "field 'reward_details': expected 3 entries"),
    (_with(reward_details=[None, None, "ok"]), "field 'reward_details[2]': expected an object or null"),
    (_with(reward_details=[None, None, {"components": {"a": "b"}}]),
     "field 'reward_details[2].components': expected an object of numbers"),
    (_with(schema=2, reward_details=[None, None, {"components": {}, "notes": []}]),
     "field 'reward_details[2].all_passed': expected true or false"),
    (_with(schema=2, reward_details=[None, None, {"components": {}, "all_passed": True, "notes": "x"}]),
     "field 'reward_details[2].notes': expected a list of strings"),
    (_with(pruned=0), "field 'pruned': expected true or false"),
    (_with(children={"7": "x"}), "field 'children': expected an object of joint-action index -> node id"),
    (_with(joint_actions=[[0, 5], [1, 1], [2, 2]]), "field 'joint_actions[0]': expected one completion index per "
                                                    "agent, in range"),
]


@pytest.mark.parametrize(("data", "message"), BAD, ids=[m for _, m in BAD])
def test_a_bad_record_names_the_file_line_and_field(tmp_path: Path, data: object, message: str) -> None:
    path = tmp_path / "trees.jsonl"
    path.write_text(v1_lines()[0] + "\n" + json.dumps(data) + "\n" + v1_lines()[2] + "\n")
    with pytest.raises(RecordError) as err:
        list(read_records(path))
    assert str(err.value) == f"{path} line 2: {message}"


def test_the_good_record_of_the_bad_cases_loads() -> None:
    assert NodeRecord.from_json(GOOD).id == GOOD["id"]


def test_only_a_cut_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "trees.jsonl"
    every = v1_lines()
    lines = every[:3]
    path.write_text("\n".join(lines) + "\n\n" + every[3][:40])  # blank lines are fine; the cut one is skipped
    assert [r.id for r in read_records(path)] == [json.loads(x)["id"] for x in lines]
    path.write_text(lines[0] + "\n" + lines[1][:40] + "\n" + lines[2] + "\n")
    with pytest.raises(RecordError, match=r"trees.jsonl line 2: not JSON \(Expecting value at character 42\)$"):
        list(read_records(path))
    path.write_text(lines[0] + "\n" + lines[1][:40] + "\n")  # a complete last line: not a crash, an error
    with pytest.raises(RecordError, match="line 2: not JSON"):
        list(read_records(path))


# ------------------------------------------------------------------------------------------ export

def test_export_success_is_the_rewards_verdict(tmp_path: Path) -> None:
    """A task whose reward counts no tests: export --only-success found no success in the old lines (they kept
    no verdict and export re-derived one from test counts); the record now keeps `all_passed`."""
    roots = grow("align", 1, 2, 1, None, trees=1)
    roots[0].details = [PlainReward(0.2, {"rhymes": 0.2}), PlainReward(1.0, {"rhymes": 1.0}, all_passed=True)]
    roots[0].rewards = roots[0].returns = [0.2, 1.0]
    (tmp_path / "trees.jsonl").write_text("".join(r.to_line() for r in node_records(roots, 1, "s1r0t", 1)))
    records = load_trees(tmp_path)
    [sft] = sft_records(records, only_success=True)
    assert sft["meta"]["success"] and sft["messages"][-1]["content"] == roots[0].completions[0][1]
    [pair] = preference_pairs(records, only_success=True)
    assert pair["chosen"][0]["content"] == roots[0].completions[0][1]
    assert preference_pairs([replace(records[0], reward_details=[None, None])], only_success=True) == []


# ------------------------------------------------------------------------------------------ problem ids

def test_every_node_names_the_problem_its_tree_is_about(tmp_path: Path) -> None:
    """A user could not tell which problem a tree was about without reading its prompts (issue 36, item 15):
    every record of a tree carries its root's `problem` (the task's `problem_id`), the line round trips, the
    exports keep it, and a line written before the field loads with None."""
    roots = grow("align", 2, 2, 3, None)
    for root, pid in zip(roots, ("HumanEval/3", "easy/add"), strict=True):
        root.problem = pid
    records = node_records(roots, 1, "s1r0t", 2)
    trees: dict[str, set] = {}
    for rec in records:
        trees.setdefault(rec.tree, set()).add(rec.problem)
    assert trees == {"s1r0t0": {"HumanEval/3"}, "s1r0t1": {"easy/add"}}
    assert len(records) == 2 * (1 + 2 + 4)  # every node of both trees, not the roots only
    path = tmp_path / "trees.jsonl"
    path.write_text("".join(r.to_line() for r in records))
    assert list(read_records(path)) == records
    line = json.loads(records[-1].to_line())
    assert line["problem"] == "easy/add" and line["schema"] == SCHEMA_VERSION
    assert NodeRecord.from_json({k: v for k, v in line.items() if k != "problem"}).problem is None
    with pytest.raises(RecordError, match="^field 'problem': expected a string or null$"):
        NodeRecord.from_json({**line, "problem": 3})
    assert {r["meta"]["problem"] for r in sft_records(records)} == {"HumanEval/3", "easy/add"}
    pairs = preference_pairs(records)
    assert pairs and {p["meta"]["problem"] for p in pairs} == {"HumanEval/3", "easy/add"}
