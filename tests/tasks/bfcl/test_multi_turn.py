"""task.name=bfcl_multi_turn on BFCL's real backend classes, entries and multi-turn checker: per-path states
(siblings diverge, children continue), the gold trajectories pass at every turn, bad output is an
observation and a low reward, the scoring process's time limit, and one tiny-model training run (slow)."""

from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("bfcl_eval")

from comlrl.errors import ConfigError  # noqa: E402
from comlrl.tasks import TASKS, build_task  # noqa: E402
from comlrl.tasks.bfcl import BfclMultiTurnConfig, BfclMultiTurnTask  # noqa: E402
from comlrl.tasks.bfcl.calls import decode  # noqa: E402
from comlrl.tasks.bfcl.data import load_category  # noqa: E402
from comlrl.tasks.bfcl.environment import TurnState  # noqa: E402
from comlrl.tasks.bfcl.scorer import Failed, Scorer  # noqa: E402
from comlrl.tasks.bfcl.turn_reward import call_match  # noqa: E402
from comlrl.tasks.datasets import DatasetConfig  # noqa: E402
from comlrl.tree.contracts import JointTurn, TaskConfig  # noqa: E402
from comlrl.tree.rollout import Rollout, TreeShape  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def problems():
    return {p.task_id: p for p in load_category("multi_turn_base")}


@pytest.fixture(scope="module")
def task():
    """One reply per user turn (`steps_per_turn=1`): the tests of the environment turn by turn."""
    t = BfclMultiTurnTask(BfclMultiTurnConfig(steps_per_turn=1))
    yield t
    t.close()


def step(task, problem, state, *texts):
    """Score one joint action (one reply per agent) on `state`: (reward, state after)."""
    return task.score_turns([JointTurn(problem, tuple(texts), state)])[0]


def fs(state):
    """The GorillaFileSystem instance of a state (a copy: unpickled)."""
    return pickle.loads(state.instances)["GorillaFileSystem"]


def test_registered_and_options_checked():
    assert TASKS["bfcl_multi_turn"] is BfclMultiTurnTask
    assert build_task(TaskConfig(name="bfcl_multi_turn"), None).num_agents == 1
    BfclMultiTurnTask.validate_options(BfclMultiTurnConfig())
    for bad, key in ((BfclMultiTurnConfig(categories=["simple_python"]), "categories"),
                     (BfclMultiTurnConfig(docs="xml"), "docs"), (BfclMultiTurnConfig(classes=["Shell"]), "classes"),
                     (BfclMultiTurnConfig(step_timeout_s=0), "step_timeout_s"),
                     (BfclMultiTurnConfig(max_user_turns=0), "max_user_turns"),
                     (BfclMultiTurnConfig(max_turn_calls=0), "max_turn_calls"),
                     (BfclMultiTurnConfig(max_call_args=-1), "max_call_args"),
                     (BfclMultiTurnConfig(call_reward=-0.1), "call_reward"),
                     (BfclMultiTurnConfig(steps_per_turn=0), "steps_per_turn"),
                     (BfclMultiTurnConfig(lenient_reward=-1), "lenient_reward"),
                     (BfclMultiTurnConfig(roles=["a", "a"]), "roles"),
                     (BfclMultiTurnConfig(error_penalty=-1), "error")):
        with pytest.raises(ConfigError, match=rf"^config error: task\.bfcl_multi_turn\.{key}"):
            BfclMultiTurnTask.validate_options(bad)
    assert BfclMultiTurnTask.resolve_options(BfclMultiTurnConfig(), 3).max_user_turns == 3
    assert BfclMultiTurnTask.resolve_options(BfclMultiTurnConfig(max_user_turns=5), 3).max_user_turns == 5


