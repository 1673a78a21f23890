"""Reward functions as TRL users write them (`task.reward_funcs`): called with prompts, completions and the
row's columns, weighted, added to any task's reward, kept as components, logged per turn (issue 24, item B)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import reward_fns

from comlrl.config.schema import ConfigError, load_config
from comlrl.run.metrics import turn_means, turn_sums
from comlrl.tasks import build_task
from comlrl.tasks.reward_funcs import RewardFunctionError
from comlrl.tree.contracts import JointTurn
from comlrl.tree.nodes import Node

ROOT = Path(__file__).resolve().parents[2]

ADD = "```python\ndef add(a, b):\n    return a + b\n```"


@pytest.fixture(scope="module")
def sb():
    from sandbox.executor import Sandbox

    with Sandbox(workers=1) as box:
        yield box


def _code(funcs: list[str], weights: str | None = None, task: str = "code_single", sandbox=None):
    over = [f"task.name={task}", f"magrpo.num_agents={1 if task == 'code_single' else 2}",
            f"task.reward_funcs=[{','.join(funcs)}]"] + ([f"task.reward_weights={weights}"] if weights else [])
    cfg = load_config(None, over)
    task_obj = build_task(cfg.task, sandbox)
    add = next(p for p in task_obj.load(cfg.dataset)[0] + task_obj.load(cfg.dataset)[1] if p.entry_point == "add")
    return task_obj, add


def test_code_task_keeps_its_sandbox_reward_and_adds_weighted_terms(sb) -> None:
    task, add = _code(["reward_fns:length", "reward_fns:distinct_chars"], "[0.5,2.0]", sandbox=sb)
    [(r, _)] = task.score_joint([JointTurn(add, (ADD,))])
    assert r.all_passed and r.tests_passed == r.tests_total > 0  # the levels still ran the tests
    assert r.components["length"] == pytest.approx(len(ADD) / 100)  # each function's own value, unweighted
    assert r.components["distinct_chars"] == pytest.approx(len(set(ADD)) / 100)
    assert r.total == pytest.approx(3.0 + 0.5 * r.components["length"] + 2.0 * r.components["distinct_chars"])
    assert task.reward_terms.names == ("length", "distinct_chars")


def test_the_call_follows_trls_convention_with_one_row_per_agent(sb) -> None:
    reward_fns.CALLS.clear()
    task, add = _code(["reward_fns:record"], task="code_collab", sandbox=sb)
    helper, main = "```python\ndef aux(x):\n    return x\n```", ADD
    [(r1, _), (r2, _)] = task.score_joint([JointTurn(add, (helper, main)), JointTurn(add, ("no code", main))])
    [call] = reward_fns.CALLS
    assert call["prompts"] == [add.prompt] * 4 and call["completions"] == [helper, main, "no code", main]
    assert call["agent"] == [0, 1, 0, 1] and call["role"] == ["helper", "main"] * 2
    assert (call["entry_point"] == ["add"] * 4 and call["test"] == [add.test] * 4
            and call["task_id"] == [add.task_id] * 4)
    assert call["scored"][1] == r1.codes[1] and call["scored"][0] == r1.codes[0]  # what the levels judged
    # one joint action's value is the mean over its agents' rows (record returns 0, 1, 2, 3)
    assert r1.components["record"] == 0.5 and r2.components["record"] == 2.5


def test_none_is_left_out_of_the_mean_and_all_none_is_zero_with_a_note(sb) -> None:
    task, add = _code(["reward_fns:main_only", "reward_fns:never"], task="code_collab", sandbox=sb)
    [(r, _)] = task.score_joint([JointTurn(add, ("x", ADD))])
    assert r.components["main_only"] == 1.0 and r.components["never"] == 0.0
    assert "never: no value (None for every agent)" in r.notes


@pytest.mark.parametrize(("fn", "message"), [
    ("raises", "task.reward_funcs: reward_fns:raises raised KeyError: 'answer'"),
    ("too_short", "task.reward_funcs: reward_fns:too_short returned 1 values for 2 rows"),
    ("not_a_number", "task.reward_funcs: reward_fns:not_a_number returned 'high' at index 0; expected a finite "
                     "number or None"),
    ("nan", "task.reward_funcs: reward_fns:nan returned nan at index 0; expected a finite number or None"),
])
def test_a_function_that_fails_stops_with_one_line_naming_it(sb, fn: str, message: str) -> None:
    task, add = _code([f"reward_fns:{fn}"], sandbox=sb)
    with pytest.raises(RewardFunctionError) as err:
        task.score_joint([JointTurn(add, (ADD,)), JointTurn(add, ("x",))])
    assert str(err.value) == message


@pytest.mark.parametrize(("override", "message"), [
    ("task.reward_funcs=[reward_fns]", "config error: task.reward_funcs: 'reward_fns' is not allowed; expected "
                                       "module:function"),
    ("task.reward_funcs=[no_such_mod_xyz:f]", "config error: task.reward_funcs: cannot import 'no_such_mod_xyz' "
                                              "(from 'no_such_mod_xyz:f'): ModuleNotFoundError"),
    ("task.reward_funcs=[reward_fns:nope]", "config error: task.reward_funcs: 'reward_fns:nope': module 'reward_fns' "
                                            "has no 'nope'"),
    ("task.reward_funcs=[reward_fns:CALLS]", "config error: task.reward_funcs: 'reward_fns:CALLS' is a list, not a "
                                             "function"),
    ("task.reward_funcs=[reward_fns:length,reward_fns:Scorer.length]", "config error: task.reward_funcs: "
     "'reward_fns:Scorer.length' and 'reward_fns:length' are both named 'length'"),
])
def test_bad_specs_are_one_config_error_at_load(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["task.name=code_single", "magrpo.num_agents=1", override])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_weights_must_match_the_functions() -> None:
    with pytest.raises(ConfigError, match=r"^config error: task.reward_weights=\[1.0, 2.0\] is not allowed; expected "
                                          r"1 finite number \(one per task.reward_funcs entry\) or null$"):
        load_config(None, ["task.reward_funcs=[reward_fns:length]", "task.reward_weights=[1,2]"])
    assert load_config(None, ["task.reward_funcs=[reward_fns:Scorer.length]"]).task.reward_funcs == [
        "reward_fns:Scorer.length"]


def test_each_term_is_a_metric_per_turn_and_overall(sb) -> None:
    task, add = _code(["reward_fns:length"], sandbox=sb)
    scored = [r for r, _ in task.score_joint([JointTurn(add, ("a" * 100,)), JointTurn(add, ("a" * 300,))])]
    root = Node(id="0", turn=1, root=0, messages=[[]], rewards=[r.total for r in scored], details=scored)
    means = turn_means(turn_sums([root], 1, task.count_names, task.counts))
    assert means["turn_1/reward/length"] == pytest.approx(2.0) and means["reward/length"] == pytest.approx(2.0)



@pytest.mark.parametrize(("fn", "values"), [("as_numpy", [1.0, 3.0]), ("as_tensor", [1.0, 3.0]),
                                            ("tensor_items", [1.0, 2.0])])
def test_numpy_arrays_and_tensors_are_accepted_as_returned_values(sb, fn: str, values: list[float]) -> None:
    task, add = _code([f"reward_fns:{fn}"], sandbox=sb)
    scored = [r for r, _ in task.score_joint([JointTurn(add, ("a" * 100,)), JointTurn(add, ("a" * 300,))])]
    assert [r.components[fn] for r in scored] == pytest.approx(values)


def test_a_two_dimensional_array_is_one_line_naming_the_function(sb) -> None:
    task, add = _code(["reward_fns:two_d"], sandbox=sb)
    with pytest.raises(RewardFunctionError, match=r"^task.reward_funcs: reward_fns:two_d returned an array of shape "
                                                  r"\(2, 2\), expected 2 numbers$"):
        task.score_joint([JointTurn(add, (ADD,)), JointTurn(add, ("x",))])


def test_components_and_metrics_are_unweighted_and_the_weighted_sum_is_logged(sb) -> None:
    """As TRL logs rewards/<name>: each function's own mean; the total adds the weighted terms."""
    task, add = _code(["reward_fns:length", "reward_fns:distinct_chars"], "[0.5,2.0]", sandbox=sb)
    [(r, _)] = task.score_joint([JointTurn(add, (ADD,))])
    length, distinct = len(ADD) / 100, len(set(ADD)) / 100
    assert r.components["length"] == pytest.approx(length) and r.components["distinct_chars"] == pytest.approx(distinct)
    assert r.total == pytest.approx(3.0 + 0.5 * length + 2.0 * distinct)  # the levels' 3.0 and the weighted terms
    counts = task.counts(r)
    assert counts["reward/length"] == pytest.approx(length)
    assert counts["reward/distinct_chars"] == pytest.approx(distinct)
    assert counts["reward/weighted_sum"] == pytest.approx(0.5 * length + 2.0 * distinct)
    assert "reward/weighted_sum" in task.count_names


