"""`--env.request_logprobs true` against a server that returns none is said once (issue 69, point 11): the
groups then go without log-probs and the trainer recomputes them, which the user asked to avoid."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("atroposlib")

from comlrl.integrations.atropos import common  # noqa: E402
from comlrl.integrations.atropos.common import ProblemEnvConfig, warn_if_no_logprobs  # noqa: E402


def _choice(logprobs: list[float] | None) -> SimpleNamespace:
    content = None if logprobs is None else [SimpleNamespace(logprob=x) for x in logprobs]
    return SimpleNamespace(logprobs=SimpleNamespace(content=content))


def test_missing_logprobs_are_said_once_per_server_when_asked_for(caplog, monkeypatch) -> None:
    monkeypatch.setattr(common, "_WARNED_NO_LOGPROBS", set())
    asked, not_asked = ProblemEnvConfig(request_logprobs=True), ProblemEnvConfig(request_logprobs=False)
    with caplog.at_level(logging.WARNING, logger="comlrl.integrations.atropos"):
        assert not warn_if_no_logprobs(not_asked, [_choice(None)], "s1")  # not asked for: nothing to say
        assert not warn_if_no_logprobs(asked, [_choice([-0.1, -0.2])], "s1")  # returned: nothing to say
        assert warn_if_no_logprobs(asked, [_choice(None), _choice(None)], "s1")
        assert not warn_if_no_logprobs(asked, [_choice(None)], "s1")  # once per server
        assert warn_if_no_logprobs(asked, [_choice(None)], "s2")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and lines[0].startswith("env.request_logprobs is true but s1 returned no log-probs")
