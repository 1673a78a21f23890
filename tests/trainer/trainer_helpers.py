"""Shared helpers of the trainer tests: run the trainer as a user would, read its outputs."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "scripts" / "train.py"
TESTS = ROOT / "tests"  # on PYTHONPATH: tests/reward_fns.py is a user's reward module
VENV_BIN = Path(sys.executable).parent

# The random model never writes working code, so the code reward ties every sibling and nothing would
# train; this TRL-style reward function (distinct characters / 100, added to the real sandboxed reward)
# differs between samples, so every run below really computes gradients and moves the weights.
SIGNAL = "task.reward_funcs=[reward_fns:distinct_chars]"
TINY = [
    "model.name=tiny-random", "model.max_new_tokens=12", "dataset.eval_size=2", "training.torch_threads=1",
    "logging.progress_bar=false", "external.mode=plain",
    "rollout.engine=hf",  # the reference engine; the vllm engine has its own tests (tests/engines)
    "training.trees_per_step=1",  # one tree per step: the node and joint-action counts the tests assert
    "evaluation.greedy=true",  # the shipped quick start samples only; the tests assert the greedy figures too
    # one sampled chain per problem and one probe problem: every figure of an evaluation is still made and
    # paired (the evaluation's own counts are tested in test_evaluation.py); 4 s less per run than 8 chains
    "evaluation.samples=1", "evaluation.probe_problems=1",
    SIGNAL,
]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(TESTS), e.get("PYTHONPATH")) if p)
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_free_port(launcher: list[str]) -> list[str]:
    """An `accelerate launch` command on a port of its own: launches run side by side (test workers), and
    accelerate's default port, 29500, would be taken by the first."""
    if len(launcher) > 1 and launcher[1] == "launch" and "--main_process_port" not in launcher:
        return [*launcher[:2], "--main_process_port", str(free_port()), *launcher[2:]]
    return launcher


def train(args: list[str], launcher: list[str] | None = None, timeout: int = 900,
          extra_env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess:
    cmd = with_free_port(launcher or [sys.executable]) + [str(ENTRY)] + args
    e = env()
    for key, value in (extra_env or {}).items():  # None removes the variable
        if value is None:
            e.pop(key, None)
        else:
            e[key] = value
    return subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)


def train_here(args: list[str]) -> subprocess.CompletedProcess:
    """`comlrl-train args` in this test process: what `train` gives (exit status, stdout, stderr), without a
    fresh interpreter importing torch, transformers and peft again (about 5 s a run). For tests of what a run
    computes and writes; a test of the process itself (signals, a launcher, the environment it reads, its log
    lines: pytest's own handler holds those in here) uses `train`."""
    import contextlib
    import io
    import logging
    import warnings

    import torch

    from comlrl.cli.train import main
    from comlrl.console import CHATTY_LOGGERS, OUR_LOGGERS

    # what a run sets for its process (environment, warning filters, logger levels, torch's threads) is put
    # back: the tests that run after this one in this worker see the process as it was
    environ, threads = dict(os.environ), torch.get_num_threads()
    levels = {name: logging.getLogger(name).level for name in (*OUR_LOGGERS, *CHATTY_LOGGERS, "vllm")}
    out, err = io.StringIO(), io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(environ)
        torch.set_num_threads(threads)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    return subprocess.CompletedProcess(["comlrl-train", *args], status, out.getvalue(), err.getvalue())


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def assert_trained(run_dir: Path, agents: int = 2) -> None:
    """Every training step computed real gradients from real samples, and every agent's adapter moved
    (LoRA B starts at zero, so a non-zero B in final/ is an update that reached the saved weights)."""
    from safetensors.torch import load_file

    steps = [r for r in metrics(run_dir) if r["step"] > 0]
    assert steps, "no training step was logged"
    for r in steps:
        assert r["samples"] > 0 and r["adv_groups_skipped"] < r["adv_groups"], r
        assert math.isfinite(r["grad_norm"]) and r["grad_norm"] > 0, (r["step"], r["grad_norm"])
        assert math.isfinite(r["loss"]) and r["reward/distinct_chars"] > 0
    for agent in range(agents):
        weights = load_file(str(run_dir / "final" / f"agent{agent}" / "adapter_model.safetensors"))
        b = [t for k, t in weights.items() if "lora_B" in k]
        assert b and max(float(t.abs().max()) for t in b) > 0, f"agent {agent}'s adapter never moved"


def check_world_of_two(run_dir: Path, steps: int = 2, agents: int = 2) -> None:
    """Two ranks trained as one world: both ranks' trees counted, identical weights, rank 1's trees in rank 0's file
    (run with training.trees_per_step=1 on configs/align_T2_G4.yaml, as TINY does)."""
    lines = metrics(run_dir)
    assert [r["step"] for r in lines] == list(range(steps + 1))
    for r in lines[1:]:
        assert r["trees"] == 2 and r["nodes"] == 10 and r["joint_actions"] == 40  # both ranks' trees counted
        assert r["weights_rank_spread"] == 0.0  # both ranks hold identical weights after every step
    trees = [json.loads(x) for x in (run_dir / "trees.jsonl").read_text().splitlines()]
    roots = {t["id"][: t["id"].index("t")]: t for t in trees if t["parent"] is None and t["step"] == 1}
    assert set(roots) == {"s1r0", "s1r1"}  # rank 1's trees reach rank 0's file
    assert roots["s1r0"]["prompts"][-1] != roots["s1r1"]["prompts"][-1]  # ranks expand different problems
    assert_trained(run_dir, agents)  # both ranks' samples gave gradients; the synced adapters moved


def chat_sample(comp, agent: int, text: str):
    """`text` (then EOS) as `agent`'s completion of one fixed chat prompt, for the update-direction tests."""
    from comlrl.policy import Sample

    pol = comp.policies
    prompt, _ = pol.prompt_ids(agent, [{"role": "user", "content": "Write add(a, b)."}])
    tok = pol.tokenizers[agent]
    ids = tuple(tok(text, add_special_tokens=False)["input_ids"]) + (tok.eos_token_id,)
    return Sample(agent=agent, prompt_ids=tuple(prompt), completion_ids=ids, text=text, finished=True)


def summed_logp(comp, samples: list) -> list[float]:
    """Each sample's completion log-probability under the trained model now."""
    import torch

    with torch.no_grad():
        logps, mask = comp.policies.token_logprobs(samples, module=comp.trained().model)
    return (logps * mask).sum(dim=1).tolist()
