"""The paired evaluation on the tiny random model (real trainer parts, hf engine, real sandbox).

The tiny model never passes a test, so rewards are zero; a text-dependent score (distinct characters,
as bonus_entry.py adds) is patched onto the task's reward here so per-problem scores differ and move."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from trainer_helpers import ROOT

from comlrl.config.schema import load_config
from comlrl.run.evaluation import Evaluator
from comlrl.run.problem_draw import probe_indices
from comlrl.run.trainer import build, training_step

pytestmark = pytest.mark.slow


@pytest.fixture()
def comp(tmp_path: Path, tiny_model, monkeypatch):
    from comlrl.tasks.code.common import CodeTask

    real = CodeTask.score

    def with_bonus(self, items):
        return [dataclasses.replace(r, total=r.total + len(set("".join(texts))) / 100.0)
                for r, (_, texts) in zip(real(self, items), items, strict=True)]

    monkeypatch.setattr(CodeTask, "score", with_bonus)
    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml", [
        "model.name=tiny-random", "model.max_new_tokens=8", "dataset.eval_size=3", "training.torch_threads=1",
        "rollout.engine=hf", "external.mode=plain", "training.steps=3", "training.trees_per_step=1",
        "evaluation.samples=2", "evaluation.probe_problems=2", "evaluation.greedy=true",
        "magrpo.learning_rate=5e-2", f"training.output_dir={tmp_path}",
    ])
    c = build(cfg)
    yield c
    c.sandbox.close()
    c.engine.close()


def test_same_weights_same_scores_and_the_probe_is_the_training_draw(comp) -> None:
    ev = Evaluator(comp)
    draw = probe_indices(len(comp.train), 3, 1, 1, 0, 2)
    assert [p.task_id for p in ev.sets["probe"]] == [comp.train[i].task_id for i in draw]
    m1, r1 = ev.run(0)
    torch.manual_seed(99)  # the trainer's own RNG moving in between must not change the evaluation
    m2, r2 = ev.run(0)
    assert r1 == r2
    assert {r["set"] for r in r1} == {"heldout", "probe"}
    assert [(r["set"], r["index"], r["samples"]) for r in r1] == \
        [("heldout", i, 2) for i in range(3)] + [("probe", i, 2) for i in range(2)]
    for key in ("eval/pass_at_1", "eval/sampled/pass_at_1", "eval/sampled/reward_mean",
                "eval/probe/sampled/reward_mean", "eval/probe/pass_at_1", "eval/problems", "eval/probe/problems",
                "eval/seconds"):
        assert key in m1, key
    assert m1["eval/problems"] == 3 and m1["eval/probe/problems"] == 2
    assert not any(k.endswith("_delta") for k in m1)  # nothing to pair with at the first evaluation


def test_the_probe_is_scored_as_the_held_out_set_is(comp) -> None:
    """Issue 36, defect 14: a probe that stayed at zero while the held-out set rose. The same problems put in
    both sets get the same greedy scores and outcomes: one code path scores both (the difference was which
    problems the probe drew: benchmarks/coop_probe_difficulty.py, docs/results.md)."""
    ev = Evaluator(comp)
    ev.sets["heldout"] = list(ev.sets["probe"])
    _, records = ev.run(0)
    by_set = {s: [(r["task_id"], r["greedy_pass"], r["greedy_reward"]) for r in records if r["set"] == s]
              for s in ("heldout", "probe")}
    assert by_set["heldout"] == by_set["probe"] and len(by_set["probe"]) == 2


def test_one_evaluation_is_one_greedy_and_one_sampled_rollout_over_every_set(comp, monkeypatch) -> None:
    """Both sets share each engine call: one call per turn for the greedy chains and one for the sampled,
    each carrying every set's problems (separate rollouts per set and kind made 4x as many small calls)."""
    calls: list[tuple[int, int]] = []
    real = comp.engine.generate

    def counting(requests, n, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append((len(requests), n))
        return real(requests, n, **kw)

    monkeypatch.setattr(comp.engine, "generate", counting)
    Evaluator(comp).run(0)
    problems, agents = 3 + 2, 2
    # greedy turn 1 and 2, then sampled: turn 1 k samples per prompt, turn 2 one per chain (k chains)
    assert calls == [(problems * agents, 1), (problems * agents, 1), (problems * agents, 2),
                     (2 * problems * agents, 1)]


def test_after_training_the_paired_differences_are_logged_and_start_rewards_feed_reward_vs_start(comp) -> None:
    ev = Evaluator(comp)
    _, before = ev.run(0)
    start = ev.start_rewards()
    assert set(start) == {p.task_id for p in ev.sets["probe"]}
    probe_first = {r["task_id"]: r["first_turn_reward"] for r in before if r["set"] == "probe"}
    assert start == probe_first
    step_metrics, _ = training_step(comp, 0, start)
    assert "reward_vs_start" in step_metrics  # step 0 draws the probe's first problem
    after_metrics, after = ev.run(1)
    for prefix in ("eval/", "eval/probe/"):
        for key in ("sampled/reward_mean", "sampled/pass_at_1", "pass_at_1"):
            lo, mid, hi = (after_metrics[f"{prefix}{key}_delta{s}"] for s in ("_lo", "", "_hi"))
            assert lo <= mid <= hi
    b = {r["index"]: r["sampled_reward"] for r in before if r["set"] == "heldout"}
    a = {r["index"]: r["sampled_reward"] for r in after if r["set"] == "heldout"}
    expected = sum(a[i] - b[i] for i in b) / len(b)
    assert after_metrics["eval/sampled/reward_mean_delta"] == pytest.approx(expected)


def test_restore_reads_the_first_evaluation_back(comp, tmp_path: Path) -> None:
    ev = Evaluator(comp)
    _, first = ev.run(0)
    _, later = ev.run(2)
    again = Evaluator(comp)
    again.restore([json.loads(json.dumps(r)) for r in first + later])
    assert again.baseline.keys() == ev.baseline.keys()
    assert again.start_rewards() == ev.start_rewards()