def test_multi_turn_rewards_get_the_turn_and_the_completion_ids(sb) -> None:
    reward_fns.CALLS.clear()
    task, add = _code(["reward_fns:record"], sandbox=sb)
    task.score_joint([JointTurn(add, (ADD,), turn=2, completion_ids=((5, 6, 7),))])
    [call] = reward_fns.CALLS
    assert call["turn"] == [2] and call["completion_ids"] == [[5, 6, 7]]



class LengthScore:
    """A callable object, as TRL users pass them."""

    def __call__(self, completions: list, **kwargs: object) -> list[float]:
        return [1.0] * len(completions)


def test_lambdas_partials_and_callable_objects_get_a_name_in_this_process() -> None:
    import functools

    from comlrl.tasks.reward_funcs import resolve, spec_of

    first, second = (lambda completions, **kw: [0.0] * len(completions)), (lambda completions, **kw: [1.0])
    part, obj = functools.partial(reward_fns.length, prompts=None), LengthScore()
    specs: list[str] = []
    for fn in (first, second, part, obj):
        specs.append(spec_of(fn, specs))
    # names do not depend on what this process named before: a notebook cell run again names its functions alike
    assert specs == ["python:lambda", "python:lambda_2", "python:length", "python:LengthScore"]
    assert [resolve(s) for s in specs] == [first, second, part, obj]
    again = lambda completions, **kw: [2.0] * len(completions)  # noqa: E731 - the cell's lambda, defined anew
    assert spec_of(again) == "python:lambda" and resolve("python:lambda") is again  # the latest is held
    assert spec_of(reward_fns.length) == "reward_fns:length"  # importable by name: named so (resumable by the CLI)


