"""Who labels a preference round's pairs (`algorithm.dpo.comparator`, `algorithm.marlhf.comparator`).

`task` needs no judge: the task's returns rank the siblings (comlrl.learn.preference). The others judge two
answers to the same task, each pair asked in both orders so that a judge's taste for the first (or second)
position cannot decide it:

- `llm:<spec>`: a chat model (any comlrl.llm spec: an API, an OpenAI-compatible or Ollama server, a local
  transformers model) replies A or B; a pair is labeled only when both orders agree.
- `policy`: the current policy judges: the log-prob it gives the reply "A" against "B", summed over both
  orders (x first minus x second); a pair is labeled unless the two are exactly equal.
- `checkpoint`: the same, by the policy the run started from (its reference: the base without adapters, or
  the frozen initial weights). A later saved policy judges as `llm:local:<dir>` once merged (comlrl-export).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from comlrl.learn.learner import Learner
    from comlrl.llm.client import ChatClient

JUDGE_SYSTEM = ("You compare two answers to the same task. Reply with one letter: A if answer A is better, "
                "B if answer B is better.")


@dataclass(frozen=True)
class JudgeItem:
    """Two answers to one task; `agent` is whose policy judges (policy and checkpoint comparators)."""

    agent: int
    question: str
    first: str
    second: str


def judge_messages(question: str, a: str, b: str) -> list[dict[str, str]]:
    """The chat a judge answers with A or B."""
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"Task:\n{question}\n\nAnswer A:\n{a}\n\nAnswer B:\n{b}\n\n"
                                        "Which answer is better? Reply A or B."}]


_LEAD = re.compile(r"^\W*(?:(?i:answer)\s*)?([AB])\b")  # the letters are capitals: "a better one" is no verdict
_NAMED = re.compile(r"\b(?i:answer)\s*([AB])\b")


def parse_verdict(text: str) -> str | None:
    """"A" or "B" from a judge's reply: the letter it opens with ("B", "**A**.", "Answer B"), else the first
    "answer A/B" it names; None when it names neither (or both first)."""
    m = _LEAD.match(text or "")
    if m is not None:
        return m.group(1)
    named = set(_NAMED.findall(text or ""))
    return named.pop() if len(named) == 1 else None


def both_orders(first_order: str | None, second_order: str | None) -> int | None:
    """+1: the first answer preferred (A when shown first, B when shown second), -1: the second, None: the
    two verdicts disagree (position, not content, decided) or one is missing."""
    if first_order == "A" and second_order == "B":
        return 1
    if first_order == "B" and second_order == "A":
        return -1
    return None


class Comparator(ABC):
    """Labels pairs: for each item +1 (its first answer preferred), -1 (the second) or None (undecided)."""

    name: str

    @abstractmethod
    def prefer(self, items: Sequence[JudgeItem]) -> list[int | None]: ...


class ChatComparator(Comparator):
    """`llm:<spec>`: a chat model judges each pair in both orders (concurrently; identical asks sent once)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.name = f"llm:{client.spec}"

    def prefer(self, items: Sequence[JudgeItem]) -> list[int | None]:
        asks = [m for it in items for m in (judge_messages(it.question, it.first, it.second),
                                            judge_messages(it.question, it.second, it.first))]
        replies = self.client.complete_many(asks, parse_verdict, counter_prefix="comparator") if asks else []
        return [both_orders(replies[2 * i], replies[2 * i + 1]) for i in range(len(items))]


class PolicyComparator(Comparator):
    """`policy` (the current weights) or `checkpoint` (`reference`: the run's initial policy): the judge's
    log-prob of replying "A" against "B", in both orders."""

    def __init__(self, learner: Learner, reference: bool) -> None:
        self.learner = learner
        self.reference = reference
        self.name = "checkpoint" if reference else "policy"

    def prefer(self, items: Sequence[JudgeItem]) -> list[int | None]:
        pol = self.learner.policies
        samples = [pol.sample_of(it.agent, msgs, letter) for it in items
                   for msgs in (judge_messages(it.question, it.first, it.second),
                                judge_messages(it.question, it.second, it.first)) for letter in ("A", "B")]
        lp = self.learner.sequence_logprobs(samples, reference=self.reference)
        out: list[int | None] = []
        for i in range(len(items)):
            a1, b1, a2, b2 = lp[4 * i:4 * i + 4]
            score = (a1 - b1) - (a2 - b2)  # > 0: the first answer is preferred in both positions together
            out.append(1 if score > 0 else -1 if score < 0 else None)
        return out


def make_comparator(spec: str, learner: Learner | None, key: str, resolve_local=None) -> Comparator | None:
    """The comparator `spec` names (None for `task`), built at start-up so a bad spec fails there."""
    if spec == "task":
        return None
    if spec in ("policy", "checkpoint"):
        if learner is None:
            raise RuntimeError(f"{key}={spec} needs the trained policy")
        return PolicyComparator(learner, reference=spec == "checkpoint")
    from comlrl.llm.factory import make_client
    from comlrl.llm.reach import check_reachable
    from comlrl.llm.settings import LLMSettings

    # a verdict is a letter: a short reply, greedy
    settings = LLMSettings(max_tokens=16, temperature=0.0)
    client = make_client(spec.removeprefix("llm:"), settings, key=key, resolve_local=resolve_local)
    check_reachable(client.endpoint, key)  # a judge server that is down: one line at start-up
    return ChatComparator(client)