def test_load_keeps_entries_within_the_turn_limit_and_classes():
    t = BfclMultiTurnTask(BfclMultiTurnConfig(max_user_turns=2, classes=["TradingBot", "MathAPI"]))
    train, evals = t.load(DatasetConfig(eval_size=2))
    assert len(evals) == 2 and train
    for p in train + evals:
        assert len(p.turns) <= 2 and set(p.entry["involved_classes"]) <= {"TradingBot", "MathAPI"}
    messages = t.initial_messages(train[0])
    assert messages[0][0]["role"] == "system" and "get_stock_info(" in messages[0][0]["content"]
    assert t.answer_prefix(0, train[0]) == "["
    # the worked example: a training entry with the same classes, its first turn answered with its gold calls
    held_out = {p.task_id for p in evals}
    for p in train + evals:
        example = t.example_chat(p)
        if not example:
            continue
        shown = next(e for e in t.examples if f"Example request: {e.turns[0][0]['content']}" == example[0]["content"])
        assert shown.task_id != p.task_id and shown.task_id not in held_out
        assert set(shown.entry["involved_classes"]) == set(p.entry["involved_classes"])
        assert example[1]["content"].startswith("[") and decode(example[1]["content"]).exact
        assert [m["role"] for m in t.initial_messages(p)[0]] == ["system", "user", "assistant", "user"]
    no_examples = BfclMultiTurnTask(BfclMultiTurnConfig(max_user_turns=2, classes=["TradingBot"], examples=False))
    no_examples.load(DatasetConfig(eval_size=2))
    assert [m["role"] for m in no_examples.initial_messages(train[0])[0]] == ["system", "user"]


def test_siblings_diverge_and_children_continue_from_their_parent(task, problems):
    p = problems["multi_turn_base_1"]  # GorillaFileSystem only
    root = task.initial_state(p)
    before = root.instances
    (ra, a), (rb, b) = task.score_turns([JointTurn(p, ("[mkdir(dir_name='a')]",), root),
                                         JointTurn(p, ("[mkdir(dir_name='b')]",), root)])
    assert root.instances == before == task.initial_state(p).instances  # the parent's state is untouched
    assert a.instances != b.instances and a.key != b.key and a.answered == b.answered == 1
    assert "a" in fs(a)._current_dir.contents and "a" not in fs(b)._current_dir.contents
    assert "b" in fs(b)._current_dir.contents and "b" not in fs(root)._current_dir.contents
    assert a.steps == ((("mkdir(dir_name='a')",),),) and a.last == ((("mkdir(dir_name='a')", "None"),),)
    # turn 2: the same call on each path sees that path's directory
    ra2, a2 = step(task, p, a, "[cd(folder='a')]")
    rb2, b2 = step(task, p, b, "[cd(folder='a')]")
    assert a2.last[0][0][1] == '{"current_working_directory": "a"}' and a2.answered == 2
    assert "No such" in b2.last[0][0][1] and rb2.components["call_errors"] == 1
    assert ra2.total > rb2.total and len(a2.steps) == 2


def test_the_default_steps_per_turn_is_bfcls_step_limit():
    from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT

    assert BfclMultiTurnConfig().steps_per_turn == MAXIMUM_STEP_LIMIT == 20


def test_a_user_turn_of_two_replies_runs_the_second_on_the_state_the_first_left(problems):
    p = problems["multi_turn_base_1"]  # GorillaFileSystem only
    t = BfclMultiTurnTask(BfclMultiTurnConfig(steps_per_turn=3))
    try:
        root = t.initial_state(p)
        r1, s1 = step(t, p, root, "[mkdir(dir_name='a')]")
        assert s1.continues_turn and s1.answered == 0 and s1.in_turn == 1
        assert "a" in fs(s1)._current_dir.contents
        shown = t.observation(p, s1)  # the results only: the same user turn goes on, no new request
        assert "mkdir(dir_name='a')" in shown and p.turns[1][0]["content"] not in shown
        r2, s2 = step(t, p, s1, "[cd(folder='a')]")  # runs in the directory the first reply made
        assert s2.last == ((("cd(folder='a')", '{"current_working_directory": "a"}'),),)
        assert s2.continues_turn and s2.in_turn == 2
        assert s2.steps == (((("mkdir(dir_name='a')",), ("cd(folder='a')",))),)  # one user turn, two steps
        r3, s3 = step(t, p, s2, "[]")  # no call: the user turn ends, as in BFCL's loop
        assert not s3.continues_turn and s3.answered == 1 and s3.steps == s2.steps
        assert p.turns[1][0]["content"] in t.observation(p, s3)
        # the limit ends a turn whose replies keep calling
        capped = BfclMultiTurnTask(BfclMultiTurnConfig(steps_per_turn=2))
        try:
            _, c1 = step(capped, p, capped.initial_state(p), "[ls()]")
            _, c2 = step(capped, p, c1, "[ls()]")
            assert c1.continues_turn and not c2.continues_turn and c2.answered == 1
        finally:
            capped.close()
    finally:
        t.close()