def test_a_function_and_its_partial_are_named_apart_as_two_lambdas_are() -> None:
    import functools

    from comlrl.tasks.reward_funcs import component_name, spec_of, validate_specs

    specs: list[str] = []
    for fn in (reward_fns.length, functools.partial(reward_fns.length, prompts=None),
               functools.partial(reward_fns.length, prompts=[])):
        specs.append(spec_of(fn, specs))
    assert specs == ["reward_fns:length", "python:length_2", "python:length_3"]
    assert [component_name(s) for s in specs] == ["length", "length_2", "length_3"]
    validate_specs(specs, None)  # accepted: no two share a component name


def test_a_python_name_from_another_process_says_to_pass_the_function_again() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["task.name=code_single", "magrpo.num_agents=1", "task.reward_funcs=[python:gone_fn]"])
    assert str(err.value) == (
        "config error: task.reward_funcs: 'python:gone_fn' was a function handed to train() in another process (a "
        "lambda, functools.partial or callable object has no importable name): pass it again with "
        "train(..., reward_funcs=[...]), or name a module:function to resume from the command line")


# --- the text task: prompts from a table of rows, any number of agents ------------------------------------


def _text_task(tmp_path: Path, rows: list[dict], *over: str):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(None, ["task.name=text", "task.text.roles=[solver,checker]", "magrpo.num_agents=2",
                             "dataset.name=hf", f"dataset.path={data}", "dataset.eval_size=1", *over])
    return cfg, build_task(cfg.task, None)


