"""Feedback inside a real expansion: three turns, a real sandbox, an expert that keeps failing.

The expert's server answers 500 or times out for part of the batch: those joint actions fall back to
level_feedback, the others get expert edits, and the tree still grows to the last turn.
"""

from __future__ import annotations

import fb_cases as cases
import pytest
from llm_server import ScriptedLLMServer

from comlrl.config.schema import ExternalConfig
from comlrl.tasks.code.common import path_codes
from comlrl.tasks.code.extract import extract_code
from comlrl.tasks.code.reward import ScoreRequest, score_batch
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots
from feedback import FeedbackContext, FeedbackMetrics, build_next_messages, make_expert
from sandbox.executor import Sandbox, SandboxUnavailable
from sandbox.testparse import parse_tests

CODES = {0: [cases.HELPER_BAD, cases.HELPER_OK], 1: [cases.MAIN_SYNTAX, cases.MAIN_OK]}


def test_three_turns_with_a_flaky_expert(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-e2e-test-key-000000000000")
    tests = parse_tests("\n".join(cases.ASSERTS), "sum_of_squares")
    m = FeedbackMetrics()
    cfg = ExternalConfig(mode="expert_edits", expert_max_retries=1, expert_timeout_s=0.3,
                         expert_cache_dir=str(tmp_path / "cache"), expert_concurrency=2)
    try:
        sandbox = Sandbox(workers=1, timeout_s=10.0)
    except SandboxUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no usable sandbox here: {exc}")

    def generate(requests, g):
        return [[CODES[agent][k % 2] for k in range(g)] for agent, _msgs in requests]

    def score(pairs):
        reqs = [ScoreRequest(codes=tuple(extract_code(node.completions[a][act[a]]) for a in range(2)),
                             entry_point="sum_of_squares", tests=tests) for node, act in pairs]
        return [Scored(r.total, r) for r in score_batch(reqs, sandbox)]

    def history(node, j):
        return [[n.completions[a][n.joint[act][a]] for n, act in node.path(j)] for a in range(2)]

    def next_messages(pairs):
        ctxs = [FeedbackContext(problem=cases.PROBLEM, role_names=list(cases.ROLES),
                                role_instructions=list(cases.ROLE_INSTRUCTIONS), initial_messages=cases.INITIAL,
                                history=history(node, j), reward=node.details[j],
                                codes=path_codes(history(node, j), node.details[j])) for node, j in pairs]
        return build_next_messages(ctxs, cfg, expert=expert, metrics=m)

    with ScriptedLLMServer(reply='{"helper": "square it", "main": "add the colon"}') as server:
        server.script.extend(["500", "500", "timeout", "timeout"])  # the first requests fail twice each
        expert = make_expert("deepseek:deepseek-coder", cfg, base_url=server.base_v1, metrics=m)
        roots = make_roots([cases.INITIAL], "t")
        expand_trees(roots, TreeShape(num_agents=2, num_generations=2, num_turns=3, joint_mode="align",
                                      threshold=None), generate, score, next_messages)
        expert.close()
    sandbox.close()
    nodes = [n for n in roots[0].walk()]
    assert {n.turn for n in nodes} == {1, 2, 3} and len(nodes) == 1 + 2 + 4
    assert all(len(n.rewards) == 2 for n in nodes)
    s = m.snapshot()
    assert s["expert/fallbacks"] >= 1 and s["prompts/expert_edits"] >= 1
    assert s["expert/fallbacks"] + s["prompts/expert_edits"] == 2 + 4
    third = [n for n in nodes if n.turn == 3]
    assert any("Expert suggestions for your code:\nsquare it" in n.messages[0][1]["content"] for n in third)
