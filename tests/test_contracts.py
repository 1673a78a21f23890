"""The contracts of comlrl/tree/contracts.py: every shipped task, reward and transition satisfies its own, the
environment state of a path lives on the tree's nodes, and the trainer calls only declared members."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from comlrl.config.schema import DatasetConfig, load_config
from comlrl.tasks import build_task
from comlrl.tasks.actions import ActionsTask, bundled_tasks_path
from comlrl.tasks.actions.options import ActionsTaskConfig
from comlrl.tasks.code.feedback import FeedbackBridge
from comlrl.tasks.datasets import load_easy
from comlrl.tree.contracts import Reward, Task, TaskDefaults, Transition
from comlrl.tree.rollout import Rollout, TreeShape
from feedback.results import AgentAnalysis, CodeResults
from sandbox.results import ExecResult

ROOT = Path(__file__).resolve().parents[1]
ADD = next(p for p in load_easy() if p.entry_point == "add")
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
DONE = 'All done.\n```json\n{"action": "complete_task", "parameters": {"summary": "The request is met."}}\n```'


@pytest.fixture(scope="module")
def sandbox() -> Iterator:
    from sandbox.executor import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box


@pytest.mark.parametrize("module", ["run/trainer.py", "run/components.py", "learn/update.py", "learn/learner.py",
                                    "tree/rollout.py", "run/metrics.py", "run/evaluation.py"])
def test_the_trainer_calls_declared_members_only(module: str) -> None:
    """It probed `score_paths`, `build_next_messages`, `metrics` and `all_passed` with getattr (the trainer's
    modules: the loop, what a run is built from, the update)."""
    source = (ROOT / "comlrl" / module).read_text()
    assert "getattr(" not in source and "hasattr(" not in source


FEEDBACK_MODULES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "feedback").rglob("*.py"))


@pytest.mark.parametrize("module", FEEDBACK_MODULES)
def test_feedback_reads_declared_members_only(module: str) -> None:
    """The modes read the reward's `CodeResults` and the `ExternalConfig` by attribute; they probed both with
    getattr/hasattr and defaults (44 calls). No third-party API in feedback/ needs a probe."""
    calls = [n for n in ast.walk(ast.parse((ROOT / module).read_text())) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")]
    assert [f"{module}:{c.lineno}" for c in calls] == []


SHIPPED = ("code_collab", "code_coop", "code_single", "tool_agent", "actions")


def test_every_shipped_task_is_a_task_with_a_transition(sandbox) -> None:
    bridge = FeedbackBridge(load_config(None, ["external.mode=plain"]).external)
    assert isinstance(bridge, Transition)
    for name in SHIPPED:  # not TASKS: other tests register plugin tasks into it in this process
        task = build_task(name, sandbox)
        try:
            assert isinstance(task, Task), name
            own = task.transition(bridge)
            assert isinstance(own, Transition), name
            # code tasks use the configured feedback mode; environment tasks bring their own next turns
            assert (own is bridge) == name.startswith("code_"), name
            assert all(isinstance(v, int | float) for v in task.metrics().values()), name
        finally:
            task.close()


def _check_reward(reward: object, num_agents: int) -> None:
    assert isinstance(reward, Reward)
    assert isinstance(reward.total, float) and isinstance(reward.all_passed, bool)
    assert all(isinstance(v, float) for v in reward.components.values())
    assert isinstance(reward.notes, tuple)
    assert len(reward.scored) == num_agents and all(isinstance(s, str) for s in reward.scored)


def test_code_rewards_satisfy_the_reward_contract(sandbox) -> None:
    single = build_task("code_single", sandbox).score([(ADD, [RIGHT]), (ADD, ["no code"])])
    for r in single:
        _check_reward(r, 1)
    assert single[0].all_passed and single[0].scored == ("def add(a, b):\n    return a + b\n",)
    assert not single[1].all_passed
    (collab,) = build_task("code_collab", sandbox).score([(ADD, ["```python\ndef aux(a, b):\n    return a + b\n```",
                                                                 "```python\ndef add(a, b):\n"
                                                                 "    return aux(a, b)\n```"])])
    _check_reward(collab, 2)
    assert collab.all_passed and "return aux(a, b)" in collab.scored[1]


def test_code_rewards_are_what_the_feedback_modes_read(sandbox) -> None:
    """`CodeReward` satisfies feedback's `CodeResults` (declared in feedback/, which may not import the tasks)."""
    single = build_task("code_single", sandbox).score([(ADD, [RIGHT]), (ADD, ["def add(a, b)\n    return"])])
    (collab,) = build_task("code_collab", sandbox).score([(ADD, ["def aux(a, b):\n    return a + b",
                                                                 "def add(a, b):\n    return aux(a, b)"])])
    members = {name for name, v in vars(CodeResults).items() if isinstance(v, property)}
    assert members == {"analyses", "tests_passed", "tests_total", "helper_called", "helper_result_used",
                       "thin_wrapper", "exec", "notes"}
    for reward in (*single, collab):
        assert isinstance(reward, CodeResults)
        assert all(isinstance(a, AgentAnalysis) for a in reward.analyses)
        assert isinstance(reward.exec, ExecResult | None)
    assert single[0].exec is not None and single[0].exec.all_passed and single[1].exec is None  # did not compile
    assert single[1].analyses[0].syntax_error is not None and collab.helper_called and collab.thin_wrapper


