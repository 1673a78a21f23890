"""Short tree-trainer runs of configs/tool_agent_T3_G4.yaml on CPU (each tool round is a turn).

Runs go through `tool_entry.py` (scripts/train.py plus the task's stop strings wired into the policies;
see there). The tiny random model checks the whole pipeline fast; the embedded SmolLM2 runs one real step.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path(__file__).with_name("tool_entry.py")
FAST = ["training.torch_threads=1", "logging.progress_bar=false", "sandbox.workers=1", "dataset.eval_size=1",
        "training.steps=1"]


def train(out: Path, *overrides: str, bonus: bool = False, timeout: int = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false", "TOOL_AGENT_BONUS": "1" if bonus else "0"}
    cmd = [sys.executable, str(ENTRY), "--config", "configs/tool_agent_T3_G4.yaml", *FAST,
           f"training.output_dir={out}", *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def check_tree(run: Path, g: int = 4) -> list[dict]:
    """T=3 rounds of G samples: 1 + G + G^2 nodes, G + G^2 + G^3 round rewards."""
    steps = lines(run / "metrics.jsonl")
    assert [r["step"] for r in steps] == [0, 1] and "eval/pass_at_1" in steps[-1]
    r = steps[1]
    assert (r["turn_1/nodes"], r["turn_2/nodes"], r["turn_3/nodes"]) == (1, g, g * g)
    assert r["nodes"] == 1 + g + g * g and r["joint_actions"] == g + g**2 + g**3
    assert math.isfinite(r["loss"]) and math.isfinite(r["reward_mean"])
    nodes = lines(run / "trees.jsonl")
    assert len(nodes) == 1 + g + g * g
    for node in nodes:
        (chat,) = node["prompts"]
        assert len(chat) == 2 * node["turn"]  # system + problem, then (assistant, tool response) per round
        for reply in chat[3::2]:
            assert reply["role"] == "user" and reply["content"].startswith("<tool_response>{")
        for d in node["reward_details"]:
            assert set(d["components"]) == {"tests", "format", "reasoning", "fake_response"}
    return nodes


def test_tiny_model_runs_three_tool_rounds(tmp_path: Path) -> None:
    run = tmp_path / "tiny"
    res = train(run, "model.name=tiny-random", "model.max_new_tokens=8", bonus=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "stop_strings=['</tool_call>', '<tool_response>']" in res.stdout
    check_tree(run)
    assert lines(run / "metrics.jsonl")[1]["samples"] == 84
    assert (run / "final" / "agent0" / "adapter_model.safetensors").is_file()


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_model_one_step(tmp_path: Path) -> None:
    # G=2 and 48 tokens: G=4 (84 rounds of ~300-700-token prompts) takes over 30 min on a shared 2-core CPU
    run = tmp_path / "smol"
    res = train(run, "magrpo.num_generations=2", "model.max_new_tokens=48", timeout=2700)
    assert res.returncode == 0, res.stderr[-3000:]
    nodes = check_tree(run, g=2)
    texts = [c for n in nodes for c in n["completions"][0]]
    assert len(texts) == 14 and all(isinstance(t, str) for t in texts)
    # generation stopped right after a call whenever the model wrote one
    for t in texts:
        if "</tool_call>" in t:
            assert t.rstrip().endswith("</tool_call>") and t.count("</tool_call>") == 1
