"""End-to-end training runs of the real trainer on the tiny random model, with the tests' signal reward
(trainer_helpers.SIGNAL) next to the real code reward; in this process (`train_here`), but the run that is
killed."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file
from trainer_helpers import TINY, metrics, train_here

pytestmark = pytest.mark.slow


def _adapter(run, agent):
    path = run / "final" / f"agent{agent}" / "adapter_model.safetensors"
    return load_file(str(path))


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory, tiny_model):
    """A 2-step run per shipped mode config, trained once and read by every test that only reads a run."""
    done = {}

    def get(mode):
        if mode not in done:
            run = tmp_path_factory.mktemp(mode) / mode
            done[mode] = run, train_here(["--config", f"configs/{mode}_T2_G4.yaml", *TINY, "training.steps=2",
                                          f"training.output_dir={run}"])
        return done[mode]

    return get


@pytest.mark.parametrize("mode,nodes,rewards", [("align", 5, 20), ("cross", 17, 272)])
def test_training_updates_adapters_and_counts_match(two_step_run, mode, nodes, rewards):
    run, res = two_step_run(mode)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = metrics(run)
    assert [r["step"] for r in lines] == [0, 1, 2]  # step 0 = the evaluation before training
    assert "eval/pass_at_1" in lines[0] and "eval/pass_at_1" in lines[-1]
    assert all(r["eval/seconds"] > 0 for r in (lines[0], lines[-1])) and "eval/seconds" not in lines[1]
    for r in lines[1:]:
        assert r["nodes"] == nodes and r["joint_actions"] == rewards and r["pruned"] == 0
        assert r["turn_1/nodes"] == 1 and r["turn_2/nodes"] == nodes - 1
        assert math.isfinite(r["loss"]) and r["samples"] > 0 and r["gen_tokens"] > 0
        for key in ("reward_mean", "turn_1/reward_mean", "turn_2/reward_mean", "step_seconds", "tokens_per_s"):
            assert math.isfinite(r[key])
    for agent in (0, 1):  # LoRA B starts at zero: any non-zero B means the adapter trained
        b = [v for k, v in _adapter(run, agent).items() if "lora_B" in k]
        assert b and max(float(t.abs().max()) for t in b) > 0
    trees = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    assert len(trees) == 2 * nodes
    assert all(len(t["rewards"]) == len(t["returns"]) == len(t["joint_actions"]) for t in trees)
    for t in trees:  # every turn's answer starts with the task's prefix, which the completion text carries
        helper, main = (p[-1] for p in t["prompts"])
        assert helper == {"role": "assistant", "content": "```python\ndef aux("}
        assert main["role"] == "assistant" and main["content"].startswith("```python\ndef ")
        assert all(c.startswith(p[-1]["content"])
                   for p, cs in zip(t["prompts"], t["completions"], strict=True) for c in cs)
    assert (run / "checkpoints" / "step-2" / "meta.json").is_file()
    assert list((run / "tensorboard").glob("events.*"))
    assert "done: 2 steps; outputs in" in res.stdout


def test_final_adapters_load_with_plain_peft(two_step_run, tiny_model):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run, res = two_step_run("align")  # the run of test_training_updates_adapters_and_counts_match[align]
    assert res.returncode == 0, res.stderr[-3000:]
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    model = PeftModel.from_pretrained(base, str(run / "final" / "agent1"))
    out = model(torch.tensor([[1, 2, 3]]))
    assert out.logits.shape[-1] == base.config.vocab_size


def test_early_termination_prunes_and_is_logged(tmp_path, tiny_model):
    run = tmp_path / "p"
    # tiny-random never passes a test: reward = levels (>= 0) + distinct characters / 100 > 0; threshold 0 prunes
    res = train_here(["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=1",
                      f"training.output_dir={run}", "magrpo.early_termination_threshold=0.0"])
    assert res.returncode == 0, res.stderr[-3000:]
    r = metrics(run)[1]
    assert r["turn_1/nodes"] == 1 and r["pruned"] == 1 and r["nodes"] == 1 and r["turn_1/pruned_frac"] == 1.0


def test_resume_after_kill_matches_uninterrupted_run(tmp_path, tiny_model):
    import signal
    import subprocess
    import sys
    import time

    from trainer_helpers import ENTRY, ROOT, env

    common = ["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=4", "training.save_every=2",
              "evaluation.samples=0", "evaluation.probe_problems=0"]  # greedy evaluations: eval/pass_at_1 compared
    full = tmp_path / "full"
    assert train_here([*common, f"training.output_dir={full}"]).returncode == 0  # in this process; the killed
    # run in a process of its own
    part = tmp_path / "part"
    proc = subprocess.Popen([sys.executable, str(ENTRY), *common, f"training.output_dir={part}"], cwd=ROOT,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (part / "checkpoints" / "step-2" / "meta.json").exists():
        assert proc.poll() is None and time.time() < deadline, "run ended before its step-2 checkpoint"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    res = train_here([*common, "--resume", str(part)])
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = metrics(full), metrics(part)
    assert [r["step"] for r in b] == [0, 1, 2, 3, 4]
    for ra, rb in zip(a, b, strict=True):
        for key in ("reward_mean", "loss", "nodes", "gen_tokens", "eval/pass_at_1", "return_mean"):
            if key in ra:
                assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-6), (ra["step"], key)
    wa, wb = _adapter(full, 0), _adapter(part, 0)
    assert all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)


def test_comlrl_compat_config_trains_in_crossed_mode(tmp_path, tiny_model):
    """The shipped CoMLRL config runs end to end with its spelling `crossed` (sum credit, seq_sum loss)."""
    run = tmp_path / "compat"
    res = train_here(["--config", "configs/comlrl_compat.yaml", *TINY, "magrpo.joint_mode=crossed",
                      "magrpo.num_generations=2", "training.steps=1", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-3000:]
    [_, step] = metrics(run)
    assert step["joint_actions"] > 4 and step["samples"] > 0 and math.isfinite(step["loss"])  # 4 per node
    assert "joint_mode: cross" in (run / "config.yaml").read_text()


def test_a_share_of_each_group_trains_and_the_metrics_count_it(tmp_path, tiny_model):
    """magrpo.advantage.train_per_group=2 through the real trainer: every sibling group with a signal trains 2 of
    its 4 completions (fewer where fewer advantages are not 0), the signal share still counts whole groups, and
    the adapters move."""
    run = tmp_path / "share"
    res = train_here(["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=1",
                      "magrpo.advantage.train_per_group=2", "evaluation.samples=0", "evaluation.probe_problems=0",
                      f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-3000:]
    step = metrics(run)[1]
    trees = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    groups = [a for t in trees for a in t["advantages"] if a is not None]
    assert groups and step["samples"] == sum(min(2, sum(x != 0 for x in a)) for a in groups)
    assert step["samples"] < sum(len(a) for a in groups)
    generated = sum(2 * 4 for _ in trees)
    assert step["signal_share"] == pytest.approx(sum(len(a) for a in groups) / generated)
    for agent in (0, 1):  # LoRA B starts at zero: a non-zero B trained
        assert max(float(v.abs().max()) for k, v in _adapter(run, agent).items() if "lora_B" in k) > 0
