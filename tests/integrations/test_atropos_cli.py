"""The envs through Atropos's own CLI (`python -m comlrl.integrations.atropos.<env> process|evaluate`), in a
subprocess, against real HTTP servers on 127.0.0.1 answering OpenAI chat completions from a script.

The groups file is read back with `jsonlines`, the package atroposlib writes it with, and each record is
checked against atroposlib's own schema of a scored group (`atroposlib.api.server.ScoredData`, what run-api
accepts); its viewer (atroposlib.frontend.jsonl2html) writes the HTML page beside it at the end of `process`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from atropos_servers import EASY, CodeServer, read_groups, run_env, tool_server

from comlrl.integrations.atropos.common import MASKED, trained_spans
from comlrl.integrations.atropos.tool_env import ToolAgentEnv

pytestmark = pytest.mark.slow  # each runs a Python process that loads transformers and starts a sandbox (~6 s)


def server_args(srv: Any) -> list[str]:
    return ["--openai.base_url", srv.base_v1, "--openai.model_name", "scripted", "--openai.api_key", "x"]


def process(module: str, out: Path, srv: Any, *extra: str) -> list[dict[str, Any]]:
    r = run_env(module, "process", "--env.total_steps", "2", "--env.group_size", "2", "--env.use_wandb", "false",
                "--env.data_path_to_save_groups", str(out), *server_args(srv), *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    assert out.with_suffix(".html").is_file()  # Atropos's viewer page of the groups
    html = out.with_suffix(".html").read_text()
    groups = read_groups(out)
    assert len(groups) == 2 and html.count("Group ") >= 2
    from atroposlib.api.server import ScoredData  # what run-api accepts from an environment: each record is one

    assert [ScoredData(**g).scores for g in groups] == [g["scores"] for g in groups]
    return groups


def check_group(tokenizer: Any, group: dict[str, Any], turns: int) -> None:
    """Tokens are the chat template of `messages`; masks train exactly the assistant turns."""
    for tokens, masks, chat in zip(group["tokens"], group["masks"], group["messages"], strict=True):
        assert tokens == tokenizer.apply_chat_template(chat, return_dict=False) and len(masks) == len(tokens)
        assert all(m in (MASKED, t) for m, t in zip(masks, tokens, strict=True))
        assistant = [m["content"] for m in chat if m["role"] == "assistant"]
        spans = trained_spans(masks)
        assert len(spans) == len(assistant) and (turns == 0 or len(assistant) >= turns)
        assert [tokenizer.decode(tokens[a:b]) for a, b in spans] == [t + "<|im_end|>\n" for t in assistant]
    assert "inference_logprobs" not in group  # the scripted server returns no log-probs


def test_code_env_process_writes_scored_groups(tmp_path: Path, tokenizer: Any) -> None:
    out = tmp_path / "groups.jsonl"
    with CodeServer(["correct", "wrong", "wrong", "correct"]) as srv:
        groups = process("code_env", out, srv)
    assert len(srv.problems) == 2 and all(r["n"] == 2 for r in srv.requests if "n" in r)  # G in one request
    # the levels reward: 3.0 = every test passes; 1.0 = code that runs but passes none
    assert [g["scores"] for g in groups] == [[3.0, 1.0], [1.0, 3.0]]
    for group, name in zip(groups, srv.problems, strict=True):
        check_group(tokenizer, group, 1)
        assert [len(c) for c in group["messages"]] == [3, 3]
        assert f"Write `{name}`." in group["messages"][0][1]["content"]
        passing = group["scores"].index(3.0)
        assert "return None" not in group["messages"][passing][2]["content"]
        assert group["messages"][passing][2]["content"].rstrip("`\n").endswith(
            EASY[name].canonical_solution.rstrip())


def test_code_env_evaluate_reports_the_held_out_pass_rate(tmp_path: Path) -> None:
    with CodeServer(["correct"] * 3) as srv:  # 3 of the 8 held-out problems answered correctly
        r = run_env("code_env", "evaluate", "--env.use_wandb", "false", "--env.eval_size", "8",
                    "--env.data_dir_to_save_evals", str(tmp_path), *server_args(srv))
    assert r.returncode == 0, r.stderr[-3000:]
    held_out = [b for b in srv.requests if "Write `" in json.dumps(b)]
    assert len(held_out) == 8 and all(b["temperature"] == 0.0 and b["n"] == 1 for b in held_out)  # greedy
    metrics = json.loads((tmp_path / "metrics.json").read_text())["results"]["all"]
    assert metrics["eval/pass_rate"] == 0.375 and metrics["eval/problems"] == 8 and metrics["eval/samples"] == 8
    assert metrics["eval/mean_score"] == pytest.approx((3 * 3.0 + 5 * 1.0) / 8)
    samples = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert sum(s["passed"] for s in samples) == 3 and len({s["task_id"] for s in samples}) == 8


def test_tool_env_process_masks_tool_responses_and_scores_traces(tmp_path: Path, tokenizer: Any) -> None:
    out = tmp_path / "groups.jsonl"
    with tool_server(list(EASY)) as srv:
        groups = process("tool_env", out, srv)
    assert all(r["stop"] == ["</tool_call>", "<tool_response>"] for r in srv.requests if "Write `" in json.dumps(r))
    for group in groups:
        check_group(tokenizer, group, 2)
        good, bad = sorted(range(2), key=lambda i: -group["scores"][i])
        # passing trace: every test (1.0) plus the mean structure terms of its rounds, at most 0.15 (a strict
        # call or compiling answer 0.1, reasoning first 0.05); the scripted model's first call is strict,
        # repaired or unreadable by problem, so the mean varies, but it is positive
        assert 1.0 < group["scores"][good] <= 1.15 + 1e-9
        # the guess: no test passes; a strict call (0.15) and an answer that compiles (0.1, no reasoning): mean 0.125
        assert group["scores"][bad] == pytest.approx(0.125)
        for i in (good, bad):
            tokens, masks, chat = group["tokens"][i], group["masks"][i], group["messages"][i]
            responses = [m["content"] for m in chat[2:] if m["role"] == "user"]
            assert responses and all(r.startswith("<tool_response>") for r in responses)
            trained = "".join(tokenizer.decode(tokens[a:b]) for a, b in trained_spans(masks))
            assert "<tool_response>" not in trained  # tool responses are masked out
        assert '"tests_passed": "0/' in group["messages"][bad][3]["content"]


def test_tool_env_config_fields_reach_atropos_cli() -> None:
    cfg, servers = ToolAgentEnv.config_init()
    assert (cfg.max_rounds, cfg.format_weight, cfg.max_tokens, cfg.use_wandb, cfg.server_api) == (
        4, 0.1, 384, False, "openai")
    assert servers[0].server_type == "openai"


def test_code_env_adds_trl_style_reward_funcs_to_the_code_reward(tmp_path: Path) -> None:
    """tests/reward_fns.py `distinct_chars` (distinct characters / 100) on top of the levels reward."""
    out = tmp_path / "groups.jsonl"
    with CodeServer(["wrong", "correct"]) as srv:
        groups = process("code_env", out, srv, "--env.reward_funcs", '["reward_fns:distinct_chars"]')
    first = groups[0]
    extra = [len(set(chat[2]["content"])) / 100 for chat in first["messages"]]
    assert first["scores"] == pytest.approx([1.0 + extra[0], 3.0 + extra[1]])