def test_the_checker_judges_a_turn_made_in_two_steps_as_bfcl_does(problems):
    p = problems["multi_turn_base_2"]
    gold = list(p.gold[0])
    assert len(gold) >= 2
    t = BfclMultiTurnTask(BfclMultiTurnConfig(steps_per_turn=5))
    try:
        state = t.initial_state(p)
        for call in gold:  # the first user turn's gold, one call per reply
            reward, state = step(t, p, state, f"[{call}]")
            assert reward.components["call_errors"] == 0
        assert reward.all_passed and state.continues_turn
        reward, state = step(t, p, state, "Done.")  # prose: no call, the turn ends
        assert reward.all_passed and state.answered == 1
    finally:
        t.close()


class Scripted:
    """A rollout engine whose turn t answers every prompt with the t-th list of texts (one per sample)."""

    def __init__(self, turns):
        self.turns, self.prompts = list(turns), []

    def generate(self, requests, n, greedy=False):
        texts = self.turns.pop(0)
        self.prompts.append([msgs for _, msgs in requests])
        sizes = n if isinstance(n, list) else [n] * len(requests)
        return [[SimpleNamespace(text=texts[g], completion_ids=[0]) for g in range(k)] for k in sizes]


def test_the_tree_branches_only_at_a_user_turns_first_reply(problems):
    p = problems["multi_turn_base_1"]
    t = BfclMultiTurnTask(BfclMultiTurnConfig(steps_per_turn=3))
    try:
        # reply 1: two siblings that call; reply 2 continues each turn with one sample, then a third level
        engine = Scripted([["[mkdir(dir_name='a')]", "[]"], ["[cd(folder='a')]", "[]"], ["[]", "[]"]])
        [root] = Rollout(t, t.transition(None), engine, [p]).run(
            TreeShape(num_agents=1, num_generations=2, num_turns=3, joint_mode="align", threshold=None), "t")
        calls, stops = root.children[0], root.children[1]
        assert calls.state.continues_turn and not stops.state.continues_turn
        assert len(calls.joint) == 1 and len(stops.joint) == 2  # G=1 inside a turn, G=2 at a turn's first reply
        assert calls.details[0].components["call_errors"] == 0
        shown = calls.messages[0][-2]
        assert shown["role"] == "user" and p.turns[1][0]["content"] not in shown["content"]
        assert p.turns[1][0]["content"] in stops.messages[0][-2]["content"]
    finally:
        t.close()


def test_a_rollout_keeps_each_paths_state_on_its_node(task, problems):
    p = problems["multi_turn_base_1"]
    engine = Scripted([["[mkdir(dir_name='a')]", "[mkdir(dir_name='b')]"], ["[cd(folder='a')]", "[cd(folder='a')]"]])
    [root] = Rollout(task, task.transition(None), engine, [p]).run(
        TreeShape(num_agents=1, num_generations=2, num_turns=2, joint_mode="align", threshold=None), "t")
    assert isinstance(root.state, TurnState) and root.state.answered == 0
    assert root.state.instances == task.initial_state(p).instances
    left, right = root.children[0], root.children[1]
    assert left.state is root.next_states[0] and left.state.key != right.state.key
    assert left.details[0].components["call_errors"] == 0 and right.details[0].components["call_errors"] == 1
    chat = left.messages[0]  # system, user turn 1, own reply, results + user turn 2, the answer prefix
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant"]
    assert chat[2]["content"] == "[mkdir(dir_name='a')]" and chat[-1]["content"] == "["
    assert "'name': \"mkdir(dir_name='a')\"" in chat[3]["content"] and p.turns[1][0]["content"] in chat[3]["content"]
    assert "mkdir(dir_name='b')" in right.messages[0][3]["content"]