def test_tool_agent_rewards_satisfy_the_reward_contract(sandbox) -> None:
    call = "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": "def add(a, b):\n    return a + b"}})
    ran, idle = build_task("tool_agent", sandbox).score([(ADD, [call + "</tool_call>"]), (ADD, ["no idea"])])
    _check_reward(ran, 1)
    _check_reward(idle, 1)
    assert ran.all_passed and ran.scored == ("def add(a, b):\n    return a + b",) and idle.scored == ("",)


def test_action_rewards_satisfy_the_reward_contract(sandbox, tmp_path: Path) -> None:
    task = ActionsTask(sandbox, ActionsTaskConfig(max_turns=3), root=str(tmp_path / "ws"))
    problem = json.loads(bundled_tasks_path().read_text().splitlines()[0])["task_id"]
    (prob,) = [p for p in task.load(DatasetConfig(eval_size=0))[0] if p.task_id == problem]
    (reward,) = task.score([(prob, [DONE, "nothing"])])
    task.close()
    _check_reward(reward, 2)
    assert reward.scored == ("complete_task ok", "") and reward.done


@dataclass(frozen=True)
class Tally:
    """A reward record of the toy environment below."""

    total: float
    components: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    scored: tuple[str, ...] = ()
    all_passed: bool = False


class Journal(TaskDefaults):
    """A toy environment task: the state is the texts of the path so far, the reward its length."""

    num_agents = 1
    role_names = ["writer"]
    reward_range = (0.0, 10.0)

    def __init__(self) -> None:
        self.acted_on: list[tuple[str, ...]] = []

    def load(self, dataset_cfg):  # noqa: ANN001, ANN201
        return [], []

    def initial_messages(self, problem):  # noqa: ANN001, ANN201
        return [[{"role": "user", "content": problem}]]

    def role_instructions(self, agent: int) -> str:
        return "write"

    def score(self, items):  # noqa: ANN001, ANN201
        raise AssertionError("the trainer scores through score_turns")

    def initial_state(self, problem):  # noqa: ANN001, ANN201
        return ()

    def score_turns(self, turns):  # noqa: ANN001, ANN201
        self.acted_on.extend(t.state for t in turns)
        return [(Tally(float(len(t.state) + 1)), (*t.state, t.texts[0])) for t in turns]

    def transition(self, configured: Transition) -> Transition:
        return self

    def next_messages(self, task, paths):  # noqa: ANN001, ANN201
        return [[[{"role": "user", "content": " | ".join(c.state)}]] for c in paths]


class Numbered:
    """Sample k of every request is the text `g<k>`."""

    def generate(self, requests, n, greedy=False):  # noqa: ANN001, ANN201
        return [[SimpleNamespace(text=f"g{k}", completion_ids=(1,)) for k in range(n)] for _ in requests]

    def report_truncations(self, label: str) -> None:  # as AgentPolicies: no prompt is cut here
        pass


def test_each_turn_acts_on_the_state_its_parent_joint_action_left() -> None:
    task = Journal()
    engine = Numbered()
    (root,) = Rollout(task, task, engine, ["p"]).run(TreeShape(1, 2, 3, "align", None), tag="")
    assert root.state == () and root.next_states == [("g0",), ("g1",)]
    child = root.children[1]
    assert child.state == ("g1",) and child.messages == [[{"role": "user", "content": "g1"}]]
    leaf = child.children[0]
    assert leaf.state == ("g1", "g0") and leaf.next_states == [("g1", "g0", "g0"), ("g1", "g0", "g1")]
    assert root.rewards == [1.0, 1.0] and child.rewards == [2.0, 2.0] and leaf.rewards == [3.0, 3.0]
    assert task.acted_on == [(), ()] + [(f"g{i}",) for i in (0, 0, 1, 1)] + [
        (f"g{i}", f"g{j}") for i in (0, 1) for j in (0, 1) for _ in (0, 1)]


