"""Preference rounds through the real trainer on the tiny model (comlrl/run/rounds.py): madpo judged by its own
policy and replaying every earlier round, kept in pairs.jsonl across a resume; marlhf judged by a chat model
behind a real OpenAI-compatible server on loopback, replaying with decay. The runs are in this process
(`train_here`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from llm_server import JudgeServer
from trainer.trainer_helpers import TINY, metrics, train_here

from comlrl.learn.preference_file import read_pairs

pytestmark = pytest.mark.slow
ARGS = ["--config", "configs/align_T2_G4.yaml", *TINY, "evaluation.samples=0", "evaluation.probe_problems=0"]


def _rounds(run) -> Counter:
    lines = [json.loads(x) for x in (run / "pairs.jsonl").read_text().splitlines()]
    return Counter(r["meta"]["step"] for r in lines)


def test_madpo_judged_by_its_policy_replays_every_earlier_round_and_a_resume_keeps_them(tmp_path, tiny_model):
    run = tmp_path / "madpo"
    res = train_here([*ARGS, "algorithm.name=madpo", "algorithm.dpo.comparator=policy", "algorithm.dpo.replay=all",
                 "training.steps=3", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    steps = [r for r in metrics(run) if r["step"] > 0]
    labeled = [int(r["pairs/labeled"]) for r in steps]
    # the policy judges every candidate pair (both orders summed: a tie is all but impossible)
    assert all(r["comparator/asked"] > 0 and r["comparator/undecided"] == 0 for r in steps)
    assert all(n > 0 for n in labeled) and dict(_rounds(run)) == {1: labeled[0], 2: labeled[1], 3: labeled[2]}
    # replay=all, as many as the step's own: step 1 has nothing earlier; step 3 draws from rounds 1 and 2
    assert [r["pairs/replayed"] for r in steps] == [0, min(labeled[1], labeled[0]), min(labeled[2], sum(labeled[:2]))]
    assert [r["pairs/rounds_replayed"] for r in steps][0] == 0 and steps[2]["pairs/rounds_replayed"] >= 1
    assert all(r["samples"] == 2 * (r["pairs/labeled"] + r["pairs/replayed"]) for r in steps)  # 2 per pair
    # the kept pairs are the export's format: offline DPO reads them as they are
    assert len(read_pairs(run / "pairs.jsonl", 2)) == sum(labeled)

    again = train_here(["--resume", str(run / "checkpoints" / "step-2"), "training.steps=4"])
    assert again.returncode == 0, again.stderr[-4000:]
    after = {r["step"]: r for r in metrics(run)}
    kept = _rounds(run)
    assert kept[1] == labeled[0] and kept[2] == labeled[1]  # rounds 1 and 2 read back, not written twice
    assert kept[3] == after[3]["pairs/labeled"] and kept[4] == after[4]["pairs/labeled"]  # round 3 anew
    assert after[3]["pairs/replayed"] == min(after[3]["pairs/labeled"], labeled[0] + labeled[1])


def test_marlhf_judged_by_a_chat_model_trains_its_heads_on_its_and_earlier_joint_pairs(tmp_path, tiny_model):
    run = tmp_path / "marlhf"
    with JudgeServer(prefers=lambda a, b: len(a) >= len(b)) as judge:  # the longer joint answer (ties: A)
        res = train_here([*ARGS, "algorithm.name=marlhf", "algorithm.marlhf.task_weight=0.5",
                     "algorithm.marlhf.replay=decay", "algorithm.marlhf.replay_lambda=0.5",
                     f"algorithm.marlhf.comparator=llm:openai-compatible:judge@{judge.base_v1}",
                     "training.steps=2", f"training.output_dir={run}"])
        asks = len(judge.requests)
    assert res.returncode == 0, res.stderr[-4000:]
    steps = [r for r in metrics(run) if r["step"] > 0]
    # joint answers of different lengths are labeled, longer first; equal lengths say A both times: undecided
    assert all(r["comparator/asked"] > 0 for r in steps) and asks == 2 * sum(r["comparator/asked"] for r in steps)
    assert all(r["pairs/labeled"] == r["comparator/asked"] - r["comparator/undecided"] for r in steps)
    assert sum(r["pairs/labeled"] for r in steps) > 0
    lines = [json.loads(x) for x in (run / "pairs.jsonl").read_text().splitlines()]
    assert all(r["meta"]["joint"] and r["meta"]["comparator"].startswith("llm:openai-compatible:judge")
               for r in lines)
    for chosen, rejected in zip(lines[0::2], lines[1::2], strict=True):  # agents 0 and 1 of each joint pair
        assert [chosen["meta"]["agent"], rejected["meta"]["agent"]] == [0, 1]
        assert sum(len(r["chosen"][0]["content"]) - len(r["rejected"][0]["content"]) for r in (chosen, rejected)) > 0
    assert len(lines) == 2 * sum(r["pairs/labeled"] for r in steps)  # a joint pair: one line per agent
    assert all("marlhf/bt_loss" in r and r["grad_norm"] > 0 for r in steps)
    assert steps[1]["pairs/replayed"] == min(steps[1]["pairs/labeled"] or steps[0]["pairs/labeled"],
                                             steps[0]["pairs/labeled"])

    # the kept joint pairs train another run's reward heads (algorithm.marlhf.pairs_file): one pass in 2 steps,
    # none of its own siblings paired, the policy trained on the rollout
    other = tmp_path / "from_file"
    res = train_here([*ARGS, "algorithm.name=marlhf", "algorithm.marlhf.task_weight=0.5",
                 f"algorithm.marlhf.pairs_file={run / 'pairs.jsonl'}", "training.steps=2",
                 f"training.output_dir={other}"])
    assert res.returncode == 0, res.stderr[-4000:]
    used = [r for r in metrics(other) if r["step"] > 0]
    assert sum(r["pairs/from_file"] for r in used) == len(lines) // 2 and all(r["pairs/labeled"] == 0 for r in used)
    assert all(0.0 <= r["marlhf/pair_accuracy"] <= 1.0 for r in used if r["pairs/from_file"])
    assert not (other / "pairs.jsonl").exists() or (other / "pairs.jsonl").read_text() == ""


def test_pairs_files_refuse_a_comparator_or_a_replay_in_one_line(tmp_path):
    from comlrl.config.schema import ConfigError, load_config

    pairs = tmp_path / "p.jsonl"
    pairs.write_text("{}\n")
    for algo, section, file_key in (("madpo", "dpo", "offline_pairs"), ("marlhf", "marlhf", "pairs_file")):
        for key, value in (("comparator", "policy"), ("replay", "all")):
            with pytest.raises(ConfigError, match=rf"algorithm\.{section}\.{key}={value!r} is not allowed"):
                load_config(None, [f"algorithm.name={algo}", f"algorithm.{section}.{file_key}={pairs}",
                                   f"algorithm.{section}.{key}={value}"])
    with pytest.raises(ConfigError, match=r"algorithm\.marlhf\.pairs_file='nope\.jsonl' is not allowed; expected "
                                          r"an existing pairs file"):
        load_config(None, ["algorithm.name=marlhf", "algorithm.marlhf.pairs_file=nope.jsonl"])
