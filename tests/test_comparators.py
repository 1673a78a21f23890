"""Comparators of preference rounds (comlrl.run.comparators): a judge's reply read as A or B, both orders asked
and agreeing, a chat judge behind a real OpenAI-compatible HTTP server on loopback (the official SDK), and the
policy judge's arithmetic on scripted log-probs (the real policy judges in tests/trainer/test_preference_rounds.py)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pytest
from llm_server import JudgeServer

from comlrl.llm.errors import LLMError
from comlrl.run.comparators import (
    ChatComparator,
    JudgeItem,
    PolicyComparator,
    both_orders,
    judge_messages,
    make_comparator,
    parse_verdict,
)

GOOD = "def add(a, b):\n    return a + b"
BAD = "def add(a, b):\n    pass"


@pytest.mark.parametrize(("reply", "verdict"), [
    ("A", "A"), ("B", "B"), (" B.", "B"), ("**A**", "A"), ("Answer B", "B"), ("answer A is better", "A"),
    ("I prefer answer B: it returns the sum.", "B"),  # no leading letter: the one answer it names
    ("Both answer A and answer B work", None),  # names both: no verdict
    ("a better answer is the second", None),  # lower-case a is an article, not a verdict
    ("", None), ("C", None), ("Neither", None),
])
def test_a_reply_is_read_as_a_or_b_or_nothing(reply, verdict):
    assert parse_verdict(reply) == verdict


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("A", "B", 1),  # the first answer won in both positions
    ("B", "A", -1),  # the second answer won in both positions
    ("A", "A", None),  # always the answer shown first: position decided, not content
    ("B", "B", None),
    ("A", None, None), (None, None, None),
])
def test_a_pair_is_labeled_only_when_both_orders_agree(first, second, expected):
    assert both_orders(first, second) == expected


def test_the_judge_sees_the_task_and_both_answers_labeled():
    msgs = judge_messages("Write add.", GOOD, BAD)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert user.index("Write add.") < user.index("Answer A:\n" + GOOD) < user.index("Answer B:\n" + BAD)
    assert user.endswith("Reply A or B.")


def test_a_chat_judge_labels_by_content_and_leaves_position_ties_undecided():
    items = [JudgeItem(0, "Write add.", GOOD, BAD), JudgeItem(1, "Write add.", BAD, GOOD),
             JudgeItem(0, "Write add.", GOOD, GOOD + " "), JudgeItem(0, "Write add.", BAD, BAD + " ")]
    with JudgeServer() as server:
        judge = make_comparator(f"llm:openai-compatible:judge@{server.base_v1}", None, "algorithm.dpo.comparator")
        assert isinstance(judge, ChatComparator) and judge.name.startswith("llm:openai-compatible:judge")
        assert judge.prefer(items) == [1, -1, None, None]  # both good / both bad: A then A, undecided
        # each item asked in both orders, an identical ask sent once: items 0 and 1 show the same two answers
        assert len(server.requests) == 6
        shown = [r["body"]["messages"][-1]["content"] for r in server.requests]
        assert sum(f"Answer A:\n{GOOD}\n\nAnswer B:\n{BAD}\n" in s for s in shown) == 1
        assert all(r["body"]["max_tokens"] == 16 and r["body"]["temperature"] == 0.0 for r in server.requests)
    with JudgeServer(biased=True) as server:
        judge = make_comparator(f"llm:openai-compatible:judge@{server.base_v1}", None, "algorithm.dpo.comparator")
        assert judge.prefer(items[:2]) == [None, None]  # a judge that always picks A labels nothing


def test_a_bad_llm_spec_or_missing_key_fails_at_start_in_one_line(monkeypatch):
    with pytest.raises(LLMError, match=r"algorithm\.marlhf\.comparator='nope:x' is not allowed"):
        make_comparator("llm:nope:x", None, "algorithm.marlhf.comparator")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError) as err:
        make_comparator("llm:openai:gpt-4o-mini", None, "algorithm.dpo.comparator")
    assert "OPENAI_API_KEY" in str(err.value) and "\n" not in str(err.value)
    assert "OPENAI_API_KEY" not in os.environ


def test_task_needs_no_judge():
    assert make_comparator("task", None, "algorithm.dpo.comparator") is None


@dataclass
class _Sample:
    agent: int
    messages: list
    letter: str


class _Policies:
    def sample_of(self, agent: int, messages: list, text: str) -> _Sample:
        return _Sample(agent, messages, text)


class ScriptedLearner:
    """Log-probs by rule: the judge leans toward "A" by `position` nats, and toward the answer holding
    `return` by `content` nats; `reference` is recorded."""

    def __init__(self, position: float, content: float) -> None:
        self.policies, self.position, self.content, self.calls = _Policies(), position, content, []

    def sequence_logprobs(self, samples: list[_Sample], reference: bool = False) -> list[float]:
        self.calls.append((len(samples), reference))
        out = []
        for s in samples:
            text = s.messages[-1]["content"]
            a = re.search(r"Answer A:\n(.*?)\n\nAnswer B:", text, re.S).group(1)
            b = re.search(r"Answer B:\n(.*?)\n\nWhich answer", text, re.S).group(1)
            lean = self.position + self.content * (("return" in a) - ("return" in b))
            out.append(-1.0 + (lean / 2 if s.letter == "A" else -lean / 2))
        return out


def test_the_policy_judge_cancels_its_position_bias_over_both_orders():
    """(lp A - lp B) shown x first, minus the same shown x second: the position term (3 nats toward A)
    cancels and the content term (0.5 nats) decides, however strong the bias."""
    learner = ScriptedLearner(position=3.0, content=0.5)
    judge = PolicyComparator(learner, reference=False)  # type: ignore[arg-type]
    items = [JudgeItem(0, "Write add.", GOOD, BAD), JudgeItem(1, "Write add.", BAD, GOOD),
             JudgeItem(0, "Write add.", GOOD, GOOD + " ")]
    assert judge.prefer(items) == [1, -1, None]  # equal content: exactly tied, undecided
    assert learner.calls == [(12, False)]  # 4 log-probs per item (A and B in both orders), one batch
    ref = ScriptedLearner(position=-2.0, content=0.1)
    checkpoint = PolicyComparator(ref, reference=True)  # type: ignore[arg-type]
    assert checkpoint.name == "checkpoint" and checkpoint.prefer(items[:2]) == [1, -1]
    assert ref.calls == [(8, True)]  # the run's initial policy judges