def test_a_rollout_names_each_tree_by_its_problems_id() -> None:
    """trees.jsonl could not say which problem a tree was about (issue 36, item 15): the rollout puts the task's
    `problem_id` of each problem on its tree's root (a HumanEval-format problem: its task_id; a problem the
    task knows no id of: None)."""
    from comlrl.tree.contracts import Problem

    task = Journal()
    problem = Problem("HumanEval/3", "def f():", "f", "def check(c): pass")
    roots = Rollout(task, task, Numbered(), [problem, "plain text"]).run(TreeShape(1, 2, 2, "align", None), tag="")
    assert [root.problem for root in roots] == ["HumanEval/3", None]


def test_every_task_names_its_problems_by_their_task_id() -> None:
    """Each problem type of the shipped tasks has a `task_id`; each task gives it as the problem's id, and a
    centralized team gives its inner task's."""
    from comlrl.tasks.actions.taskfile import ActionProblem
    from comlrl.tasks.bfcl.data import BfclProblem
    from comlrl.tasks.bfcl.multi_turn import BfclMultiTurnTask
    from comlrl.tasks.bfcl.task import BfclTask
    from comlrl.tasks.centralized import CentralizedTask
    from comlrl.tasks.text import TextProblem, TextTask, TextTaskConfig

    text = TextTask(TextTaskConfig())
    bfcl = BfclProblem("simple_python_3", "simple_python", (), (), ())
    cases = [(text, TextProblem("row-7", "Write a haiku.")), (CentralizedTask(text), TextProblem("row-7", "Hi")),
             (BfclTask(), bfcl), (CentralizedTask(BfclTask()), bfcl), (BfclMultiTurnTask(), bfcl),
             (ActionsTask(), ActionProblem("greet-1", "edit", "say hi", "Say hi.", "edit")),
             (build_task("code_single", None), ADD)]
    assert [task.problem_id(problem) for task, problem in cases] == [
        "row-7", "row-7", "simple_python_3", "simple_python_3", "simple_python_3", "greet-1", ADD.task_id]


def test_the_required_task_protocol_has_at_most_ten_members() -> None:
    """Issue point 5: one small protocol every task implements; every other ability is an opt-in protocol."""
    from comlrl.tree import contracts

    own = {n for n in vars(Task) if not n.startswith("_")} | set(Task.__annotations__)
    assert own == set(contracts.TASK_MEMBERS) and len(own) <= 10
    assert set(Task.__abstractmethods__) == {"load", "initial_messages", "score_joint"}
    opt_in = (contracts.Scoring, contracts.Prompting, contracts.EnvironmentState, contracts.ProblemInfo,
              contracts.Counts, contracts.Configured, contracts.SplitRoles, contracts.FeedbackPrompts)
    for protocol in opt_in:  # no opt-in protocol redeclares a required member but `score_joint`'s default
        assert not issubclass(protocol, Task)
        assert set(vars(protocol)) & set(contracts.TASK_MEMBERS) <= {"score_joint", "num_agents", "role_names"}
    assert all(issubclass(TaskDefaults, p) for p in opt_in if p is not contracts.FeedbackPrompts)


class Minimal(Task):
    """A task of the required protocol alone: two turns whose reward is the path's length."""

    num_agents = 1
    role_names = ["writer"]
    reward_range = (0.0, 10.0)

    def load(self, dataset_cfg):  # noqa: ANN001, ANN201
        return ["p"], []

    def initial_messages(self, problem):  # noqa: ANN001, ANN201
        return [[{"role": "user", "content": problem}]]

    def score_joint(self, turns):  # noqa: ANN001, ANN201
        return [(Tally(float(t.turn)), (*(t.state or ()), t.texts[0])) for t in turns]

    def transition(self, configured: Transition) -> Transition:
        return self  # type: ignore[return-value]

    def next_messages(self, task, paths):  # noqa: ANN001, ANN201
        return [[[{"role": "user", "content": " | ".join(c.state)}]] for c in paths]


def test_a_task_of_the_required_protocol_alone_runs_a_rollout() -> None:
    """No opt-in protocol is needed: no answer prefix, no environment to release, no problem id."""
    from comlrl.tree.contracts import Counts, FeedbackPrompts, Prompting

    task = Minimal()
    assert not isinstance(task, Prompting | Counts | FeedbackPrompts)
    train, _ = task.load(None)
    (root,) = Rollout(task, task.transition(None), Numbered(), train).run(TreeShape(1, 2, 2, "align", None), tag="")
    assert root.problem is None and root.state is None and root.messages == [[{"role": "user", "content": "p"}]]
    assert root.rewards == [1.0, 1.0] and root.next_states == [("g0",), ("g1",)]
    assert root.children[1].messages == [[{"role": "user", "content": "g1"}]]
    assert root.children[1].rewards == [2.0, 2.0]
    task.close()