@pytest.mark.parametrize("task_id", ["multi_turn_base_2", "multi_turn_base_15", "multi_turn_base_60",
                                     "multi_turn_base_102", "multi_turn_base_154"])
def test_the_gold_calls_pass_the_checker_at_every_turn(task, problems, task_id):
    p = problems[task_id]
    state = task.initial_state(p)
    for k, gold in enumerate(p.gold):
        reward, state = step(task, p, state, "[" + ", ".join(gold) + "]")
        assert reward.all_passed and reward.total == pytest.approx(task.reward_range[1]), (k, reward.notes)
        assert reward.components["call_errors"] == 0 and state.answered == k + 1
    reward, after = step(task, p, state, "[ls()]")  # a tree turn past the last user turn: nothing runs
    assert reward.all_passed and reward.total == 0 and reward.components["after_end"] == 1 and after is state


@pytest.mark.parametrize("reply,observed", [
    ("I am not sure what to do.", "is not a list of function calls"),
    ("[frobnicate(x=1)]", "unknown function 'frobnicate'"),
    ("[mkdir(name='a')]", "got an unexpected keyword argument 'name'"),
    ("[cd(folder=None)]", "Error during execution: 'NoneType' object has no attribute"),  # raised in the backend
    ("[get_stock_info(symbol='AAPL')]", "unknown function 'get_stock_info'"),  # a class the entry does not involve
    ("[__builtins__.open(file='x', mode='w')]", "unknown function '__builtins__.open'"),
])
def test_bad_output_is_an_observation_and_a_low_reward(task, problems, reply, observed):
    p = problems["multi_turn_base_0"]  # TwitterAPI + GorillaFileSystem
    reward, state = step(task, p, task.initial_state(p), reply)
    assert not reward.all_passed and reward.components["checker"] == 0
    assert reward.total < 0.2  # at most a little shaping (a right name) against the pass's 1.0
    shown = task.observation(p, state)
    assert observed in shown and p.turns[1][0]["content"] in shown
    assert (state.answered == 1
            and fs(state)._current_dir.contents.keys() == fs(task.initial_state(p))._current_dir.contents.keys())


def test_a_runaway_call_times_out_and_the_next_request_works(problems):
    p = problems["multi_turn_base_15"]  # GorillaFileSystem + MathAPI
    t = BfclMultiTurnTask(BfclMultiTurnConfig(step_timeout_s=1.0, steps_per_turn=1))
    try:
        root = t.initial_state(p)
        t0 = time.perf_counter()
        out = t.score_turns([JointTurn(p, ("[touch(file_name='DataSet1.csv')]",), root),
                             JointTurn(p, ("[power(base=10, exponent=100000000)]",), root),
                             JointTurn(p, ("[add(a=1, b=2)]",), root)])
        assert time.perf_counter() - t0 < 15
        (ok, s_ok), (slow, s_slow), (add, s_add) = out
        assert ok.all_passed and s_ok.answered == 1
        assert slow.total == -t.error_penalty and slow.components["timed_out"] == 1 and not slow.all_passed
        assert s_slow.answered == 0 and s_slow.instances == root.instances and s_slow.note == "execution timed out"
        assert ("execution timed out" in t.observation(p, s_slow)
                and p.turns[0][0]["content"] in t.observation(p, s_slow))
        assert s_add.last == ((("add(a=1, b=2)", '{"result": 3}'),),)  # the batch's rest ran in a fresh process
        assert t.scorer.timeouts == 1 and t.scorer.starts == 2
        assert step(t, p, s_ok, "[echo(content='x', file_name='DataSet1.csv')]")[1].answered == 2
        assert t.metrics() == {"scorer_timeouts": 1.0, "scorer_starts": 2.0, "scorer_deaths": 0.0}
    finally:
        t.close()


