"""scripts/export.py says why it wrote no preference pairs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from comlrl.export.trees import nodes_with_gap
from comlrl.tree.records import NodeRecord

ROOT = Path(__file__).resolve().parents[1]


def _node(i: int, returns: list[float]) -> NodeRecord:
    chat = [[{"role": "user", "content": f"problem {i}"}], [{"role": "user", "content": f"problem {i}"}]]
    joint = [[0, 0], [1, 1]][: len(returns)]
    return NodeRecord(step=1, id=f"t{i}", parent=None, parent_action=None, turn=1, tree=f"t{i}", prompts=chat,
                      completions=[["a", "b"], ["c", "d"]], joint_actions=joint, rewards=returns, returns=returns,
                      advantages=[None, None], reward_details=[None] * len(returns), pruned=False, children={})


def _export(tmp_path: Path, nodes: list[NodeRecord], *extra: str) -> str:
    run = tmp_path / "run"
    run.mkdir()
    (run / "trees.jsonl").write_text("".join(n.to_line() for n in nodes))
    res = subprocess.run([sys.executable, "scripts/export.py", str(run), "--pairs", str(tmp_path / "p.jsonl"), *extra],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_no_pairs_because_every_group_tied(tmp_path):
    out = _export(tmp_path, [_node(0, [0.5, 0.5]), _node(1, [1.0, 1.0]), _node(2, [2.0])])
    assert out == (f"pairs: 0 records -> {tmp_path / 'p.jsonl'} (no group with a reward difference: the 2 nodes' "
                   "joint actions all tied (best - worst < --min-gap 1e-09))")


def test_no_pairs_because_the_filters_removed_them(tmp_path):
    out = _export(tmp_path, [_node(0, [0.5, 1.5]), _node(1, [1.0, 1.0])], "--min-reward", "5")
    assert out.endswith("(1 of 2 nodes have a reward difference, but --only-success, --min-reward or --agents "
                        "left none, or the chosen and rejected texts are equal)")


def test_pairs_written_need_no_explanation(tmp_path):
    assert _export(tmp_path, [_node(0, [0.5, 1.5])]) == f"pairs: 2 records -> {tmp_path / 'p.jsonl'}"


def test_nodes_with_gap_counts():
    nodes = [_node(0, [0.5, 0.5]), _node(1, [0.5, 0.6]), _node(2, [3.0])]
    assert nodes_with_gap(nodes) == (2, 1)
    assert nodes_with_gap(nodes, min_gap=0.2) == (2, 0)


def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trees.jsonl").write_text(_node(0, [0.5, 1.5]).to_line() + '{"step": 1, "id": "t1"\n'
                                     + _node(2, [1.0]).to_line())
    res = subprocess.run([sys.executable, "scripts/export.py", str(run), "--pairs", str(tmp_path / "p.jsonl")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and not (tmp_path / "p.jsonl").exists()
    assert res.stderr == f"export: {run / 'trees.jsonl'} line 2: not JSON (Expecting ',' delimiter at character 24)\n"
