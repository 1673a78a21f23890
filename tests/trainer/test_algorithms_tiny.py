"""Each algorithm family trains from its shipped config through the real trainer on the tiny random model,
and logs the metrics a user of that algorithm reads (two processes: tests/trainer/test_distributed.py). The
runs are in this process (`train_here`: what a run computes is tested here, not its process), except the one
on vLLM rollouts, whose engine is left in a process of its own."""

from __future__ import annotations

import math

import pytest
from trainer_helpers import TINY, assert_trained, metrics, train, train_here

pytestmark = pytest.mark.slow

# the shipped config of each family, made tiny: the random model, short completions, one tree per step
SMALL = [*TINY, "training.trees_per_step=1", "magrpo.num_generations=4", "evaluation.samples=0", "dataset.name=easy"]


def test_madpo_config_trains_on_vllm_rollouts_with_a_kl_term_and_logs_its_pairs(tmp_path, tiny_model):
    run = tmp_path / "madpo"
    res = train(["--config", "configs/madpo_T1_G8.yaml", *SMALL, "training.steps=1", "rollout.engine=vllm",
                 "magrpo.loss.kl_coef=0.05", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    [step] = [r for r in metrics(run) if r["step"] > 0]
    assert 0 < step["samples"] <= 2 * 2 * 2  # at most 2 pairs per node and agent, 2 completions each
    # the first update starts at the reference (the base): margin 0 for every pair, loss log 2
    assert step["dpo/margin"] == pytest.approx(0.0, abs=1e-5) and step["dpo/loss"] == pytest.approx(math.log(2.0))


def test_maac_config_trains_with_a_kl_term_and_logs_its_critic(tmp_path, tiny_model):
    run = tmp_path / "maac"
    res = train_here(["--config", "configs/maac_T1_G8.yaml", *SMALL, "training.steps=1", "magrpo.loss.kl_coef=0.05",
                 f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    [step] = [r for r in metrics(run) if r["step"] > 0]
    assert step["value/mean"] == 0.0 and step["value/mse"] > 0  # zero-initialised heads, real targets
    assert (run / "final" / "value_heads.pt").is_file()


def test_iac_with_one_sample_per_node_trains_in_a_tree_and_resumes_its_critic(tmp_path, tiny_model):
    run = tmp_path / "iac"
    args = ["--config", "configs/iac_T1_G8.yaml", *SMALL, "magrpo.num_generations=1", "magrpo.num_turns=2",
            "algorithm.critic.gae_lambda=0.5", "training.save_every=1"]
    res = train_here([*args, "training.steps=2", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    steps = [r for r in metrics(run) if r["step"] > 0]
    for r in steps:
        assert r["nodes"] == 2 and r["joint_actions"] == 2  # G = 1: one joint action per node, two turns
        assert r["adv_groups_skipped"] == 0  # a critic's advantage needs no sibling spread
        assert math.isfinite(r["value/mse"]) and "value/explained_variance" in r
    assert steps[0]["value/mean"] == 0.0 and steps[1]["value/mean"] != 0.0  # the critic learned in step 1
    assert (run / "checkpoints" / "step-1" / "weights" / "value_heads.pt").is_file()
    res = train_here([*args, "training.steps=3", "--resume", str(run)])
    assert res.returncode == 0, res.stderr[-4000:]
    resumed = metrics(run)[-1]
    # the heads came back from the checkpoint: fresh (zero) heads would value every state at exactly 0
    assert resumed["step"] == 3 and resumed["value/mean"] != 0.0


def test_madpo_trains_offline_on_exported_pairs_and_refuses_a_bad_file(tmp_path, tiny_model):
    import json

    pairs = tmp_path / "pairs.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"Write f{i}(x)."}],
             "chosen": [{"role": "assistant", "content": f"def f{i}(x):\n    return x + {i}\n"}],
             "rejected": [{"role": "assistant", "content": "print('no')"}], "meta": {"agent": i % 2}}
            for i in range(6)]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "offline"
    res = train_here(["--config", "configs/madpo_T1_G8.yaml", *SMALL, "training.steps=3",
                 f"algorithm.dpo.offline_pairs={pairs}", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    steps = [r for r in metrics(run) if r["step"] > 0]
    assert [r["pairs"] for r in steps] == [2, 2, 2] and [r["samples"] for r in steps] == [4, 4, 4]  # one pass
    assert steps[0]["dpo/loss"] == pytest.approx(math.log(2.0)) and steps[-1]["dpo/margin"] > 0
    assert all(r["grad_norm"] > 0 for r in steps) and "reward_mean" not in steps[0]  # no rollout
    pairs.write_text(json.dumps(rows[0]) + "\n" + '{"prompt": []}\n')
    bad = train_here(["--config", "configs/madpo_T1_G8.yaml", *SMALL, f"algorithm.dpo.offline_pairs={pairs}",
                 f"training.output_dir={tmp_path / 'bad'}"])
    assert bad.returncode != 0
    assert f"config error: algorithm.dpo.offline_pairs: {pairs}:2: 'prompt' must be a non-empty list" in bad.stderr


def test_centralized_config_trains_one_policy_whose_completion_is_split_into_roles(tmp_path, tiny_model):
    import json

    run = tmp_path / "centralized"
    res = train_here(["--config", "configs/centralized_T1_G8.yaml", *SMALL, "training.steps=1", "magrpo.num_turns=2",
                 f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    # the random model never closes a section, so the helper's part is the answer prefix and random tokens up
    # to the end (a syntax error) and the main's is empty: below what two empty answers score (0.5). The
    # wiring is what this checks; the update's direction is checked in tests/trainer/test_update_direction.py
    [step] = [r for r in metrics(run) if r["step"] > 0]
    assert step["reward_mean"] < 0.5 and step["nodes"] == 5 and step["joint_actions"] == 20
    trees = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    root = next(t for t in trees if t["parent"] is None)
    assert len(root["prompts"]) == 1 and len(root["completions"]) == 1  # one policy, one chat per node
    chat = json.dumps(root["prompts"][0])
    assert "<agent_0>" in chat and "<agent_1>" in chat  # the sections it is asked to write
    assert any(t["turn"] == 2 for t in trees)  # the feedback mode built the team's next chat


@pytest.mark.parametrize("algo", ["iac", "maac"])
def test_a_q_critic_trains_its_heads_on_the_states_after_the_actions(tmp_path, tiny_model, algo):
    """algorithm.critic.kind=q: zero heads at step 1, a learned Q (its heads read each completion's end) by
    step 2, and the actor trained on target - mean Q of the sampled actions."""
    run = tmp_path / algo
    res = train_here(["--config", f"configs/{algo}_T1_G8.yaml", *SMALL, "training.steps=2", "algorithm.critic.kind=q",
                 f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    steps = [r for r in metrics(run) if r["step"] > 0]
    assert steps[0]["value/mean"] == 0.0 and steps[1]["value/mean"] != 0.0
    assert all(math.isfinite(r["value/mse"]) and r["grad_norm"] > 0 for r in steps)


def test_marlhf_config_trains_its_reward_heads_and_logs_both_rewards(tmp_path, tiny_model):
    """Two steps of the shipped config on the tiny model: the pairs' accuracy (read before each update, on
    pairs the heads never trained on), the learned reward beside the task's, the heads saved with the run."""
    run = tmp_path / "marlhf"
    res = train_here(["--config", "configs/marlhf_T1_G8.yaml", *SMALL, "training.steps=2",
                      f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    steps = [r for r in metrics(run) if r["step"] > 0]
    # step 1: the zero heads tie every joint action, so only they train; from step 2 the policy does too
    assert steps[0]["adv_groups_skipped"] == steps[0]["adv_groups"] and all(r["grad_norm"] > 0 for r in steps)
    assert steps[1]["adv_groups_skipped"] < steps[1]["adv_groups"]
    assert steps[0]["marlhf/learned_reward"] == 0.0 and steps[1]["marlhf/learned_reward"] != 0.0
    assert all(0.0 <= r["marlhf/pair_accuracy"] <= 1.0 and r["marlhf/bt_loss"] > 0 and "reward_mean" in r
               for r in steps)
    assert steps[0]["marlhf/bt_loss"] == pytest.approx(math.log(2.0))  # zero heads: every margin 0
    assert (run / "final" / "value_heads.pt").is_file()
