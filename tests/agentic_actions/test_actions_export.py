"""Training-format export: SFT chats per trajectory and preference pairs per node, for action trees and for
code-collaboration trees, accepted by a tokenizer's chat template."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from act_rollout import problems, rollout

from comlrl.export.trees import (
    chat_of,
    merge_roles,
    preference_pairs,
    sft_records,
    to_training_format,
    trajectories,
    write_jsonl,
)
from comlrl.tasks.actions import ActionsTask
from comlrl.tasks.actions.options import ActionsTaskConfig
from comlrl.tree.nodes import backup_returns
from comlrl.tree.records import NodeRecord, node_records

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from comlrl.models import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("tiny-random"))


def reread(records: list[NodeRecord]) -> list[NodeRecord]:
    """The records as they come back from trees.jsonl (fresh copies)."""
    return [NodeRecord.from_json(json.loads(r.to_line())) for r in records]


def action_trees(sandbox, tmp_path: Path, mode: str = "align") -> list[NodeRecord]:
    probs = problems("setup-api-app")
    task = ActionsTask(sandbox, ActionsTaskConfig(max_turns=2), root=str(tmp_path / "ws"))
    roots = rollout(task, probs, mode, turns=2)
    for r in roots:
        backup_returns(r, 1.0)
    task.close()
    return reread(node_records(roots, 1, "s1r0t", 2))


def code_trees() -> list[NodeRecord]:
    """Two-turn code-collaboration records: turn 2 prompts are fresh feedback prompts, not chat continuations.
    Written as schema-1 lines (test counts, no pass verdict), which still load."""
    sys_h, sys_m = "You are the helper agent.", "You are the main agent."
    p1 = [[{"role": "system", "content": sys_h}, {"role": "user", "content": "Write aux for add."}],
          [{"role": "system", "content": sys_m}, {"role": "user", "content": "Write add."}]]
    p2 = [[{"role": "system", "content": sys_h}, {"role": "user", "content": "Tests failed: assert add(1, 2) == 3"}],
          [{"role": "system", "content": sys_m}, {"role": "user", "content": "Tests failed: fix add."}]]
    detail = lambda p: {"components": {"tests": p / 2}, "tests_passed": p, "tests_total": 2}  # noqa: E731
    root = {"step": 1, "id": "t0", "parent": None, "parent_action": None, "turn": 1, "tree": "t0", "prompts": p1,
            "completions": [["def aux(a, b): return a", "def aux(a, b): return a + b"],
                            ["def add(a, b): return aux(a, b)", "def add(a, b): return 0"]],
            "joint_actions": [[0, 0], [1, 1]], "rewards": [1.0, 0.5], "returns": [3.0, 0.5],
            "advantages": [None, None], "reward_details": [detail(0), detail(1)], "pruned": False,
            "children": {"0": "t0.0"}}
    child = {"step": 1, "id": "t0.0", "parent": "t0", "parent_action": 0, "turn": 2, "tree": "t0", "prompts": p2,
             "completions": [["def aux(a, b): return a + b", "def aux(a, b): return b"],
                             ["def add(a, b): return aux(a, b)", "def add(a, b): return aux(b, a)"]],
             "joint_actions": [[0, 0], [1, 1]], "rewards": [2.0, 1.0], "returns": [2.0, 1.0],
             "advantages": [None, None], "reward_details": [detail(2), detail(1)], "pruned": False, "children": {}}
    return [NodeRecord.from_json(root), NodeRecord.from_json(child)]


def test_answer_prefix_is_not_repeated_in_exports(tokenizer) -> None:
    recs = code_trees()
    prefixed = reread(recs)
    for rec in prefixed:  # as the trainer writes code trees: prompts end with the answer prefix
        for a, msgs in enumerate(rec.prompts):
            msgs.append({"role": "assistant", "content": "def aux(" if a == 0 else "def add("})
    assert sft_records(prefixed) == sft_records(recs)
    assert preference_pairs(prefixed) == preference_pairs(recs)


def test_code_collab_trees_export(tokenizer) -> None:
    recs = code_trees()
    trajs = list(trajectories(recs))
    assert len(trajs) == 3  # root j=1 (leaf), child j=0, child j=1
    best = next(t for t in trajs if len(t.steps) == 2 and t.steps[-1].joint == 0)
    assert best.reward == 3.0 and best.success
    sft = to_training_format(best, 1, role_names=["helper", "main"])
    roles = [m["role"] for m in sft["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert sft["messages"][3]["content"] == "Tests failed: fix add."  # the fresh prompt's system is not repeated
    assert sft["meta"]["role"] == "main" and sft["meta"]["success"]
    tokenizer.apply_chat_template(sft["messages"], tokenize=False)
    assert len(sft_records(recs, only_success=True)) == 2  # one trajectory, both agents
    assert len(sft_records(recs, min_reward=2.0)) == 4
    assert sft_records(recs, min_reward=10) == []
    per_turn = to_training_format(best, 0, per_turn=True)
    assert isinstance(per_turn, list) and [r["meta"]["turn"] for r in per_turn] == [1, 2]
    pairs = preference_pairs(recs)
    assert len(pairs) == 4  # two nodes x two agents
    root_main = next(p for p in pairs if p["meta"]["node"] == "t0" and p["meta"]["agent"] == 1)
    assert root_main["chosen"][0]["content"] == "def add(a, b): return aux(a, b)"
    assert root_main["rejected"][0]["content"] == "def add(a, b): return 0"
    assert root_main["meta"]["chosen_value"] == 3.0 and root_main["meta"]["rejected_value"] == 0.5
    assert len(preference_pairs(recs, only_success=True)) == 2  # only the child's best succeeded
    for p in pairs:
        tokenizer.apply_chat_template(p["prompt"] + p["chosen"], tokenize=False)


@pytest.mark.parametrize("mode", ["align", "cross"])
def test_action_trees_export(sandbox, tmp_path: Path, tokenizer, mode: str) -> None:
    recs = action_trees(sandbox, tmp_path, mode)
    trajs = list(trajectories(recs))
    per_node = 2 if mode == "align" else 4
    assert len(trajs) == per_node * per_node
    ok = [t for t in trajs if t.success]
    assert ok and all(t.steps[-1].detail.components["judge/task_completion"] == 10.0 for t in ok)
    sft = sft_records(recs, only_success=True, role_names=["operator", "reviewer"])
    assert sft and all(r["meta"]["success"] for r in sft)
    for rec in sft:
        msgs = rec["messages"]
        # system, the demonstration exchange (two turns), then the task's two turns
        assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 4
        assert "Results of turn 1:" in msgs[-2]["content"]
        text = tokenizer.apply_chat_template(msgs, tokenize=False)
        assert msgs[-1]["content"] in text
    pairs = preference_pairs(recs)
    assert pairs and all(p["meta"]["chosen_value"] > p["meta"]["rejected_value"] for p in pairs)


def test_merge_and_chat_helpers() -> None:
    assert merge_roles([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                        {"role": "system", "content": "late"}]) == [{"role": "user", "content": "a\n\nb\n\nlate"}]
    assert chat_of([], 0) == []


def test_export_script(sandbox, tmp_path: Path, tokenizer) -> None:
    run = tmp_path / "run"
    write_jsonl(run / "trees.jsonl", [r.to_json() for r in action_trees(sandbox, tmp_path) + code_trees()])
    (run / "config.yaml").write_text("task:\n  name: actions\n")
    out = subprocess.run([sys.executable, "scripts/export.py", str(run), "--sft", str(tmp_path / "sft.jsonl"),
                          "--pairs", str(tmp_path / "pairs.jsonl"), "--min-reward", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "sft:" in out.stdout and "pairs:" in out.stdout
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert rows and {r["meta"]["role"] for r in rows} <= {"operator", "reviewer"}
    for r in rows:
        tokenizer.apply_chat_template(r["messages"], tokenize=False)
    bad = subprocess.run([sys.executable, "scripts/export.py", str(tmp_path / "missing"), "--sft", "x.jsonl"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