def test_the_scorer_restarts_a_dead_child_once_and_is_gone_after_close():
    s = Scorer(timeout_s=5.0, memory_bytes=0)
    try:
        assert s.run(abs, [-3, 4]) == [3, 4]
        first = s.pid
        out = s.run(os._exit, [7])  # the child dies on it, twice: the item fails, nothing hangs
        assert out == [Failed("died")] and s.deaths == 2
        assert s.run(abs, [-1]) == [1] and s.pid not in (None, first)
        assert isinstance(s.run(int, ["x"])[0], Failed)  # an exception is the item's failure, not the child's
        proc = s._proc
    finally:
        s.close()
    assert s.pid is None and not proc.is_alive() and proc.exitcode is not None


def test_the_scoring_process_hashes_strings_with_seed_0_and_leaves_the_trainers_environment_alone():
    # A backend's text must not depend on the child's random hash seed (TicketAPI joins a set into its error).
    expected = int(subprocess.run([sys.executable, "-c", "print(hash('comlrl'))"], capture_output=True, text=True,
                                  env={"PYTHONHASHSEED": "0"}, check=True).stdout)
    before = os.environ.get("PYTHONHASHSEED")
    s = Scorer(timeout_s=30.0, memory_bytes=0)
    try:
        assert s.run(hash, ["comlrl"]) == [expected]
    finally:
        s.close()
    assert os.environ.get("PYTHONHASHSEED") == before


def test_close_ends_the_scoring_process(problems):
    t = BfclMultiTurnTask()
    p = problems["multi_turn_base_1"]
    step(t, p, t.initial_state(p), "[pwd()]")
    proc = t.scorer._proc
    assert proc.is_alive()
    t.close()
    assert not proc.is_alive() and t.scorer.pid is None


@pytest.mark.slow
def test_a_tiny_model_trains_on_the_multi_turn_environment(tmp_path):
    """Two tree turns on the tiny random model: the trainer runs the environment, writes its trees, and the
    turn-2 prompts carry the turn-1 results and the next user turn."""
    from comlrl.models import resolve_model_path

    resolve_model_path("tiny-random")
    run = tmp_path / "mt"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH")) if p)
    args = ["--config", "configs/align_T2_G4.yaml", "model.name=tiny-random", "model.max_new_tokens=8",
            "rollout.engine=hf", "training.torch_threads=1", "logging.progress_bar=false", "training.trees_per_step=1",
            "task.name=bfcl_multi_turn", "task.reward_funcs=[reward_fns:distinct_chars]", "magrpo.num_agents=1",
            "magrpo.num_generations=2", "magrpo.num_turns=2", "dataset.eval_size=1", "dataset.max_problems=2",
            "training.steps=1", "training.eval_size=1", "evaluation.samples=0", "evaluation.greedy=true",
            "evaluation.probe_problems=0", f"training.output_dir={run}"]
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "train.py"), *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (run / "metrics.jsonl").is_file() and (run / "eval.jsonl").is_file() and (run / "final").is_dir()
    trees = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    by_turn = {t: [n for n in trees if n["turn"] == t] for t in (1, 2)}
    assert len(by_turn[1]) == 1 and len(by_turn[2]) == 2
    keys = {t: {d["notes"][0].split()[1] for n in nodes for d in n["reward_details"]
                if not d["components"]["after_end"]}
            for t, nodes in by_turn.items()}
    assert keys[1] and keys[1].isdisjoint(keys[2])  # each turn-2 node acted on its parent's state, left a new one
    question = by_turn[1][0]["prompts"][0][-2]
    for node in by_turn[2]:
        results = node["prompts"][0][-2]  # the turn-1 results and the next user turn
        assert results["role"] == question["role"] == "user" and results["content"] != question["content"]
        assert "'role': 'tool'" in results["content"] or not any(d["components"]["decoded"] for d in
                                                                  by_turn[1][0]["reward_details"])
        assert node["prompts"][0][-1] == {"role": "assistant", "content": "["}


