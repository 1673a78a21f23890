"""End to end: the tree trainer on the bundled action tasks, actions executed in workspaces, judge scores
recorded per trajectory in trees.jsonl, and an exported SFT file the tokenizer's chat template accepts.

Fast: tiny-random, whose sample 0 is replaced by the (tokenized) reference answer, so real actions run and
succeed inside the real training loop. Slow: the embedded SmolLM2-135M-Instruct, as generated: its own
actions run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from act_refs import DONE, REFERENCE, locate

from comlrl.export.trees import load_trees, sft_records, trajectories, write_jsonl
from comlrl.tasks.actions import bundled_tasks_path, load_action_tasks, parse_actions

ROOT = Path(__file__).resolve().parents[2]
PROMPT_TO_TASK = {p.prompt: p.task_id for p in load_action_tasks(bundled_tasks_path())}


def _scripted(orig):
    """AgentPolicies.generate whose sample 0 is the reference answer, tokenized as a real completion."""
    from comlrl.policy import Sample

    def generate(self, requests, num_samples, greedy=False, stop_strings=None):
        out = orig(self, requests, num_samples, greedy=greedy, stop_strings=stop_strings)
        for (agent, msgs), row in zip(requests, out, strict=True):
            task_id, turn = locate(msgs, PROMPT_TO_TASK)
            ref = REFERENCE[task_id]
            text = ref[turn - 1][agent] if turn <= len(ref) else DONE
            tok = self.tokenizers[agent]
            ids = list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]
            row[0] = Sample(agent, row[0].prompt_ids, tuple(ids), text, True, row[0].prompt_truncated)
        return out

    return generate


def _check_run(out: Path, tokenizer_name: str, expect_success: bool) -> None:
    from transformers import AutoTokenizer

    from comlrl.models import resolve_model_path

    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m] == [1, 2][: len([m for m in metrics if "loss" in m])]
    records = load_trees(out)
    assert records and {len(r.prompts) for r in records} == {2}
    details = [d for r in records for d in r.reward_details if d is not None]
    judged = [d for d in details if "judge/task_completion" in d.components]
    trajs = list(trajectories(records))
    # every trajectory ends with a judged joint action (complete_task or the turn limit), scores recorded
    assert len(judged) >= len(trajs) > 0
    for t in trajs:
        comps = t.steps[-1].detail.components
        assert comps["done"] == 1.0
        if not comps["after_done"]:
            assert all(f"judge/{k}" in comps for k in ("task_completion", "action_quality", "efficiency",
                                                      "creativity"))
    executed = sum(d.components["actions_ok"] + d.components["actions_failed"] for d in details)
    if expect_success:
        assert executed > 0 and any(t.success for t in trajs)
        assert any(d.components["judge/task_completion"] == 10.0 for d in judged)
    sft = sft_records(records, only_success=expect_success)
    assert sft
    path = write_jsonl(out / "sft.jsonl", sft) and out / "sft.jsonl"
    tok = AutoTokenizer.from_pretrained(resolve_model_path(tokenizer_name))
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        text = tok.apply_chat_template(rec["messages"], tokenize=False)
        assert rec["messages"][-1]["content"].strip()[:20] in text
        ids = tok.apply_chat_template(rec["messages"], tokenize=True)
        assert len(ids) > 0


@pytest.mark.parametrize("mode, turns", [("align", 3), ("cross", 2)])
def test_trainer_on_action_tasks_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, turns: int) -> None:
    from comlrl.config.schema import load_config
    from comlrl.policy import AgentPolicies
    from comlrl.run.trainer import run
    from comlrl.tasks.actions import ActionsTask

    monkeypatch.setattr(AgentPolicies, "generate", _scripted(AgentPolicies.generate))
    closed: list[Path] = []  # the environment roots of the tasks the run closed
    close = ActionsTask.close
    monkeypatch.setattr(ActionsTask, "close", lambda self: (close(self), closed.append(self.env.root)))
    out = tmp_path / "run"
    cfg = load_config("configs/actions_T4_G2.yaml", [
        "model.name=tiny-random", "model.max_new_tokens=8", f"magrpo.num_turns={turns}", f"magrpo.joint_mode={mode}",
        "sandbox.timeout_s=2",
        "training.steps=2", "training.torch_threads=1", f"training.output_dir={out}", "dataset.eval_size=2",
        "training.eval_size=1", "logging.tensorboard=false", "logging.progress_bar=false", "sandbox.workers=2",
        # each evaluation (before and after) still runs a greedy and a sampled chain on a held-out and a probe
        # problem: 4 chains, not the default 1 greedy + 4 sampled on 1 held-out + 2 probe problems = 15
        "evaluation.samples=1", "evaluation.probe_problems=1",
    ])
    assert run(cfg) == 0
    assert len(closed) == 1 and not closed[0].exists()  # the run closed its task: API server and workspaces gone
    _check_run(out, "tiny-random", expect_success=True)
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert evals[-1]["eval/pass_at_1"] == 1.0  # greedy eval follows the scripted reference answers


# workspaces with files, so the usual first step (reading one) can succeed; turn 1 of every bundled task ends
# with a format reminder showing such a step on the task's own resources (comlrl/tasks/actions/prompts.py)
EMBEDDED_TASKS = ("ts-stats-empty", "improve-fib")


@pytest.mark.slow
@pytest.mark.embedded
def test_trainer_on_action_tasks_smollm2(tmp_path: Path) -> None:
    """The embedded model's own answers (nothing scripted) parsed, executed in workspaces, judged, exported.

    Measured on the 12 bundled tasks (T=0.8, 4 samples per agent): 56% of SmolLM2-135M's turn-1 answers and
    25% of its turn-2 answers hold a valid action (these two tasks: 11 of 16 in turn 1, mostly read_file).
    Here 2 trees x 2 turns give 24 answers, 8 of them in turn 1, so a run without a single successful
    action is very unlikely (about 1e-4), and the fixed seed makes it repeatable.
    """
    by_id = {json.loads(line)["task_id"]: line for line in bundled_tasks_path().read_text().splitlines()}
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(by_id[t] + "\n" for t in EMBEDDED_TASKS))
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "scripts/train.py", "--config", "configs/actions_T4_G2.yaml", f"task.actions.file={task_file}",
         "magrpo.num_turns=2", "training.steps=1", "training.trees_per_step=2", "training.torch_threads=1",
         "training.seed=0", f"training.output_dir={out}", "dataset.eval_size=0", "logging.progress_bar=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _check_run(out, "smollm2-135m-instruct", expect_success=False)
    records = load_trees(out)
    assert len({r.tree for r in records}) == 2
    answers = [text for r in records for per_agent in r.completions for text in per_agent]
    valid = [text for text in answers if parse_actions(text).actions]
    assert len(answers) == 24 and valid, answers  # the model's own answers hold valid actions
    details = [d.components for r in records for d in r.reward_details if d is not None]
    assert sum(c["actions_ok"] for c in details) >= 1  # ... which ran in a workspace and succeeded
    # and their observations open the next turn's prompts: "[operator] read_file: ok\nstats.py:\n..."
    turn2 = [m["content"] for r in records if r.turn == 2 for chat in r.prompts for m in chat[-1:]]
    assert any(re.search(r"^\[(operator|reviewer)\] \w+: ok$", text, re.M) for text in turn2), turn2
    exported = subprocess.run(
        [sys.executable, "scripts/export.py", str(out), "--sft", str(out / "sft_cli.jsonl"),
         "--pairs", str(out / "pairs.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert exported.returncode == 0, exported.stderr