def test_text_task_passes_columns_and_chat_completions(tmp_path: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}], "answer": str(2 * i)} for i in range(4)]
    cfg, task = _text_task(tmp_path, rows, "task.reward_funcs=[reward_fns:contains_answer,reward_fns:record]",
                           "task.text.instructions=[Answer with a number.,Check the sum.]",
                           "task.text.pass_threshold=1.0", "task.text.system_prompt=Be brief.")
    train, evals = task.load(cfg.dataset)
    assert len(train) == 3 and len(evals) == 1 and task.num_agents == 2 and task.role_names == ["solver", "checker"]
    problem = train[0]
    chats = task.initial_messages(problem)
    assert chats[0][0] == {"role": "system", "content": "Be brief."}
    assert chats[1][1]["content"] == f"{problem.prompt[0]['content']}\n\nCheck the sum."
    reward_fns.CALLS.clear()
    good = problem.columns["answer"]
    [(r, _)] = task.score_joint([JointTurn(problem, (f"It is {good}.", "no idea"))])
    [call] = reward_fns.CALLS
    assert call["prompts"] == [problem.prompt] * 2  # chat data: the messages as the row has them
    assert call["completions"] == [[{"role": "assistant", "content": f"It is {good}."}],
                                   [{"role": "assistant", "content": "no idea"}]]
    assert call["answer"] == [good] * 2 and call["task_id"] == [problem.task_id] * 2
    assert r.components["contains_answer"] == 0.5 and r.total == pytest.approx(0.5 + 0.5) and r.all_passed


def test_text_task_next_turn_shows_the_team_and_the_score(tmp_path: Path) -> None:
    from comlrl.tree.contracts import Continuation

    cfg, task = _text_task(tmp_path, [{"prompt": f"Name {i} fruit.", "id": i} for i in range(3)],
                           "task.reward_funcs=[reward_fns:length]", "dataset.fields.task_id=id")
    problem = task.load(cfg.dataset)[0][0]
    assert isinstance(problem.prompt, str) and problem.task_id == str(problem.columns["id"])
    [(r, _)] = task.score_joint([JointTurn(problem, ("apple", "pear"))])
    node = Node(id="0", turn=1, root=0, messages=[[], []], details=[r], rewards=[r.total])
    [chats] = task.transition(None).next_messages(task, [Continuation(problem, node, 0, [["apple"], ["pear"]])])
    assert chats[0][-2] == {"role": "assistant", "content": "apple"}
    assert chats[0][-1]["content"] == (f"Your team's answers scored {r.total:.3g} (higher is better).\n\n"
                                       "checker's answer:\npear\n\nGive an improved answer.")