def test_cut_longer_keeps_every_entry_as_its_first_user_turns():
    t = BfclMultiTurnTask(BfclMultiTurnConfig(max_user_turns=1, cut_longer=True))
    train, evals = t.load(DatasetConfig(eval_size=4))
    full = {p.task_id: p for p in load_category("multi_turn_base")}
    assert len(train) + len(evals) == len(full)  # none left out
    for p in train + evals:
        assert p.turns == full[p.task_id].turns[:1] and list(p.gold) == list(full[p.task_id].gold)[:1]
    kept = BfclMultiTurnTask(BfclMultiTurnConfig(max_user_turns=1))  # without the cut: the 1-turn entries only
    tr, ev = kept.load(DatasetConfig(eval_size=1))
    assert len(tr) + len(ev) == sum(len(p.turns) == 1 for p in full.values())


@pytest.mark.parametrize("gold,reply,credit", [
    (["ls(a=True)"], "[ls(a=True)]", 1.0),
    (["ls(a=True)"], "[ls()]", 0.5),  # the name: 1 of (1 + 1 argument)
    (["ls(a=True)"], "[ls(a=False)]", 0.5),
    (["ls(a=True)"], "[pwd()]", 0.0),
    (["ls(a=True)"], "[ls(a=True), ls(a=True)]", 1.0),  # extra calls are the checker's to judge
    (["cd(folder='d')", "mkdir(dir_name='t')"], "[cd(folder='d'), mkdir(dir_name='x')]", 0.75),
    (["cd(folder='d')", "cd(folder='e')"], "[cd(folder='e')]", 0.5),  # one reply call matches one gold call
    (["cd(folder='d')", "cd(folder='e')"], "[cd(folder='e'), cd(folder='d')]", 1.0),  # order left to the checker
    ([], "[ls()]", 0.0),  # a turn that wants no call
    (["ls(a=True)"], "not calls", 0.0),
])
def test_call_match_credits_each_gold_call_by_name_and_arguments(gold, reply, credit):
    assert call_match(gold, list(decode(reply).calls)) == pytest.approx(credit)


def test_the_calls_matched_component_is_shaping_beside_the_checkers_pass(task, problems):
    p = problems["multi_turn_base_2"]
    gold = "[" + ", ".join(p.gold[0]) + "]"
    right, _ = step(task, p, task.initial_state(p), gold)
    assert (right.components["calls_matched"] == 1.0
            and right.total == pytest.approx(1 + task.format_reward + task.call_reward))
    name_only, _ = step(task, p, task.initial_state(p), "[" + p.gold[0][0].split("(")[0] + "()]")
    assert name_only.components["calls_matched"] > 0 and not name_only.passed


def test_max_call_args_keeps_the_entries_whose_kept_calls_are_short():
    """The curriculum of short calls: of the 98 single-call first turns, 48 pass one argument and 12 none
    (counted here from the ground truth's Python syntax, not the task's decoder)."""
    def arguments(text: str) -> int:
        call = ast.parse(text).body[0].value
        return len(call.args) + len(call.keywords)

    full = load_category("multi_turn_base")
    for most, expected in ((1, 60), (0, 12)):
        t = BfclMultiTurnTask(BfclMultiTurnConfig(max_user_turns=1, cut_longer=True, max_turn_calls=1,
                                                  max_call_args=most))
        train, evals = t.load(DatasetConfig(eval_size=4))
        kept = train + evals
        assert len(kept) == expected == sum(len(p.gold[0]) == 1 and arguments(p.gold[0][0]) <= most for p in full)
        assert all(arguments(p.gold[0][0]) <= most for p in kept)


def test_max_turn_calls_keeps_the_entries_whose_kept_turns_want_few_calls():
    full = load_category("multi_turn_base")
    t = BfclMultiTurnTask(BfclMultiTurnConfig(max_user_turns=1, cut_longer=True, max_turn_calls=1))
    train, evals = t.load(DatasetConfig(eval_size=4))
    assert len(train) + len(evals) == sum(len(p.gold[0]) <= 1 for p in full) == 98
    assert all(len(p.gold[0]) == 1 for p in train + evals)
