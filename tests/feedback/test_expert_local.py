"""`local:` experts: a transformers model on this machine, resolved by the caller's resolver."""

from __future__ import annotations

import fb_cases as cases
import pytest

from comlrl.config.schema import ExternalConfig
from feedback import ExpertError, FeedbackMetrics, build_next_messages, make_expert


def _models():
    try:
        from comlrl import models
    except ImportError:  # pragma: no cover - comlrl/models.py is built by another issue
        pytest.skip("comlrl.models does not exist yet: no resolver for the tiny-random alias")
    return models


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Two threads on a busy 2-core machine collapse; one barely slows down (see notes/cpu-stack.md)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _cfg(spec: str, **kw: object) -> ExternalConfig:
    base: dict[str, object] = dict(mode="expert_edits", expert_edits_model=spec, expert_max_tokens=24,
                                   expert_max_retries=1, expert_cache_dir="off", expert_timeout_s=60.0)
    base.update(kw)
    return ExternalConfig(**base)  # type: ignore[arg-type]


def test_local_tiny_random_expert_runs_and_falls_back_when_it_talks_nonsense():
    models = _models()
    cfg = _cfg("local:tiny-random")
    m = FeedbackMetrics()
    expert = make_expert(cfg.expert_edits_model, cfg, resolve_local=models.resolve_model_path, metrics=m)
    ctxs = [cases.context("failing"), cases.context("syntax")]
    out = build_next_messages(ctxs, cfg, expert=expert, metrics=m)
    expert.close()
    assert len(out) == 2 and all(len(per_agent) == 2 for per_agent in out)
    s = m.snapshot()
    assert s["expert/calls"] >= 2 and s["expert/output_tokens"] > 0
    assert s["expert/input_tokens"] > 100 and s["expert/cost_usd"] == 0.0
    # random weights almost never write the JSON asked for: whatever happened, every joint action got prompts
    assert s["expert/fallbacks"] + s["prompts/expert_edits"] == 2


def test_local_expert_takes_a_plain_directory_without_a_resolver():
    models = _models()
    path = models.resolve_model_path("tiny-random")
    expert = make_expert(f"local:{path}", _cfg(f"local:{path}"), metrics=FeedbackMetrics())
    reply = expert._call([{"role": "user", "content": "Say hi."}])
    expert.close()
    assert isinstance(reply.text, str) and reply.output_tokens >= 1


def test_local_expert_with_a_bad_path_fails_at_construction(tmp_path):
    with pytest.raises(ExpertError, match="is not a local model directory"):
        make_expert(f"local:{tmp_path / 'nope'}", _cfg("local:x"))

    def resolver(name: str) -> str:
        raise ValueError(f"unknown alias {name}")

    with pytest.raises(ExpertError, match="unknown alias mystery"):
        make_expert("local:mystery", _cfg("local:mystery"), resolve_local=resolver)


@pytest.mark.slow
@pytest.mark.embedded
def test_local_embedded_model_expert_edits_end_to_end():
    """The embedded SmolLM2-135M as expert, two turns' worth of joint actions, on CPU."""
    models = _models()
    cfg = _cfg("local:smollm2-135m-instruct", expert_max_tokens=64, expert_max_retries=0)
    m = FeedbackMetrics()
    expert = make_expert(cfg.expert_edits_model, cfg, resolve_local=models.resolve_model_path, metrics=m)
    out = build_next_messages([cases.context(c) for c in ("passing", "failing", "syntax")], cfg, expert=expert,
                              metrics=m)
    expert.close()
    assert len(out) == 3
    assert m.get("expert/calls") == 3 and m.get("expert/output_tokens") > 0
    assert m.get("expert/fallbacks") + m.get("prompts/expert_edits") == 3


def test_a_greedy_local_expert_is_asked_once_and_the_log_says_so(caplog):
    """It logged 'attempt 1/4' and stopped after one: a greedy model repeats an unusable reply, so one
    attempt is all there is, whatever external.expert_max_retries says."""
    models = _models()
    cfg = _cfg("local:tiny-random", expert_max_retries=3)
    m = FeedbackMetrics()
    expert = make_expert(cfg.expert_edits_model, cfg, resolve_local=models.resolve_model_path, metrics=m)
    with caplog.at_level("WARNING"):
        build_next_messages([cases.context("failing")], cfg, expert=expert, metrics=m)
    expert.close()
    s = m.snapshot()
    assert s["expert/calls"] == s["expert/requests"] == 1 and s["expert/retries"] == 0
    if s["expert/fallbacks"]:
        assert "attempt 1/1 gave no parseable edits" in caplog.text and "/4" not in caplog.text