def test_text_task_without_reward_functions_is_refused_before_start_up() -> None:
    """It passed --print-config and was refused only after the sandbox and the model had started."""
    from comlrl.config.checks import check_runnable

    cfg = load_config(None, ["task.name=text", "magrpo.num_agents=1"])  # the Python API may add them later
    message = (r"^config error: task.reward_funcs=\[\] is not allowed; expected at least one module:function for "
               r"task.name=text \(its reward comes only from them\)$")
    with pytest.raises(ConfigError, match=message):
        check_runnable(cfg)
    check_runnable(load_config(cfg, ["task.reward_funcs=[reward_fns:length]"]))
    res = subprocess.run([sys.executable, "scripts/train.py", "task.name=text", "magrpo.num_agents=1",
                          "--print-config"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and re.match(message, res.stderr.strip()) and not res.stdout


@pytest.mark.parametrize(("over", "message"), [
    (["task.reward_funcs=[reward_fns:length]", "task.text.roles=[a,b,c]"],
     "config error: magrpo.num_agents=2 is not allowed; expected 3 for task.name=text"),
    (["task.reward_funcs=[reward_fns:length]", "task.text.instructions=[x]"],
     "config error: task.text.instructions has 1 entries; expected 2"),
])
def test_text_task_config_errors(over: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["task.name=text", "task.text.roles=[solver,checker]", "magrpo.num_agents=2", *over])
    assert str(err.value).startswith(message)


def test_text_task_bad_rows_name_the_row_and_field(tmp_path: Path) -> None:
    from comlrl.tasks.datasets import DatasetError

    cfg, task = _text_task(tmp_path, [{"prompt": "ok"}, {"prompt": 3}, {"prompt": "fine"}],
                           "task.reward_funcs=[reward_fns:length]")
    with pytest.raises(DatasetError, match=r"rows.jsonl: row 2: field 'prompt' \(dataset.fields.prompt\) must be a "
                                           r"non-empty string or a list of chat messages"):
        task.load(cfg.dataset)
    cfg.dataset.name = "easy"
    with pytest.raises(DatasetError, match=r"^dataset.name='easy': task.name=text reads a table of rows"):
        task.load(cfg.dataset)


def test_both_table_loaders_number_the_same_row_alike(tmp_path: Path) -> None:
    """Issue 24, item 10: one table, one bad row, the same row number from the text task and a code task
    (counted from 1, as the jsonl loader counts lines)."""
    from comlrl.tasks.datasets import DatasetError

    good = {"test": "assert f() == 1", "entry_point": "f"}
    rows = [{"prompt": "ok", "task_id": "a", **good}, {"prompt": "", "task_id": "b", **good}]
    cfg, text = _text_task(tmp_path, rows, "task.reward_funcs=[reward_fns:length]")
    code = build_task(load_config(None, ["task.name=code_single", "magrpo.num_agents=1", "dataset.name=hf",
                                         f"dataset.path={cfg.dataset.path}"]).task, None)
    for task in (text, code):
        with pytest.raises(DatasetError, match=r"rows.jsonl: row 2: field 'prompt'"):
            task.load(cfg.dataset)
    rows[1] = {**rows[1], "prompt": "fine", "task_id": "a"}
    cfg, text = _text_task(tmp_path, rows, "task.reward_funcs=[reward_fns:length]")
    for task in (text, code):
        with pytest.raises(DatasetError) as err:
            task.load(cfg.dataset)
        assert str(err.value) == f"{cfg.dataset.path}: row 2: duplicate task_id 'a' (first in row 1)"


@pytest.mark.slow
def test_a_raising_function_ends_the_run_with_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    from trainer.trainer_helpers import ROOT, TINY, env

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Say {i}."}) + "\n" for i in range(4)))
    args = [a for a in TINY if not a.startswith("task.reward_funcs=")]
    res = subprocess.run([sys.executable, "scripts/train.py", *args, "task.name=text", "magrpo.num_agents=1",
                          "dataset.name=hf", f"dataset.path={data}", "dataset.eval_size=1", "training.steps=1",
                          "task.reward_funcs=[reward_fns:raises]", f"training.output_dir={tmp_path / 'run'}"],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-1] == ("error: task.reward_funcs: reward_fns:raises raised "
                                                   "KeyError: 'answer'")
    assert "Traceback" not in res.stderr


@pytest.mark.slow
def test_a_function_that_raises_mid_run_says_how_to_go_on(tmp_path: Path) -> None:
    """Step 1 finished (its checkpoint written): the same command would be refused (the folder holds a run),
    so the one line says where it stopped and how to resume, as an interrupted run's line does."""
    import subprocess
    import sys

    from trainer.trainer_helpers import ROOT, TINY, env

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Say {i}."}) + "\n" for i in range(4)))
    run = tmp_path / "run"
    args = [a for a in TINY if not a.startswith("task.reward_funcs=")]
    res = subprocess.run([sys.executable, "scripts/train.py", *args, "task.name=text", "magrpo.num_agents=1",
                          "dataset.name=hf", f"dataset.path={data}", "dataset.eval_size=0",
                          "evaluation.probe_problems=0", "training.steps=4",
                          "task.reward_funcs=[reward_fns:raises_later]", f"training.output_dir={run}"],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-1] == (
        "error: task.reward_funcs: reward_fns:raises_later raised KeyError: 'answer'; stopped during step 2; "
        f"checkpoint step-1 is intact; resume with --resume {run}")


def test_exports_call_the_text_tasks_agents_by_their_configured_roles(tmp_path: Path) -> None:
    from comlrl.cli.export import role_names
    from comlrl.config.schema import to_yaml

    cfg, _ = _text_task(tmp_path, [{"prompt": "x"}] * 3, "task.reward_funcs=[reward_fns:length]")
    (tmp_path / "config.yaml").write_text(to_yaml(cfg))
    assert role_names(tmp_path / "trees.jsonl") == ["solver", "checker"]
