"""How the Atropos envs build a group: tokens, masks, scores and inference log-probs, with the tiny model's
real tokenizer (SmolLM2's vocabulary and chat template), and the tool env's masking of tool responses.

The episode test runs the project's episode loop with the sandbox and a backend that answers from a
script in-process (no server: what is under test is how a finished episode becomes a trajectory).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from comlrl.integrations.atropos.common import (
    MASKED,
    SentStats,
    aligned_logprobs,
    build_group,
    tokens_and_masks,
    trained_spans,
)
from comlrl.integrations.atropos.tool_env import episode_logprobs, trace_score
from comlrl.llm import ChatResult
from comlrl.tasks.datasets import load_easy
from comlrl.tasks.tool_agent.backends import ChatBackend
from comlrl.tasks.tool_agent.environment import ToolEnvironment
from comlrl.tasks.tool_agent.episodes import run_episodes

PROMPT = [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "Write `add`."}]
ANSWER = "```python\ndef add(a, b):\n    return a + b\n```"


def trained_text(tokenizer: Any, tokens: list[int], masks: list[int]) -> list[str]:
    return [tokenizer.decode(tokens[a:b]) for a, b in trained_spans(masks)]


def test_single_turn_masks_train_exactly_the_answer_and_its_end_of_turn(tokenizer: Any) -> None:
    chat = [*PROMPT, {"role": "assistant", "content": ANSWER}]
    tokens, masks = tokens_and_masks(tokenizer, chat, all_assistant_turns=False)
    assert tokens == tokenizer.apply_chat_template(chat, return_dict=False)
    prompt_len = len(tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_dict=False))
    assert masks[:prompt_len] == [MASKED] * prompt_len
    assert masks[prompt_len:] == tokens[prompt_len:]  # Atropos's convention: the token id where trained
    assert trained_text(tokenizer, tokens, masks) == [ANSWER + "<|im_end|>\n"]


def test_logprobs_align_only_when_the_counts_match(tokenizer: Any) -> None:
    chat = [*PROMPT, {"role": "assistant", "content": ANSWER}]
    tokens, masks = tokens_and_masks(tokenizer, chat, all_assistant_turns=False)
    n = sum(m != MASKED for m in masks)
    values = [-0.01 * (i + 1) for i in range(n)]
    aligned = aligned_logprobs(masks, [values])
    assert aligned is not None and len(aligned) == len(tokens)
    assert [v for v, m in zip(aligned, masks, strict=True) if m == MASKED] == [1.0] * (len(tokens) - n)
    assert [v for v, m in zip(aligned, masks, strict=True) if m != MASKED] == values
    assert aligned_logprobs(masks, [values[:-1]]) is None  # e.g. a server that leaves out the end-of-turn token
    assert aligned_logprobs(masks, [None]) is None
    assert aligned_logprobs(masks, [values, values]) is None  # two turns' log-probs, one trained span


def test_a_group_keeps_inference_logprobs_only_if_every_sequence_aligns(tokenizer: Any) -> None:
    chats = [[*PROMPT, {"role": "assistant", "content": ANSWER}], [*PROMPT, {"role": "assistant", "content": "no"}]]
    lens = [sum(m != MASKED for m in tokens_and_masks(tokenizer, c, all_assistant_turns=False)[1]) for c in chats]
    good = build_group(tokenizer, chats, [3.0, 1.0], [[[-0.5] * lens[0]], [[-0.25] * lens[1]]],
                       all_assistant_turns=False)
    assert good["scores"] == [3.0, 1.0] and good["messages"] == chats
    assert [len(t) for t in good["tokens"]] == [len(m) for m in good["masks"]] == [len(x) for x in
                                                                                    good["inference_logprobs"]]
    assert sorted(set(good["inference_logprobs"][1])) == [-0.25, 1.0]
    partial = build_group(tokenizer, chats, [3.0, 1.0], [[[-0.5] * lens[0]], [None]], all_assistant_turns=False)
    assert "inference_logprobs" not in partial and partial["tokens"] == good["tokens"]


class ScriptBackend(ChatBackend):
    """Answers round r of every episode with rounds[r] (what a server would return: stop sequence stripped)."""

    def __init__(self, rounds: list[str], logprob_counts: list[int] | None = None) -> None:
        self.rounds, self.counts, self.calls = rounds, logprob_counts, 0

    def complete(self, conversations: Any, *, stop: Any = ()) -> list[ChatResult]:
        i = self.calls
        self.calls += 1
        lps = tuple([-0.1] * self.counts[i]) if self.counts else None
        return [ChatResult(self.rounds[i], "stop", None, None, lps, 10, 5) for _ in conversations]


ROUND1 = ('<think>\nI add the numbers and test it first.\n<tool_call>\n{"name": "python", "arguments": '
          '{"code": "def add(a, b):\\n    return a - b"}}\n</tool_call>')
ROUND2 = ("The tests failed, I fix the sign.\n</think>\n\nFinal answer:\n"
          "```python\ndef add(a, b):\n    return a + b\n```")


def test_tool_episode_trains_both_assistant_turns_and_masks_the_tool_response(tokenizer: Any) -> None:
    from sandbox import Sandbox

    add = next(p for p in load_easy() if p.entry_point == "add")
    with Sandbox(workers=1, timeout_s=5.0) as box:
        (episode,) = run_episodes(ScriptBackend([ROUND1, ROUND2]), [add], ToolEnvironment(box), max_rounds=3)
    chat = episode.messages()
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant"]
    response = chat[3]["content"]
    assert response.startswith("<tool_response>") and '"tests_passed": "1/4"' in response  # a - b: only add(0, 0)
    tokens, masks = tokens_and_masks(tokenizer, chat, all_assistant_turns=True)
    texts = trained_text(tokenizer, tokens, masks)
    assert texts == [chat[2]["content"] + "<|im_end|>\n", chat[4]["content"] + "<|im_end|>\n"]
    assert not any("<tool_response>" in t for t in texts)  # the sandbox's answer is never trained
    assert response in tokenizer.decode(tokens)  # ...but it is in the tokens the model reads
    # final code passes 4/4; structure terms: round 1 strict call 0.1 + reasoning 0.05, round 2 answer 0.1 + 0.05
    assert episode.metrics()["success"] and trace_score(episode) == pytest.approx(1.15)
    per_turn = [e - s for s, e in trained_spans(masks)]
    with Sandbox(workers=1, timeout_s=5.0) as box:
        (ep2,) = run_episodes(ScriptBackend([ROUND1, ROUND2], per_turn), [add], ToolEnvironment(box), max_rounds=3)
    aligned = aligned_logprobs(masks, episode_logprobs(ep2))
    assert aligned is not None and aligned.count(-0.1) == sum(per_turn) and aligned.count(1.0) == len(tokens) - sum(
        per_turn)
    assert aligned_logprobs(masks, [(-0.1,) * per_turn[0], (-0.1,) * (per_turn[1] + 1)]) is None


def test_sent_stats_count_only_groups_atropos_accepts() -> None:
    stats = SentStats()
    kept, dropped = {"scores": [1.0, 0.0]}, {"scores": [0.0, 0.0]}
    stats.file(kept, pass_rate=[1.0, 0.0], mean_score=[3.0, 1.0])
    stats.file(dropped, pass_rate=[0.0, 0.0], mean_score=[1.0, 1.0])
    stats.accept(kept)
    assert stats.take() == {"train/pass_rate": 0.5, "train/mean_score": 2.0}
    assert stats.take() == {}


def test_code_env_wandb_log_adds_its_numbers_then_atropos_s(tokenizer: Any, tmp_path: Any) -> None:
    """The env built in-process (no server is called: the numbers come from SentStats)."""
    from comlrl.integrations.atropos.code_env import CodeEnv

    cfg, servers = CodeEnv.config_init()
    env = CodeEnv(cfg, servers)
    group = {"tokens": [[1, 2], [3]], "masks": [[MASKED, 2], [3]], "scores": [3.0, 1.0]}
    env.stats.file(group, pass_rate=[1.0, 0.0], mean_score=[3.0, 1.0])
    asyncio.run(env.add_rollouts_for_wandb(group))
    env.eval_metrics = {"eval/pass_rate": 0.375}
    asyncio.run(env.wandb_log({}))
    logged = env.last_logged  # Atropos's part adds its own keys to the same dict (the rollout table)
    assert {k: logged[k] for k in ("train/pass_rate", "train/mean_score", "eval/pass_rate")} == {
        "train/pass_rate": 0.5, "train/mean_score": 2.0, "eval/pass_rate": 0.375}
    assert "train/rollouts" in logged and env.rollouts_for_wandb == [] and env.eval_metrics == {}
    assert SimpleNamespace(**cfg.model_dump()).use_wandb is False and cfg.tokenizer_name.endswith("tiny-random-hd32")


def test_exact_group_trains_the_sampled_ids_with_their_logprobs_one_to_one():
    """A server that returns token ids (comlrl's rollout server, vLLM with return_token_ids): the group holds
    exactly the prompt's and each choice's ids, the log-probs aligned with them; a choice without ids means
    no exact group (re-tokenize instead), a choice without matching log-probs means no inference_logprobs."""
    from comlrl.integrations.atropos.common import exact_group

    def choice(ids, lps):
        content = None if lps is None else [SimpleNamespace(logprob=x) for x in lps]
        return SimpleNamespace(token_ids=ids, logprobs=SimpleNamespace(content=content))

    chats = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]] * 2
    g = exact_group([5, 6], [choice([7, 8], [-0.5, -0.25]), choice([9], [-1.0])], chats, [1, 0])
    assert g == {"tokens": [[5, 6, 7, 8], [5, 6, 9]], "masks": [[MASKED, MASKED, 7, 8], [MASKED, MASKED, 9]],
                 "scores": [1.0, 0.0], "messages": chats,
                 "inference_logprobs": [[1.0, 1.0, -0.5, -0.25], [1.0, 1.0, -1.0]]}
    g = exact_group([5, 6], [choice([7, 8], [-0.5]), choice([9], [-1.0])], chats, [1, 0])
    assert "inference_logprobs" not in g and g["tokens"] == [[5, 6, 7, 8], [5, 6, 9]]
    assert exact_group([5, 6], [choice(None, None), choice([9], None)], chats, [1, 0]) is None
    assert exact_group(None, [choice([7], None)], chats[:1], [1]) is None


def test_the_envs_register_under_their_name():
    """run-api refuses /register-env without a name (422 on desired_name: seen in serve mode before this
    default): each env's config names it."""
    from comlrl.integrations.atropos.code_env import CodeEnv
    from comlrl.integrations.atropos.tool_env import ToolAgentEnv

    assert CodeEnv.config_init()[0].wandb_name == "comlrl_code"
    assert ToolAgentEnv.config_init()[0].wandb_name == ToolAgentEnv.name
