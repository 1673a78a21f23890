"""The `tool_agent` task as the tree trainer drives it: config, scoring, next-turn messages."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from comlrl.config.schema import ConfigError, DatasetConfig, load_config
from comlrl.tasks import build_task
from comlrl.tasks.base import Problem
from comlrl.tasks.tool_agent import ToolAgentTask
from comlrl.tasks.tool_agent.task import ToolAgentConfig
from comlrl.tree.rollout import Rollout, TreeShape

ROOT = Path(__file__).resolve().parents[2]
PROMPT = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n    >>> add(2, 3)\n    5\n    """\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-4, 4) == 0\n"
ADD = Problem("X/0", PROMPT, "add", TEST, "    return a + b\n")


def call(code: str) -> str:
    return "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": code}}) + "</tool_call>"


BUGGY = "<think>\nI add the numbers and print a case.\n" + call("def add(a, b):\n    return a - b\n\nprint(add(2, 3))")
FIXED = "The result is wrong, so I flip the sign.\n" + call("def add(a, b):\n    return a + b")
FINAL = "Both tests pass now.\n</think>\n```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```"


@pytest.fixture()
def task(sb) -> ToolAgentTask:
    t = build_task(load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1"]).task, sb)
    assert isinstance(t, ToolAgentTask)
    return t


def test_config_registration_and_validation() -> None:
    cfg = load_config(ROOT / "configs" / "tool_agent_T3_G4.yaml")
    assert cfg.task.name == "tool_agent" and cfg.magrpo.num_agents == 1 and cfg.magrpo.num_turns == 3
    assert cfg.magrpo.num_generations == 4 and cfg.model.name == "smollm2-135m-instruct" and cfg.dataset.name == "easy"
    assert cfg.task.tool_agent == ToolAgentConfig()
    with pytest.raises(ConfigError, match="magrpo.num_agents"):
        load_config(None, ["task.name=tool_agent"])  # N=2 by default
    with pytest.raises(ConfigError, match="task.tool_agent.format_weight"):
        load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1", "task.tool_agent.format_weight=-1"])
    with pytest.raises(ConfigError, match="task.tool_agent.max_output_chars"):
        load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1", "task.tool_agent.max_output_chars=5"])
    with pytest.raises(ConfigError, match="task.tool_agent"):
        load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1", "task.tool_agent.nope=1"])
    task = build_task(load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1",
                                         "task.tool_agent.format_weight=0.2"]).task, None)
    assert task.reward_range == (-0.1, 1.3) and task.num_agents == 1 and task.role_names == ["coder"]
    assert "</tool_call>" in task.stop_strings and "<tool_response>" in task.stop_strings


def test_threshold_is_checked_against_the_tool_reward_range() -> None:
    from comlrl.config.schema import validate_threshold

    cfg = load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1", "magrpo.early_termination_threshold=1.1"])
    validate_threshold(cfg, ToolAgentTask().reward_range)
    cfg.magrpo.early_termination_threshold = 1.2
    with pytest.raises(ConfigError, match="reward range of task tool_agent"):
        validate_threshold(cfg, ToolAgentTask().reward_range)


def test_first_messages_teach_the_format(task: ToolAgentTask) -> None:
    (msgs,) = task.initial_messages(ADD)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "<tool_call>" in msgs[0]["content"] and "<tool_response>" in msgs[0]["content"]
    assert PROMPT.strip() in msgs[1]["content"] and msgs[1]["content"].endswith("Write `add`.")


def test_score_runs_the_round_against_all_tests(task: ToolAgentTask) -> None:
    rewards = task.score([(ADD, [BUGGY]), (ADD, [FIXED]), (ADD, [FINAL]), (ADD, ["no idea"])])
    assert [(r.tests_passed, r.tests_total) for r in rewards] == [(0, 2), (2, 2), (2, 2), (0, 0)]
    assert [r.kind for r in rewards] == ["tool_call", "tool_call", "final", "none"]
    assert rewards[1].total == pytest.approx(1.15) and rewards[1].all_passed and not rewards[0].all_passed
    assert '"stdout": "-1\\n"' in rewards[0].response and '"tests_passed": "0/2"' in rewards[0].response
    assert rewards[3].total == 0.0
    with pytest.raises(ValueError, match="expected 1"):
        task.score([(ADD, [BUGGY, FIXED])])


class ScriptedEngine:
    """Answers round k of every chat with `texts[k]` (k = assistant messages already in the chat)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def generate(self, requests, n, greedy=False):
        return [[SimpleNamespace(text=self.texts[sum(m["role"] == "assistant" for m in msgs)], completion_ids=(1,))]
                * n for _, msgs in requests]

    def report_truncations(self, label: str) -> None:  # as AgentPolicies: no prompt is cut here
        pass


def test_next_messages_continue_the_path_with_real_tool_responses(task: ToolAgentTask) -> None:
    texts = [BUGGY + "\n<tool_response>{\"stdout\": \"5\"}</tool_response>", FIXED, FINAL]
    engine = ScriptedEngine(texts)
    rollout = Rollout(task, task.transition(None), engine, [ADD])  # type: ignore[arg-type]  # the task's own transition
    (root,) = rollout.run(TreeShape(1, 1, 3, "align", None), tag="")
    (chat,) = root.children[0].children[0].messages
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert chat[:2] == task.initial_messages(ADD)[0]
    assert chat[2]["content"] == BUGGY  # the made-up response is stripped
    assert chat[3]["content"].startswith('<tool_response>{"stdout": "-1\\n"') and "0/2 tests pass" in chat[3]["content"]
    assert chat[4]["content"] == FIXED and '"tests_passed": "2/2"' in chat[5]["content"]
    assert "final answer" in chat[5]["content"]
    rewards = [root.details[0], root.children[0].details[0], root.children[0].children[0].details[0]]
    assert [r.total for r in rewards] == [r.total for r in task.score([(ADD, [t]) for t in texts])]
    assert rewards[2].all_passed and not rewards[0].all_passed
    assert rewards[1].scored == ("def add(a, b):\n    return a + b",)


def test_edge_tests_from_dataset_records_and_file(tmp_path: Path, sb) -> None:
    rec = {"task_id": "X/0", "prompt": PROMPT, "entry_point": "add", "test": TEST,
           "edge_tests": ["assert candidate(10**12, 1) == 10**12 + 1"]}
    other = {**rec, "task_id": "X/1", "edge_tests": None}
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(rec) + "\n" + json.dumps(other) + "\n")
    edge = tmp_path / "e.jsonl"
    edge.write_text(json.dumps({"task_id": "X/1", "tests": ["assert candidate(-1, -1) == -2"]}) + "\n")
    cfg = load_config(None, ["task.name=tool_agent", "magrpo.num_agents=1", f"task.tool_agent.edge_tests={edge}"])
    task = build_task(cfg.task, sb)
    train, _ = task.load(DatasetConfig(name="jsonl", path=str(data), eval_size=0))
    assert [task.env.suite(p).sources for p in train] == [("dataset", "dataset", "edge"),
                                                          ("dataset", "dataset", "edge")]
    r = task.score([(train[0], ["</think>\n```python\ndef add(a, b):\n    return a + b\n```"])])[0]
    assert (r.tests_passed, r.tests_total) == (3, 3)
