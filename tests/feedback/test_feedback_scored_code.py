"""Feedback shows the code the reward scored, even where a naive "first fence" reading would differ.

Regression: the next-turn prompt used to show the first fenced block of each response while the reward
scored the code extracted by `comlrl.tasks.code.extract`, so a response with a usage call after its
function (or a second block) was shown with code that never ran. Real task, real sandbox, real bridge.
"""

from __future__ import annotations

import pytest

from comlrl.tasks import CodeCollabTask, TextTask, ToolAgentTask
from comlrl.tasks.base import FeedbackPrompts, Problem
from comlrl.tasks.code.common import path_codes
from comlrl.tasks.code.feedback import FeedbackBridge
from comlrl.tasks.text import TextTaskConfig
from comlrl.tree.contracts import Continuation
from comlrl.tree.nodes import Node
from feedback import ExternalConfig
from sandbox.executor import Sandbox, SandboxUnavailable

PROMPT = 'def sum_of_squares(xs: list[int]) -> int:\n    """Return the sum of the squares of xs."""\n'
TEST = ("def check(candidate):\n    assert candidate([1, 2, 3]) == 14\n    assert candidate([]) == 0\n"
        "    assert candidate([-2]) == 4\n")
PROBLEM = Problem("easy/sum_of_squares", PROMPT, "sum_of_squares", TEST)
# The first fence holds a usage line (dropped by the extractor: it would run before the tests); the
# helper's first fence is a stub, its real definition comes in a second block.
HELPER = ("```python\ndef aux(x):\n    pass\n```\nBetter:\n```python\ndef aux(x):\n    return x * x\n```")
MAIN = ("```python\ndef sum_of_squares(xs):\n    return sum(aux(x) for x in xs)\n\n"
        "print(sum_of_squares([1, 2, 3]))\n```")


@pytest.fixture(scope="module")
def scored():
    task = CodeCollabTask()
    try:
        with Sandbox(workers=1, timeout_s=10.0) as sb:
            task.sandbox = sb
            (reward,) = task.score([(PROBLEM, [HELPER, MAIN])])
    except SandboxUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no usable sandbox here: {exc}")
    return task, reward


@pytest.mark.parametrize("mode", ["level_feedback", "plain"])
def test_feedback_shows_the_code_the_reward_scored(scored, mode):
    task, reward = scored
    helper_code, main_code = task.agent_codes(PROBLEM, [HELPER, MAIN])
    assert "print(" not in main_code and "pass" not in helper_code  # the two readings really disagree
    assert reward.all_passed  # the scored code is the real answer
    bridge = FeedbackBridge(ExternalConfig(mode=mode))
    node = Node(id="0", turn=1, root=0, messages=[], details=[reward])
    (messages,) = bridge.next_messages(task, [Continuation(PROBLEM, node, 0, [[HELPER], [MAIN]])])
    for agent, prompt in enumerate(messages):
        user = prompt[-1]["content"]
        for code in (helper_code, main_code):  # own latest code and the teammate's
            assert f"```python\n{code.strip(chr(10))}\n```" in user, (agent, user)
        assert "print(sum_of_squares" not in user
        assert "    pass" not in user


def test_path_codes_take_the_scored_code_last_and_extract_earlier_turns(scored):
    task, reward = scored
    old_main = "```python\ndef sum_of_squares(xs):\n    return 0\n\nprint(sum_of_squares([]))\n```\nDone."
    codes = path_codes([["def aux(x):\n    return x", HELPER], [old_main, MAIN]], reward)
    assert codes == [["def aux(x):\n    return x\n", reward.codes[0]],
                     ["def sum_of_squares(xs):\n    return 0\n", reward.codes[1]]]
    assert list(reward.codes) == list(task.agent_codes(PROBLEM, [HELPER, MAIN]))
    with pytest.raises(ValueError, match="scored 2 agents' code, the history has 1"):
        path_codes([[MAIN]], reward)


def test_only_a_code_task_shows_scored_code(scored):
    """The feedback adapter asks the task what a prompt shows (`FeedbackPrompts.shown_codes`): a code task the
    code its reward scored, or for a reward without code the responses as written (None); the environment and
    text tasks build their own next turns and do not implement `FeedbackPrompts` at all."""
    task, reward = scored
    history = [[HELPER], [MAIN]]
    assert task.shown_codes(history, reward) == path_codes(history, reward)
    assert task.shown_codes(history, object()) is None
    assert isinstance(task, FeedbackPrompts)
    assert not isinstance(ToolAgentTask(), FeedbackPrompts)
    assert not isinstance(TextTask(TextTaskConfig()), FeedbackPrompts)
