"""Judges: the rule-based one, score parsing, and LLM judges through the official openai / anthropic SDKs
against a real HTTP server on 127.0.0.1 (valid scores, malformed scores, timeouts -> rule-based fallback)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from act_refs import REFERENCE
from llm_server import ScriptedLLMServer

from comlrl.config.registry import PROVIDERS as PROVIDER_TABLE
from comlrl.config.registry import register_provider
from comlrl.config.schema import ConfigError, load_config
from comlrl.llm import LLMSettings
from comlrl.llm.openai_client import OpenAIClient
from comlrl.tasks.actions import ActionsTask, CheckResult, bundled_tasks_path, load_action_tasks
from comlrl.tasks.actions.judge import (
    JUDGE_SYSTEM,
    JUDGES,
    JudgeOptions,
    JudgeRequest,
    JudgeScores,
    LLMJudge,
    RuleJudge,
    judge_messages,
    make_judge,
    parse_judge_scores,
    register_judge,
)
from comlrl.tasks.actions.options import ActionsTaskConfig
from feedback.experts import ExpertError

VALID = json.dumps({"task_completion": 8, "action_quality": 7, "efficiency": 6, "creativity": 5,
                    "rationale": "mostly done"})


def request(passed: int = 1, total: int = 2, **kw) -> JudgeRequest:
    checks = tuple(CheckResult(f"check {i}", i < passed) for i in range(total))
    base = dict(task_id="t", pattern="troubleshooting", goal="Fix it.", transcript="turn 1 ...", checks=checks,
                turns_used=2, max_turns=4, actions_ok=3, actions_failed=1, format_errors=0,
                action_types=("read_file", "create_file"), completed=True, summary="fixed")
    base.update(kw)
    return JudgeRequest(**base)  # type: ignore[arg-type]


def llm_judge(server: ScriptedLLMServer, provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              **opts) -> LLMJudge:
    options = JudgeOptions(cache_dir=str(tmp_path / "cache"), **opts)
    if provider == "openai":
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0123456789")
        judge = make_judge("openai:gpt-4o-mini", options, base_url=server.base + "/v1")
    elif provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
        judge = make_judge("anthropic:claude-judge-test", options, base_url=server.base)
    else:
        judge = make_judge(f"openai-compatible:judge-m@{server.base}/v1", options)
    assert isinstance(judge, LLMJudge)
    return judge


PROVIDERS = ["openai", "anthropic", "openai-compatible"]


# ------------------------------------------------------------------------------------------- rules


def test_rule_judge_scores_from_checks_and_actions() -> None:
    s = RuleJudge().score(request(passed=1, total=2))
    assert s.task_completion == 5.0 and s.action_quality == 7.5
    assert s.efficiency == pytest.approx(10 * 0.5 * (1 - 1 / 4))
    assert s.creativity == pytest.approx(10 * 2 / 3, abs=1e-3) and s.source == "rule"
    perfect = RuleJudge().score(request(passed=2, total=2, turns_used=1, actions_failed=0,
                                        action_types=("a", "b", "c")))
    assert perfect.as_dict() == dict.fromkeys(perfect.as_dict(), 10.0)
    assert perfect.weighted({"task_completion": 1, "action_quality": 1, "efficiency": 1, "creativity": 1}) == 1.0
    zero = RuleJudge().score(request(passed=0, total=2, actions_ok=0, actions_failed=0, action_types=()))
    assert zero.weighted({"task_completion": 0.5, "action_quality": 0.5}) == 0.0


@pytest.mark.parametrize("text, ok", [
    (VALID, True),
    ("Here you go:\n```json\n" + VALID + "\n```", True),
    ("~~~\n" + VALID + "~~~ and that is all {", True),  # any fence, closed on the JSON's line, stray brace
    ('{"task_completion": 8, "action_quality": 7.5, "efficiency": 0, "creativity": 10}', True),
    ('{"task_completion": 11, "action_quality": 7, "efficiency": 6, "creativity": 5}', False),  # out of range
    ('{"task_completion": -1, "action_quality": 7, "efficiency": 6, "creativity": 5}', False),
    ('{"task_completion": "8", "action_quality": 7, "efficiency": 6, "creativity": 5}', False),  # not a number
    ('{"task_completion": true, "action_quality": 7, "efficiency": 6, "creativity": 5}', False),
    ('{"task_completion": 8, "action_quality": 7, "efficiency": 6}', False),  # missing criterion
    ("The agents did fine, 8/10.", False),
    ("", False),
    ('{"task_completion": 8, "action_quality": 7, "effic', False),  # cut off
])
def test_parse_judge_scores(text: str, ok: bool) -> None:
    got = parse_judge_scores(text)
    assert (got is not None) == ok
    if ok:
        assert set(got) >= {"task_completion", "action_quality", "efficiency", "creativity", "rationale"}


def test_judge_prompt_shows_transcript_checks_and_rubric() -> None:
    msgs = judge_messages(request())
    assert msgs[0]["role"] == "system" and "0 (worst) to 10 (best)" in msgs[0]["content"]
    user = msgs[1]["content"]
    assert "Fix it." in user and "[pass] check 0" in user and "[FAIL] check 1" in user and "turn 1" in user


# ------------------------------------------------------------------------------------- LLM judges


@pytest.mark.parametrize("provider", PROVIDERS)
def test_valid_scores_through_the_sdk(provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer(reply=VALID, slow_s=1.0) as server:
        judge = llm_judge(server, provider, tmp_path, monkeypatch)
        s = judge.score(request())
        assert (s.task_completion, s.action_quality, s.efficiency, s.creativity) == (8, 7, 6, 5)
        assert s.source == judge.client.spec and s.rationale == "mostly done"
        path = server.requests[0]["path"]
        assert path.endswith("/chat/completions" if provider != "anthropic" else "/v1/messages")
        sent = json.dumps(server.requests[0]["body"])
        assert "Fix it." in sent and "task_completion" in sent
        again = judge.score(request())  # served by the cache: no second request
        assert again == s and len(server.requests) == 1
        m = judge.metrics()
        assert m["judge/requests"] == 2 and m["judge/cache_hits"] == 1 and m["judge/calls"] == 1
        judge.close()


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("bad", [
    '{"task_completion": 12, "action_quality": 7, "efficiency": 6, "creativity": 5}',
    '{"task_completion": "high", "action_quality": 7, "efficiency": 6, "creativity": 5}',
    "I would rate this trajectory quite well overall.",
])
def test_malformed_scores_are_retried_then_fall_back(provider: str, bad: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer(reply=VALID, slow_s=1.0) as server:
        server.default = bad
        judge = llm_judge(server, provider, tmp_path, monkeypatch, max_retries=1)
        s = judge.score(request())
        assert s.source == "rule-fallback" and s == RuleJudge("rule-fallback").score(request())
        assert len(server.requests) == 2  # one retry
        m = judge.metrics()
        assert m["judge/parse_failures"] == 2 and m["judge/fallbacks"] == 1 and m["judge/failures"] == 1
        assert not list((tmp_path / "cache").rglob("*.json"))  # a malformed reply is never cached
        judge.close()


def test_malformed_then_valid_uses_the_valid_reply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer(reply=VALID, slow_s=1.0) as server:
        server.script.extend(["not json at all", "500"])
        judge = llm_judge(server, "openai", tmp_path, monkeypatch, max_retries=2)
        s = judge.score(request())
        assert s.source == "openai:gpt-4o-mini" and s.task_completion == 8
        assert [r["behaviour"] for r in server.requests] == ["not json at all", "500", "ok"]
        judge.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeouts_fall_back_to_the_rule_judge(provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer(reply=VALID, slow_s=1.5) as server:
        server.default = "timeout"
        judge = llm_judge(server, provider, tmp_path, monkeypatch, timeout_s=0.3, max_retries=1)
        t0 = time.perf_counter()
        s = judge.score(request())
        elapsed = time.perf_counter() - t0
        assert s.source == "rule-fallback" and elapsed < 3.0
        deadline = time.perf_counter() + 5  # a retry on a kept-alive connection is read after the slow reply
        while len(server.requests) < 2 and time.perf_counter() < deadline:
            time.sleep(0.05)
        assert len(server.requests) == 2
        assert judge.metrics()["judge/fallbacks"] == 1
        judge.close()


def test_batch_falls_back_only_where_it_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer(reply=VALID, slow_s=1.0) as server:
        judge = llm_judge(server, "openai-compatible", tmp_path, monkeypatch, max_retries=0, concurrency=1)
        server.script.extend(["garbage"])  # the first distinct request fails
        out = judge.score_many([request(passed=0), request(passed=1), request(passed=0)])
        assert out[0].source == "rule-fallback" and out[2] == out[0]  # identical requests are sent once
        assert out[1].source.startswith("openai-compatible") and len(server.requests) == 2
        judge.close()


def test_make_judge_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_judge("rule"), RuleJudge) and isinstance(make_judge(""), RuleJudge)
    with pytest.raises(ExpertError, match="task.actions.judge='bogus:x'"):
        make_judge("bogus:x")
    with pytest.raises(ExpertError, match="OPENAI_API_KEY") as info:
        make_judge("openai:gpt-4o-mini")
    assert "task.actions.judge" in str(info.value)
    register_judge("constant", lambda arg, opts: _Constant(float(arg or 5)))
    try:
        j = make_judge("constant:7")
        assert j.score(request()).task_completion == 7.0
    finally:
        JUDGES.pop("constant", None)


class _Constant(RuleJudge):
    def __init__(self, value: float) -> None:
        super().__init__("constant")
        self.value = value

    def score_many(self, requests):  # type: ignore[override]
        return [JudgeScores(self.value, self.value, self.value, self.value, "constant") for _ in requests]


# ------------------------------------------------------------------------------- in the task reward


def test_llm_judge_scores_reach_the_reward(sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prob = next(p for p in load_action_tasks(bundled_tasks_path()) if p.task_id == "setup-api-app")
    turns = REFERENCE[prob.task_id]
    with ScriptedLLMServer(reply=VALID, slow_s=1.0) as server:
        judge = llm_judge(server, "anthropic", tmp_path, monkeypatch)
        task = ActionsTask(sandbox, judge=judge, root=str(tmp_path / "ws"))
        r1 = task.score_paths([(prob, list(turns[0]), ())])[0]
        assert r1.judge is None and "judge/task_completion" not in r1.components  # not finished yet
        r2 = task.score_paths([(prob, list(turns[1]), (tuple(turns[0]),))])[0]
        assert r2.done and r2.judge is not None and r2.judge.source.startswith("anthropic:")
        assert r2.components["judge/task_completion"] == 8.0 and r2.components["judge/llm"] == 1.0
        w = task.weights
        expected = task.judge_reward * (8 * w["task_completion"] + 7 * w["action_quality"] + 6 * w["efficiency"]
                                        + 5 * w["creativity"]) / (10 * sum(w.values()))
        assert r2.components["judge"] == pytest.approx(expected)
        assert r2.total == pytest.approx(r2.components["actions"] + r2.components["format"] + expected)
        assert task.judgements[-1]["source"].startswith("anthropic:") and task.judgements[-1]["task_completion"] == 8
        server.default = "no scores today"  # the judge fails from now on: the rule-based judge takes over
        other = (turns[0][0], "no action here")
        r3 = task.score_paths([(prob, list(other), ())])[0]
        assert r3.components["format"] == -task.format_penalty
        r4 = task.score_paths([(prob, list(turns[1]), (tuple(other),))])[0]
        assert r4.judge is not None and r4.judge.source == "rule-fallback"
        assert r4.components["judge/llm"] == 0.0 and r4.components["judge/task_completion"] == 10.0
        task.close()


def test_judge_prompt_from_a_file_replaces_the_rubric(sandbox, tmp_path: Path) -> None:
    rubric = ("You grade ops work strictly. Give task_completion, action_quality, efficiency and creativity, "
              "0-10 each, as one JSON object with a rationale.")
    path = tmp_path / "rubric.txt"
    path.write_text(rubric + "\n")
    prob = next(p for p in load_action_tasks(bundled_tasks_path()) if p.task_id == "setup-api-app")
    turns = REFERENCE[prob.task_id]
    with ScriptedLLMServer(reply=VALID) as server:
        cfg = load_config(None, ["task.name=actions", "magrpo.num_agents=2",
                                 f"task.actions.judge=openai-compatible:judge-m@{server.base}/v1",
                                 f"task.actions.judge_prompt={path}", "task.actions.judge_cache_dir=off"])
        task = ActionsTask(sandbox, cfg.task.actions, root=str(tmp_path / "ws"))
        done = task.score_paths([(prob, list(turns[1]), (tuple(turns[0]),))])[0]
        task.close()
        (req,) = server.requests
    messages = req["body"]["messages"]
    assert messages[0] == {"role": "system", "content": rubric}  # the file, not JUDGE_SYSTEM
    assert messages[1]["content"].startswith(f"Task ({prob.pattern}): ")  # the case is unchanged
    assert done.judge is not None and done.judge.source == "openai-compatible:judge-m"


def test_a_registered_provider_judges(sandbox, tmp_path: Path) -> None:
    """`task.actions.judge=<name>:<model>` for a provider a plugin registered with `register_provider` (the judge
    refused every provider but the built-in ones); its client here is the official openai SDK on loopback."""
    prob = next(p for p in load_action_tasks(bundled_tasks_path()) if p.task_id == "setup-api-app")
    turns = REFERENCE[prob.task_id]
    made: list[tuple[str, LLMSettings]] = []
    with ScriptedLLMServer(reply=VALID) as server:
        def acme(model: str, settings: LLMSettings, *, metrics=None) -> OpenAIClient:
            made.append((model, settings))
            return OpenAIClient(model, settings, api_key=None, base_url=server.base_v1, provider="acme",
                                metrics=metrics)

        register_provider("acme", acme)
        try:
            cfg = load_config(None, ["task.name=actions", "magrpo.num_agents=2", "task.actions.judge=acme:judge-m",
                                     "task.actions.judge_max_tokens=123", "task.actions.judge_cache_dir=off"])
            task = ActionsTask(sandbox, cfg.task.actions, root=str(tmp_path / "ws"))
            done = task.score_paths([(prob, list(turns[1]), (tuple(turns[0]),))])[0]
            task.close()
            with pytest.raises(ExpertError, match=r"'nope:m' is not allowed; expected rule, .*local:<path or alias>, "
                                                  r"acme:<model> or a registered judge"):
                make_judge("nope:m")  # the error lists the registered provider
        finally:
            PROVIDER_TABLE.table.pop("acme", None)
        (req,) = server.requests
    [(model, settings)] = made
    assert model == "judge-m" and settings.max_tokens == 123 and settings.cache_dir is None  # the judge's settings
    assert req["body"]["model"] == "judge-m" and req["body"]["messages"][0]["content"] == JUDGE_SYSTEM
    assert done.judge is not None and done.judge.source == "acme:judge-m" and done.judge.task_completion == 8
    assert done.components["judge/llm"] == 1.0 and done.components["judge/task_completion"] == 8.0


@pytest.mark.parametrize("content,message", [
    (None, r"config error: task.actions.judge_prompt: cannot read '.*rubric.txt' \(FileNotFoundError\)$"),
    ("  \n", r"config error: task.actions.judge_prompt: '.*rubric.txt' is empty$"),
    ("Rate it 0-10 as JSON.", r"'.*rubric.txt' never names task_completion, action_quality, efficiency, creativity;"),
])
def test_bad_judge_prompt_files_fail_at_start(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "rubric.txt"
    if content is not None:
        path.write_text(content)
    opts = ActionsTaskConfig(judge="openai-compatible:m@http://127.0.0.1:9/v1", judge_prompt=str(path))
    with pytest.raises(ConfigError, match=message):
        ActionsTask(None, opts, root=str(tmp_path / "ws"))
    with pytest.raises(ConfigError, match="task.actions.judge_prompt=.* expected null with task.actions.judge=rule"):
        load_config(None, ["task.name=actions", "magrpo.num_agents=2", f"task.actions.judge_prompt={path}"])
